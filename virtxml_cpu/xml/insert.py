"""Rewriting: the elements to add for a decision, placed where libvirt itself puts them."""

from __future__ import annotations

from lxml import etree

from ..tables import libvirt_order, libvirt_xml
from ..errors import BadInput
from .edit import Insertion, apply_insertions, same_tree
from .parse import parse_domain


def _element(tag: str, **attrs: str) -> etree._Element:
    el = etree.Element(tag)
    for k, v in attrs.items():
        el.set(k, v)
    return el


def insertion_index(parent: etree._Element, tag: str, order: tuple[str, ...]) -> int | None:
    """Where libvirt's formatter would put a new `tag` among `parent`'s children: before the first child it
    writes later (and before comments right above that child, which belong to it); None = append.
    Children libvirt does not know are passed over."""
    rank = order.index(tag)
    kids = list(parent)
    for i, child in enumerate(kids):
        if isinstance(child.tag, str) and child.tag in order and order.index(child.tag) > rank:
            while i > 0 and not isinstance(kids[i - 1].tag, str) and kids[i - 1].tag is etree.Comment:
                i -= 1
            return i
    return None


def plan(root: etree._Element, style: str) -> list[Insertion]:
    """Insertions that turn kvm-pv-unhalt on, in the given style (libvirt_xml.STYLES), placed in libvirt's
    order (pure)."""
    how = libvirt_xml.STYLES[style]
    new = _element(how.tag, **dict(how.attrs))
    parent = root.find(how.parent)
    if parent is not None:
        return [Insertion(parent, new, insertion_index(parent, how.tag, _ORDER[how.parent]))]
    wrapper = _element(how.parent)
    wrapper.append(new)
    return [Insertion(root, wrapper, insertion_index(root, how.parent, libvirt_order.DOMAIN))]


_ORDER = {"features": libvirt_order.FEATURES, "cpu": libvirt_order.CPU}  # sibling order per parent


def render(source: bytes, tree: etree._ElementTree, insertions: list[Insertion]) -> bytes:
    """Apply insertions to the source text; verify the result is the intended tree.

    Consumes `tree`: once the text is rendered, the insertions are made on the tree itself (the caller
    parsed it for this and uses it no further), and the reparsed text must equal it. One tree fewer than a
    copy would cost, which matters for large domains."""
    if not insertions:
        return source
    out = apply_insertions(source.decode("utf-8"), tree.getroot(), insertions).encode("utf-8")
    for ins in insertions:
        if ins.index is None:
            ins.parent.append(ins.new)
        else:
            ins.parent.insert(ins.index, ins.new)
    if not same_tree(parse_domain(out, "rewritten XML").getroot(), tree.getroot()):
        raise BadInput("internal check failed: the rewritten XML is not the intended tree; nothing was changed")
    return out
