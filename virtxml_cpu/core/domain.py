"""Domain XML -> DomainFacts: every input the rules look at, read once from the parsed tree."""

from __future__ import annotations

from collections import namedtuple

from lxml import etree

from . import commandline
from .commandline import QemuArgs
from ..tables import lazyre  # module-level patterns compiled where first used (the hook's cold start)
from ..tables.libvirt_xml import CPU_MODE_CUSTOM, CPU_MODE_NONE, PLACEMENT, SETTINGS, Placement, Setting
from ..tables.orchestrators import RECOGNISED as STACKS

QEMU_NS = "http://libvirt.org/schemas/domain/qemu/1.0"
OWN_NS = "urn:virtxml-cpu:domain:1"  # the tool's own per-domain metadata (<vxc:cpu policy=.../>)
LIBOSINFO_NS = "http://libosinfo.org/xmlns/libvirt/domain/1.0"


class Placed(namedtuple("Placed", "key cpus attrs")):
    """One element of a libvirt_xml.PLACEMENT row as written: its attributes' text, None when absent."""

    __slots__ = ()  # a plain named tuple: its fields, annotated below for readers

    key: str  # the row's key
    cpus: str | None  # the set attribute (cpuset / vcpus)
    attrs: tuple[str | None, ...]  # the row's other attributes, in its order


class DomainFacts(namedtuple("DomainFacts", "name uuid virt_type arch machine cpu_mode cpu_model cpu_features "
                             "settings hyperv hyperv_spinlocks vcpus numa_cells qemu override_policy os_id "
                             "emulator orchestrator placement launch_security irqchip irqchip_keys",
                             defaults=(None, (), None, None, ()))):
    """Every input the rules read (a tuple: built once per document, cheap to build and to hash). name and
    uuid come first: they are the only facts that differ between clones of one template."""

    __slots__ = ()  # a plain named tuple: its fields, annotated below for readers

    name: str | None
    uuid: str | None
    virt_type: str | None  # kvm, qemu, ...
    arch: str | None
    machine: str | None
    cpu_mode: str  # none, custom, host-model, host-passthrough, maximum
    cpu_model: str | None
    cpu_features: tuple[tuple[str, str], ...]  # (name, policy)
    settings: tuple[tuple[str, str], ...]  # (libvirt_xml.Setting key, XML value), in libvirt_xml.SETTINGS order
    hyperv: bool
    hyperv_spinlocks: bool
    vcpus: int
    numa_cells: int
    qemu: QemuArgs
    override_policy: str | None  # from <metadata><virtxml-cpu:cpu policy=...>
    os_id: str | None  # libosinfo id, e.g. http://microsoft.com/win/10
    emulator: str | None
    orchestrator: str | None  # the stack that wrote this definition (orchestrators.STACKS), when it shows
    placement: tuple[Placed, ...]  # <vcpu cpuset>, <cputune> pins and schedulers, in PLACEMENT order
    launch_security: str | None  # <launchSecurity type='tdx'|'sev'|...>
    irqchip: str | None  # the kernel_irqchip of the -machine options, libvirt's and <qemu:commandline>'s merged
    irqchip_keys: tuple[str, ...]  # the spellings of its key there, each once (commandline.machine_irqchip)

    @property
    def looks_windows(self) -> bool:
        return bool(self.hyperv or (self.os_id and "microsoft.com/win" in self.os_id))

    def setting(self, key: str) -> str | None:
        """The XML value of one libvirt_xml row, None when the domain does not write it."""
        return next((v for k, v in self.settings if k == key), None)

    @property
    def pvspinlock(self) -> str | None:
        return self.setting("pvspinlock")


UUID = lazyre.compile(r"[0-9a-fA-F]{32}|[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}")


def canonical_uuid(text: str | None) -> str | None:
    """A uuid by libvirt's grammar (32 hex digits, or dashed 8-4-4-4-12) in lowercase dashed form; None
    for anything else, so that no definition can name a path (`/`, `../x`) where a uuid is expected."""
    if not isinstance(text, str) or not UUID.fullmatch(text.strip()):
        return None
    h = text.strip().replace("-", "").lower()
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


