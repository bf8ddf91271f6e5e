"""Domain XML -> DomainFacts: every input the rules look at, read once from the parsed tree."""

from __future__ import annotations

from collections import namedtuple

from lxml import etree

from ..constants import OWN_NS, QEMU_NS
from . import commandline, rows
from .commandline import QemuArgs
from .rows import Placed
from ..tables import lazyre  # module-level patterns compiled where first used (the hook's cold start)
from ..tables.libvirt_xml import CPU_MODE_CUSTOM, CPU_MODE_NONE
from ..tables.orchestrators import RECOGNISED as STACKS

LIBOSINFO_NS = "http://libosinfo.org/xmlns/libvirt/domain/1.0"


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


def _int(text, default):
    try:
        return int(text)
    except (TypeError, ValueError):
        return default


def _text(el) -> str | None:
    return (el.text or "").strip() if el is not None else None


def _name(el) -> str | None:
    """<name> as libvirt reads it (`string(./name[1])`): all its text, comments left out, nothing stripped.
    libvirt keeps blanks (a trailing NBSP, a leading space, U+2028, a tab) as part of the name."""
    if el is None:
        return None
    if not len(el):  # no child node at all (element, comment, PI, entity): its text is all of it
        return el.text or ""
    return "".join(el.itertext())


_QEMU_COMMANDLINE, _QEMU_ARG = f"{{{QEMU_NS}}}commandline", f"{{{QEMU_NS}}}arg"
_OWN_CPU = f"{{{OWN_NS}}}cpu"
_LIBOSINFO, _LIBOSINFO_OS = f"{{{LIBOSINFO_NS}}}libosinfo", f"{{{LIBOSINFO_NS}}}os"


def extract(root: etree._Element) -> DomainFacts:
    """Read the facts from a parsed <domain> element (pure). One pass over the top level, then only the
    few subtrees the rules read, each element's children once."""
    top = rows.children(root)
    features = rows.children(top.get("features"))
    cpu = top.get("cpu")
    cpu_parts = rows.children(cpu)
    os_type = rows.first(top.get("os"), "type")
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
    settings = rows.settings({(): top, ("features",): features, ("cpu",): cpu_parts})
    qemu_args = commandline.NONE
    if _QEMU_COMMANDLINE in top:
        qemu_args = commandline.read([a.get("value", "") for c in root.iterchildren(_QEMU_COMMANDLINE)
                                     for a in c.iterchildren(_QEMU_ARG)])
    meta = rows.children(top.get("metadata"))
    own = meta.get(_OWN_CPU)
    osinfo = rows.first(meta.get(_LIBOSINFO), _LIBOSINFO_OS)
    hv_spin = rows.first(hyperv, "spinlocks")
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
        emulator=_text(rows.first(top.get("devices"), "emulator")),  # libvirt writes it first
        orchestrator=_orchestrator(meta, root if "sysinfo" in top else None),
        placement=rows.placement(root, top),
        launch_security=launch_security.get("type") if launch_security is not None else None,
        irqchip=irqchip,
        irqchip_keys=irqchip_keys,
    )


def _orchestrator(meta: dict, root=None) -> str | None:
    """The stack that wrote the definition: the first child of <metadata> (`meta`: its rows.children, in document
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
