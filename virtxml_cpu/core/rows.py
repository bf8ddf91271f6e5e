"""The libvirt_xml rows read from a parsed <domain>, as libvirt's XPath reads them, each parent element's
children once: the SETTINGS (settings) and the PLACEMENT elements (placement), with the child lookups
domain.extract shares (children, first, last)."""

from __future__ import annotations

from collections import namedtuple

from ..tables.libvirt_xml import PLACEMENT, SETTINGS, Placement, Setting


class Placed(namedtuple("Placed", "key cpus attrs")):
    """One element of a libvirt_xml.PLACEMENT row as written: its attributes' text, None when absent."""

    __slots__ = ()  # a plain named tuple: its fields, annotated below for readers

    key: str  # the row's key
    cpus: str | None  # the set attribute (cpuset / vcpus)
    attrs: tuple[str | None, ...]  # the row's other attributes, in its order


def _rows_by_parent(rows) -> tuple[tuple[tuple[str, ...], tuple[tuple[int, Setting, str], ...]], ...]:
    """SETTINGS rows by the element holding them: (parent path, ((place in SETTINGS, row, its element's
    tag), ...)), shorter paths first."""
    out: dict[tuple[str, ...], list[tuple[int, Setting, str]]] = {}
    for i, row in enumerate(rows):
        out.setdefault(row.path[:-1], []).append((i, row, row.path[-1]))
    return tuple((path, tuple(found)) for path, found in sorted(out.items(), key=lambda item: len(item[0])))


_SETTING_PARENTS = _rows_by_parent(SETTINGS)


def settings(read: dict) -> tuple[tuple[str, str], ...]:
    """The libvirt_xml.SETTINGS rows, in their order, read one parent element at a time: each distinct parent
    (worked out at import) is found and its children read once, however many rows it holds (not at all for
    a row that selects among its siblings). `read`: path below <domain> -> children() of the element there,
    for () and the parents already read; filled in here."""
    found = []
    for path, rows in _SETTING_PARENTS:
        parent = _children_at(read, path[:-1]).get(path[-1])
        if parent is None:
            continue
        kids = read.get(path)
        for i, row, tag in rows:
            if row.select:
                child = last(parent, tag, *row.select)
            else:
                if kids is None:
                    kids = read[path] = children(parent)
                child = kids.get(tag)
            if child is not None:
                value = child.get(row.attr)
                if value is None:
                    value = row.bare
                if value is not None:
                    found.append((i, row.key, value))
    if len(found) > 1:
        found.sort()
    return tuple((key, value) for _, key, value in found)


def _children_at(read: dict, path: tuple[str, ...]) -> dict:
    """children() of the element at `path` below <domain> (the first of each tag at each step), kept in `read`."""
    kids = read.get(path)
    if kids is None:
        kids = read[path] = children(_children_at(read, path[:-1]).get(path[-1]))
    return kids


def _by_parent(rows) -> dict[str, tuple[bool, dict[str | None, Placement]]]:
    """PLACEMENT rows by the top-level element holding them: tag -> (first only, {child tag: row}); a row
    whose path is one element long is that element itself (child tag None)."""
    out: dict[str, tuple[bool, dict[str | None, Placement]]] = {}
    for row in rows:
        out.setdefault(row.path[0], (row.first, {}))[1][row.path[1] if len(row.path) > 1 else None] = row
    return out


_PLACEMENT_PARENTS = _by_parent(PLACEMENT)


def placement(root, top: dict) -> tuple[Placed, ...]:
    """The libvirt_xml.PLACEMENT rows, read as libvirt's XPath does (every element at a row's path, or the
    first), in one pass over each parent. An element without any of its row's attributes is left out when
    libvirt takes that as nothing. Sorted in PLACEMENT order, as libvirt parses them."""
    out: list[Placed] = []
    for tag, (first_only, rows) in _PLACEMENT_PARENTS.items():
        if tag not in top:
            continue
        parents = [top[tag]] if first_only else root.iterchildren(tag)
        for parent in parents:
            row = rows.get(None)
            if row is not None:
                _place(out, row, parent)
            if len(rows) > (row is not None):
                for el in parent:
                    child = rows.get(el.tag)
                    if child is not None:
                        _place(out, child, el)
    if len(out) > 1:
        out.sort(key=lambda p: _PLACEMENT_ORDER[p.key])
    return tuple(out)


_PLACEMENT_ORDER = {row.key: i for i, row in enumerate(PLACEMENT)}


def _place(out: list, row: Placement, el) -> None:
    cpus, attrs = el.get(row.cpus), tuple(map(el.get, row.attrs))
    if cpus is not None or row.missing is not None or attrs != (None,) * len(attrs):
        out.append(Placed(row.key, cpus, attrs))


def children(el) -> dict:
    """First child element of each tag, in one pass (the tags libvirt writes once), in document order;
    {} for no element."""
    out: dict = {}
    if el is not None:
        for c in el:
            tag = c.tag
            if tag not in out and isinstance(tag, str):  # not a comment or processing instruction
                out[tag] = c
    return out


def first(el, tag: str):
    """The first child of `el` with that tag (`children(el).get(tag)` without reading the rest); None for
    no element or no such child."""
    if el is not None:
        for c in el:
            if c.tag == tag:
                return c
    return None


def last(el, tag: str, attr: str, value: str):
    """The last child of `el` with that tag and attribute value (a libvirt_xml row's `select`), or None."""
    found = None
    for c in el:
        if c.tag == tag and c.get(attr) == value:
            found = c
    return found