def _rows_by_parent(rows) -> tuple[tuple[tuple[str, ...], tuple[tuple[int, Setting, str], ...]], ...]:
    """SETTINGS rows by the element holding them: (parent path, ((place in SETTINGS, row, its element's
    tag), ...)), shorter paths first."""
    out: dict[tuple[str, ...], list[tuple[int, Setting, str]]] = {}
    for i, row in enumerate(rows):
        out.setdefault(row.path[:-1], []).append((i, row, row.path[-1]))
    return tuple((path, tuple(found)) for path, found in sorted(out.items(), key=lambda item: len(item[0])))


_SETTING_PARENTS = _rows_by_parent(SETTINGS)


def _settings(read: dict) -> tuple[tuple[str, str], ...]:
    """The libvirt_xml.SETTINGS rows, in their order, read one parent element at a time: each distinct parent
    (worked out at import) is found and its children read once, however many rows it holds (not at all for
    a row that selects among its siblings). `read`: path below <domain> -> _children of the element there,
    for () and the parents already read; filled in here."""
    found = []
    for path, rows in _SETTING_PARENTS:
        parent = _children_at(read, path[:-1]).get(path[-1])
        if parent is None:
            continue
        children = read.get(path)
        for i, row, tag in rows:
            if row.select:
                child = _last(parent, tag, *row.select)
            else:
                if children is None:
                    children = read[path] = _children(parent)
                child = children.get(tag)
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
    """_children of the element at `path` below <domain> (the first of each tag at each step), kept in `read`."""
    children = read.get(path)
    if children is None:
        children = read[path] = _children(_children_at(read, path[:-1]).get(path[-1]))
    return children


def _by_parent(rows) -> dict[str, tuple[bool, dict[str | None, Placement]]]:
    """PLACEMENT rows by the top-level element holding them: tag -> (first only, {child tag: row}); a row
    whose path is one element long is that element itself (child tag None)."""
    out: dict[str, tuple[bool, dict[str | None, Placement]]] = {}
    for row in rows:
        out.setdefault(row.path[0], (row.first, {}))[1][row.path[1] if len(row.path) > 1 else None] = row
    return out


_PLACEMENT_PARENTS = _by_parent(PLACEMENT)


def _placement(root, top: dict) -> tuple[Placed, ...]:
    """The libvirt_xml.PLACEMENT rows, read as libvirt's XPath does (every element at a row's path, or the
    first), in one pass over each parent. An element without any of its row's attributes is left out when
    libvirt takes that as nothing. Sorted in PLACEMENT order, as libvirt parses them."""
    out: list[Placed] = []
    for tag, (first, rows) in _PLACEMENT_PARENTS.items():
        if tag not in top:
            continue
        parents = [top[tag]] if first else root.iterchildren(tag)
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


def _int(text, default):
    try:
        return int(text)
    except (TypeError, ValueError):
        return default


def _children(el) -> dict:
    """First child element of each tag, in one pass (the tags libvirt writes once), in document order;
    {} for no element."""
    out: dict = {}
    if el is not None:
        for c in el:
            tag = c.tag
            if tag not in out and isinstance(tag, str):  # not a comment or processing instruction
                out[tag] = c
    return out


def _first(el, tag: str):
    """The first child of `el` with that tag (`_children(el).get(tag)` without reading the rest); None for
    no element or no such child."""
    if el is not None:
        for c in el:
            if c.tag == tag:
                return c
    return None


def _last(el, tag: str, attr: str, value: str):
    """The last child of `el` with that tag and attribute value (a libvirt_xml row's `select`), or None."""
    found = None
    for c in el:
        if c.tag == tag and c.get(attr) == value:
            found = c
    return found


def _text(el) -> str | None:
    return (el.text or "").strip() if el is not None else None


def _name(el) -> str | None:
    """<name> as libvirt reads it (`string(./name[1])`): all its text, comments left out, nothing stripped.
    libvirt keeps blanks (a trailing NBSP, a leading space, U+2028, a tab) as part of the name."""
    return "".join(el.itertext()) if el is not None else None


