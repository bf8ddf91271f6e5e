"""verify's records: what it is asked (VerifyOptions), what it runs (CpuMode, Run, Identity), what it
learns of the QEMU (Build), where the tool and QEMU differ (Disagreement), and the result (VerifyResult). Every
other module of the package builds on these; they import none of it."""

from __future__ import annotations

from typing import Callable, NamedTuple

from ..constants import VERIFIED_RECORD
from ..tables import qemu
from ..core.config import Config
from ..errors import EXIT_OK, EXIT_WORK_FOUND
from ..core.hostfacts import HostFacts
from ..tables.version import format_version

DEFAULT_TIMEOUT = 20.0  # seconds one QEMU may take from exec to its last answer (~0.1 s here)
DEFAULT_WORKERS, MAX_WORKERS = 2, 8  # QEMUs started at a time
MODE_KEYS = ("default", "intel", "amd", "host", "max")  # the CPU models verify starts QEMU with


def record_key(emulator: str, version: str, package: str) -> str:
    """A build is its path, version and package string: a rebuilt or patched package is another build."""
    return f"{emulator}|{version}|{package}"


class Identity(NamedTuple):
    """Who QEMU runs as."""

    name: str
    uid: int | None = None  # None: as this process
    gid: int | None = None
    groups: tuple[int, ...] = ()

    def popen(self) -> dict:
        return {} if self.uid is None else {"user": self.uid, "group": self.gid, "extra_groups": list(self.groups)}


class VerifyOptions(NamedTuple):
    emulator: str | None = None  # any executable (a wrapper script too)
    connect: str | None = None  # the emulator libvirt's domain capabilities name
    qemu_build: str | None = None  # --qemu-build (first of all; precedence.HOST_FACT_SOURCES has the order)
    config: Config = Config()  # its qemu_build and qemu_version, in the same order as for explain
    timeout: float = DEFAULT_TIMEOUT
    workers: int = DEFAULT_WORKERS
    machines: tuple[str, ...] = ()  # shell patterns; empty: every x86 machine type
    modes: tuple[str, ...] = ()  # MODE_KEYS; empty: all of them
    json_path: str | None = None
    record: str | None = VERIFIED_RECORD  # None: do not record a pass
    progress: Callable[[str], None] | None = None


class CpuMode(NamedTuple):
    key: str  # default | intel | amd | host | max
    label: str  # shown: "no -cpu", "EPYC", "host"
    qemu_cpu: str | None  # the -cpu value; None: no -cpu
    cpu_xml: str  # the <cpu> of a libvirt domain that gets the same CPU


class Run(NamedTuple):
    """One QEMU started for one machine type and CPU."""

    machine: str
    mode: CpuMode
    qemu: dict[str, str] | None  # property -> on | off | absent; None when QEMU did not start
    error: str | None
    seconds: float


class Disagreement(NamedTuple):
    machine: str
    model: str
    prop: str
    qemu: str
    tool: str
    source: str
    reason: str
    check: str = "qom-get"  # or compat-props

    def line(self) -> str:
        what = {"compat-props": "QEMU's compat-props imply", "lifecycle": "QEMU's query-machines says"}.get(
            self.check, "QEMU")
        return (f"DISAGREE {self.machine} {self.model} {self.prop}: {what} {self.qemu}, tool {self.tool} "
                f"({self.source}: {self.reason})")


class QemuBinary(NamedTuple):
    """What the probe learnt about the QEMU."""

    emulator: str
    release: tuple[int, int, int]  # query-version's major, minor, micro
    package: str  # query-version's package: Debian 1:7.2+dfsg-7+deb12u18+b3 ("" for a plain build)
    machines: list  # query-machines
    compat_props: bool  # whether query-machines answered with compat-props
    models: frozenset[str]  # query-cpu-definitions

    @property
    def version(self) -> str:
        """7.2.22, as the record's keys and libvirt's version are written."""
        return format_version(self.release)

    @property
    def key(self) -> str:
        return record_key(self.emulator, self.version, self.package)


class VerifyResult(NamedTuple):
    binary: QemuBinary
    host: HostFacts
    identity: Identity
    machines: list[str]
    modes: list[CpuMode]
    runs: list[Run]
    disagreements: list[Disagreement]
    compat_checked: int | None  # properties compared through compat-props; None: not answered
    seconds: float
    tool: dict = {}  # (machine, CPU key) -> {property: the tool's value}
    lifecycle_checked: int = 0  # machine names whose status was compared with query-machines

    @property
    def checks(self) -> int:
        return sum(len(qemu.PROPERTIES) for r in self.runs if r.qemu is not None)

    @property
    def failed(self) -> list[Run]:
        return [r for r in self.runs if r.qemu is None]

    @property
    def exit_code(self) -> int:
        return EXIT_WORK_FOUND if self.disagreements else EXIT_OK