_QEMU_COMMANDLINE, _QEMU_ARG = f"{{{QEMU_NS}}}commandline", f"{{{QEMU_NS}}}arg"
_OWN_CPU = f"{{{OWN_NS}}}cpu"
_LIBOSINFO, _LIBOSINFO_OS = f"{{{LIBOSINFO_NS}}}libosinfo", f"{{{LIBOSINFO_NS}}}os"


def extract(root: etree._Element) -> DomainFacts:
    """Read the facts from a parsed <domain> element (pure). One pass over the top level, then only the
    few subtrees the rules read, each element's children once."""
    top = _children(root)
    features = _children(top.get("features"))
    cpu = top.get("cpu")
    cpu_parts = _children(cpu)
    os_type = _first(top.get("os"), "type")
    hyperv = features.get("hyperv")

    cells = 0
    if cpu is None:
        mode, model, cpu_features = CPU_MODE_NONE, None, ()
    else:
        model = _text(cpu_parts.get("model")) or None
        mode = cpu.get("mode") or CPU_MODE_CUSTOM
        cpu_features = ()
        if "feature" in cpu_parts:
            cpu_features = tuple((f.get("name") or "", f.get("policy") or "require")
                                 for f in cpu.iterchildren("feature"))
        if "numa" in cpu_parts:
            cells = sum(1 for _ in cpu_parts["numa"].iterchildren("cell"))
    settings = _settings({(): top, ("features",): features, ("cpu",): cpu_parts})
    qemu_args = commandline.NONE
    if _QEMU_COMMANDLINE in top:
        qemu_args = commandline.read([a.get("value", "") for c in root.iterchildren(_QEMU_COMMANDLINE)
                                     for a in c.iterchildren(_QEMU_ARG)])
    meta = _children(top.get("metadata"))
    own = meta.get(_OWN_CPU)
    osinfo = _first(meta.get(_LIBOSINFO), _LIBOSINFO_OS)
    hv_spin = _first(hyperv, "spinlocks")
    launch_security = top.get("launchSecurity")
    irqchip, irqchip_keys = commandline.machine_irqchip(qemu_args, settings)
    return DomainFacts(
        name=_name(top.get("name")),
        uuid=_text(top.get("uuid")),
        virt_type=root.get("type"),
        arch=os_type.get("arch") if os_type is not None else None,
        machine=os_type.get("machine") if os_type is not None else None,
        cpu_mode=mode,
        cpu_model=model,
        cpu_features=cpu_features,
        settings=settings,
        hyperv=hyperv is not None,
        hyperv_spinlocks=hv_spin is not None and hv_spin.get("state") == "on",
        vcpus=_int(_text(top.get("vcpu")), 1),
        numa_cells=cells,
        qemu=qemu_args,
        override_policy=own.get("policy") if own is not None else None,
        os_id=osinfo.get("id") if osinfo is not None else None,
        emulator=_text(_first(top.get("devices"), "emulator")),  # libvirt writes it first
        orchestrator=_orchestrator(meta, root if "sysinfo" in top else None),
        placement=_placement(root, top),
        launch_security=launch_security.get("type") if launch_security is not None else None,
        irqchip=irqchip,
        irqchip_keys=irqchip_keys,
    )


def _orchestrator(meta: dict, root=None) -> str | None:
    """The stack that wrote the definition: the first child of <metadata> (`meta`: its _children, in document
    order) that is a stack's element in its namespace; else, when `root` is given (the domain has a
    <sysinfo>), an SMBIOS system entry a stack writes (CloudStack's manufacturer or product). A name alone
    never counts (tables/orchestrators.py says why)."""
    for tag in meta:
        if tag[:1] != "{":
            continue
        namespace, _, local = tag[1:].partition("}")
        for s in STACKS:
            for prefix, element in s.metadata:
                if local == element and namespace.startswith(prefix):
                    return s.name
    if root is not None:
        for sysinfo in root.iterchildren("sysinfo"):
            for system in sysinfo.iterchildren("system"):
                for entry in system.iterchildren("entry"):
                    pair = (entry.get("name"), (entry.text or "").strip())
                    for s in STACKS:
                        if pair in s.sysinfo:
                            return s.name
    return None
