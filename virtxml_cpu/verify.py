"""`virtxml-cpu verify`: the rules against the QEMU this host runs.

The tool can only be as right as its tables, and most users run QEMU builds nobody here has run. So: start
the host's own QEMU paused, without disks or devices, for every x86 machine type it lists x a few CPU models,
read what vCPU 0 really has (QMP qom-get), and compare with what the tool computes for a libvirt domain
with the same machine and CPU under the build it detected. Where the QEMU reports its machines' compat
properties (query-machines compat-props, QEMU 10), those are checked against the tool too.

The comparison (domains, answers, disagreements, the report) is pure; the shell part starts QEMUs (as an
unprivileged user holding the kvm group where one can), each killed after a timeout.
"""

from __future__ import annotations

import fnmatch
import json
import os
import pwd
import re
import shutil
import signal
import stat
import subprocess
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Callable, NamedTuple
from xml.sax.saxutils import quoteattr

from . import __version__, domain, engine, rules
from .errors import EXIT_OK, EXIT_WORK_FOUND, BadInput, EnvironmentProblem, shown
from .hostfacts import HostFacts, flavour_from_machines, flavour_from_version, probe_kvm
from .qmp import QMP, QMPClosed, QMPError
from .xmlio import parse_domain

DEFAULT_RECORD = "/var/lib/virtxml-cpu/verified.json"
DEFAULT_TIMEOUT = 20.0  # seconds one QEMU may take from exec to its last answer (~0.1 s here)
MAX_RECORD_BYTES = 64 * 1024
GIVE_UP_AFTER = 3  # QEMUs killed by the timeout before verify stops starting more
LOCAL_EMULATORS = ("qemu-system-x86_64", "/usr/libexec/qemu-kvm")  # Debian/Ubuntu/SUSE/Arch; RHEL
# Users QEMU runs as when verify runs as root, with the group owning /dev/kvm (never root when avoidable).
QEMU_USERS = ("libvirt-qemu", "qemu", "nobody")
# A named Intel and AMD model, the first this QEMU has (query-cpu-definitions).
INTEL_MODELS = ("Skylake-Client", "Haswell", "SandyBridge", "Nehalem", "Penryn", "Conroe")
AMD_MODELS = ("EPYC", "Opteron_G5", "Opteron_G4", "Opteron_G3", "Opteron_G2", "qemu64")
MODE_KEYS = ("default", "intel", "amd", "host", "max")
# -cpu host/max carry arch-capabilities=off: nested hosts abort on MSR 0x10a without it; none of the
# properties checked depends on it, and the domain the tool resolves disables it the same way.
NO_ARCH_CAPS = "<feature policy='disable' name='arch-capabilities'/>"
QEMU_NS = "http://libvirt.org/schemas/domain/qemu/1.0"


class VerifyOptions(NamedTuple):
    emulator: str | None = None  # any executable (a wrapper script too)
    connect: str | None = None  # the emulator libvirt's domain capabilities name
    qemu_flavour: str | None = None  # chosen by --qemu-flavour or the config (outranks detection)
    flavour_source: str = ""
    timeout: float = DEFAULT_TIMEOUT
    workers: int = 2
    machines: tuple[str, ...] = ()  # shell patterns; empty: every x86 machine type
    modes: tuple[str, ...] = ()  # MODE_KEYS; empty: all of them
    json_path: str | None = None
    record: str | None = DEFAULT_RECORD  # None: do not record a pass
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
        what = "QEMU's compat-props imply" if self.check == "compat-props" else "QEMU"
        return (f"DISAGREE {self.machine} {self.model} {self.prop}: {what} {self.qemu}, tool {self.tool} "
                f"({self.source}: {self.reason})")


class Identity(NamedTuple):
    """Who QEMU runs as."""

    name: str
    uid: int | None = None  # None: as this process
    gid: int | None = None
    groups: tuple[int, ...] = ()

    def popen(self) -> dict:
        return {} if self.uid is None else {"user": self.uid, "group": self.gid, "extra_groups": list(self.groups)}


class Build(NamedTuple):
    """What the probe learnt about the QEMU."""

    emulator: str
    version: str  # 7.2.22
    package: str  # Debian 1:7.2+dfsg-7+deb12u18+b3 ("" for a plain build)
    machines: list  # query-machines
    compat_props: bool  # whether query-machines answered with compat-props
    models: frozenset[str]  # query-cpu-definitions

    @property
    def key(self) -> str:
        return record_key(self.emulator, self.version, self.package)

    @property
    def version_line(self) -> str:
        return f"QEMU emulator version {self.version}" + (f" ({self.package})" if self.package else "")


# ---------------------------------------------------------------------------------------------------------
# Pure: what to run, what the tool says, where they differ.

def cpu_modes(models: frozenset[str], wanted: tuple[str, ...] = ()) -> list[CpuMode]:
    """No -cpu, an Intel and an AMD model this QEMU has, host and max."""
    modes = [CpuMode("default", "default-cpu", None, "")]  # no -cpu: the machine's default model
    for key, candidates in (("intel", INTEL_MODELS), ("amd", AMD_MODELS)):
        model = next((m for m in candidates if m in models), None)
        if model:
            modes.append(CpuMode(key, model, model, f"<cpu mode='custom' match='exact' check='none'><model "
                                                    f"fallback='forbid'>{model}</model></cpu>"))
    modes.append(CpuMode("host", "host", "host,arch-capabilities=off",
                         f"<cpu mode='host-passthrough' check='none'>{NO_ARCH_CAPS}</cpu>"))
    modes.append(CpuMode("max", "max", "max,arch-capabilities=off",
                         f"<cpu mode='maximum' check='none'>{NO_ARCH_CAPS}</cpu>"))
    return [m for m in modes if not wanted or m.key in wanted]


def is_x86_pc(name: str) -> bool:
    return name.startswith("pc-") or name in ("isapc", "microvm")


def x86_machines(query_machines: list, patterns: tuple[str, ...] = ()) -> list[str]:
    """The PC machine types (pc-i440fx-*, pc-q35-*, downstream pc-* names, isapc, microvm) and their aliases
    (pc, q35, ubuntu ...): each alias is checked too, since the tool resolves it through the host's table."""
    names = []
    for m in query_machines:
        if is_x86_pc(m.get("name", "")):
            names.append(m["name"])
            if m.get("alias"):
                names.append(m["alias"])
    names = sorted(set(names), key=_machine_order)
    return [n for n in names if not patterns or any(fnmatch.fnmatchcase(n, p) for p in patterns)]


def _machine_order(name: str):
    return [int(p) if p.isdigit() else p for p in re.split(r"(\d+)", name)]


def machine_facts(query_machines: list, emulator: str) -> HostFacts:
    """What libvirt would read from this QEMU: machine names, aliases and the default machine."""
    aliases, names = {}, set()
    for m in query_machines:
        name = m.get("name", "")
        names.add(name)
        if m.get("alias"):
            aliases[m["alias"]] = name
            names.add(m["alias"])
        if m.get("is-default"):
            aliases[""] = name
    flavour, why = flavour_from_machines(names, emulator)
    return HostFacts(aliases=aliases, machines=frozenset(names), sources=(f"{emulator} query-machines",),
                     qemu_flavour=flavour, flavour_source=why)


def tool_host(build: Build, kvm: HostFacts, flavour: str | None = None, flavour_source: str = "") -> HostFacts:
    """Host facts as explain would have them: /dev/kvm, then the QEMU's version and package string, then its
    machine list (libvirt's order of authority), then an explicit build choice."""
    version = flavour_from_version(build.version_line, f"{build.emulator} query-version")
    host = kvm.merged(version).merged(machine_facts(build.machines, build.emulator))
    if flavour:
        host = host.merged(HostFacts(qemu_flavour=flavour, flavour_source=flavour_source))
    return host


def domain_xml(machine: str, mode: CpuMode, ioapic: str | None = None,
               globals_: tuple[tuple[str, str, str], ...] = ()) -> bytes:
    """The libvirt domain that runs this machine and CPU: one vCPU, no devices, KVM."""
    feats = f"<features><ioapic driver='{ioapic}'/></features>" if ioapic else ""
    args = "".join(f"<qemu:arg value='-global'/><qemu:arg value={quoteattr(f'{d}.{p}={v}')}/>" for d, p, v in globals_)
    cmd = f"<qemu:commandline>{args}</qemu:commandline>" if args else ""
    return (f"<domain type='kvm' xmlns:qemu='{QEMU_NS}'><name>verify</name><memory unit='MiB'>128</memory>"
            f"<vcpu>1</vcpu><os><type arch='x86_64' machine={quoteattr(machine)}>hvm</type></os>{feats}"
            f"{mode.cpu_xml}<devices/>{cmd}</domain>").encode()


def tool_answer(machine: str, mode: CpuMode, host: HostFacts, ioapic: str | None = None,
                globals_: tuple[tuple[str, str, str], ...] = ()) -> engine.Resolution:
    xml = domain_xml(machine, mode, ioapic, globals_)
    return engine.resolve(domain.extract(parse_domain(xml, f"{machine}/{mode.key}").getroot()), host)


def disagreements(run: Run, res: engine.Resolution) -> list[Disagreement]:
    """A property QEMU does not have counts as off (absent)."""
    out = []
    for p in rules.PROPERTIES:
        qemu = run.qemu[p]
        want = res.features[p]
        if want.qemu_property != ("off" if qemu == "absent" else qemu):
            out.append(Disagreement(run.machine, run.mode.label, p, qemu, want.qemu_property, want.source, want.detail))
    return out


def cpu_compat_props(machine: dict) -> tuple[tuple[str, str, str], ...]:
    """A query-machines entry's compat properties on x86 CPU types among the properties resolved."""
    return tuple((c["qom-type"], c["property"], c["value"]) for c in machine.get("compat-props") or ()
                 if c.get("property") in rules.PROPERTIES
                 and c.get("qom-type", "").endswith(("x86_64-cpu", "i386-cpu")))


def compat_cases(query_machines: list, patterns: tuple[str, ...] = ()) -> list[tuple[str, str, tuple]]:
    """(machine, base, its CPU compat props): a machine type is its family's newest (`pc`, `q35`) plus its
    compat properties, so the tool must say the same for it as for the newest with those as -global."""
    base = {m["alias"]: m["name"] for m in query_machines if m.get("alias") in ("pc", "q35")}
    out = []
    for m in query_machines:
        name = m.get("name", "")
        family = "pc" if name.startswith("pc-i440fx-") else "q35" if name.startswith("pc-q35-") else None
        if family in base and (not patterns or any(fnmatch.fnmatchcase(name, p) for p in patterns)):
            out.append((name, base[family], cpu_compat_props(m)))
    return sorted(out, key=lambda c: _machine_order(c[0]))


def compat_disagreements(case: tuple[str, str, tuple], mode: CpuMode, host: HostFacts) -> list[Disagreement]:
    """Under the kernel and the split irqchip alike (kvm-msi-ext-dest-id shows only under the latter)."""
    machine, base, props = case
    out = []
    for ioapic in ("kvm", "qemu"):
        ours = tool_answer(machine, mode, host, ioapic)
        theirs = tool_answer(base, mode, host, ioapic, props)
        for p in rules.PROPERTIES:
            a, b = ours.features[p], theirs.features[p]
            if a.qemu_property != b.qemu_property:
                label = f"{mode.label} ioapic={ioapic} (vs {base} + {len(props)} compat props)"
                out.append(Disagreement(machine, label, p, b.qemu_property, a.qemu_property, a.source, a.detail,
                                        "compat-props"))
    return out


class Outcome(NamedTuple):
    build: Build
    host: HostFacts
    identity: Identity
    machines: list[str]
    modes: list[CpuMode]
    runs: list[Run]
    disagreements: list[Disagreement]
    compat_checked: int | None  # properties compared through compat-props; None: not answered
    seconds: float
    tool: dict = {}  # (machine, CPU key) -> {property: the tool's value}

    @property
    def checks(self) -> int:
        return sum(len(rules.PROPERTIES) for r in self.runs if r.qemu is not None)

    @property
    def failed(self) -> list[Run]:
        return [r for r in self.runs if r.qemu is None]

    @property
    def exit_code(self) -> int:
        return EXIT_WORK_FOUND if self.disagreements else EXIT_OK


def summary(o: Outcome) -> str:
    compat = ("compat-props: not answered by this QEMU" if o.compat_checked is None
              else f"compat-props: {o.compat_checked} checks")
    failed = f", {len(o.failed)} not started (listed above)" if o.failed else ""
    return (f"verify: {len(o.machines)} machine types x {len(o.modes)} CPU models x {len(rules.PROPERTIES)} "
            f"properties = {o.checks} checks ({len(o.runs) - len(o.failed)} QEMUs{failed}); {compat}; "
            f"{len(o.disagreements)} disagreements; {o.seconds:.1f} s")


def lines(o: Outcome) -> list[str]:
    b, h = o.build, o.host
    out = [f"QEMU {b.emulator}: {b.version_line}; run as {o.identity.name}",
           f"build: {h.qemu_flavour} ({h.flavour_source})",
           f"CPU models: {', '.join(m.label for m in o.modes)}"]
    out += [f"not started: {r.machine} {r.mode.label}: {r.error}" for r in o.failed]
    out += [d.line() for d in o.disagreements]
    out.append(summary(o))
    return out


def report(o: Outcome) -> dict:
    """The JSON a user attaches to a bug report."""
    b, h = o.build, o.host
    return {
        "tool": f"virtxml-cpu {__version__}", "emulator": b.emulator, "qemu_version": b.version,
        "package": b.package, "build": h.qemu_flavour, "build_basis": h.flavour_source,
        "qemu_user": o.identity.name, "properties": list(rules.PROPERTIES),
        "cpu_models": {m.key: {"label": m.label, "-cpu": m.qemu_cpu, "libvirt": m.cpu_xml} for m in o.modes},
        "machines": o.machines, "compat_props_answered": o.compat_checked is not None,
        "runs": [{"machine": r.machine, "cpu": r.mode.key, "qemu": r.qemu, "tool": o.tool.get((r.machine, r.mode.key)),
                  "error": r.error, "seconds": round(r.seconds, 3)} for r in o.runs],
        "disagreements": [d._asdict() for d in o.disagreements],
        "summary": {"machine_types": len(o.machines), "cpu_models": len(o.modes),
                    "properties": len(rules.PROPERTIES), "checks": o.checks, "not_started": len(o.failed),
                    "compat_checks": o.compat_checked, "disagreements": len(o.disagreements),
                    "seconds": round(o.seconds, 1)},
    }


def record_key(emulator: str, version: str, package: str) -> str:
    return f"{emulator}|{version}|{package}"


def parse_version_line(text: str) -> tuple[str, str] | None:
    """`QEMU emulator version 7.2.22 (Debian 1:7.2+dfsg-7+deb12u18+b3)` -> ("7.2.22", "Debian ...")."""
    m = re.search(r"version (\d+\.\d+(?:\.\d+)?)(?: \((.*)\))?", text)
    return (m.group(1), m.group(2) or "") if m else None


# ---------------------------------------------------------------------------------------------------------
# Shell: find the QEMU, check KVM, run QEMUs, keep the record.

def find_emulator(opts: VerifyOptions) -> str:
    if opts.emulator:
        path = os.path.abspath(opts.emulator)
        if not (os.path.isfile(path) and os.access(path, os.X_OK)):
            raise BadInput(f"--emulator {shown(opts.emulator)}: not an executable file")
        return path
    if opts.connect:
        return _libvirt_emulator(opts.connect)[0]
    for name in LOCAL_EMULATORS:
        path = shutil.which(name)
        if path:
            return os.path.abspath(path)
    raise EnvironmentProblem("QEMU is not available: no qemu-system-x86_64 on PATH (name one with --emulator PATH)")


def _libvirt_emulator(uri: str) -> tuple[str, str]:
    """The emulator libvirt uses for x86_64 KVM domains (domain capabilities <path>) and the QEMU version
    libvirt reports for it."""
    from .libvirt_conn import is_local, libvirt_module, open_for_reading
    from .xmlio import parse_xml

    if not is_local(uri):
        raise BadInput(f"{uri}: verify starts QEMU on this host; give a local URI or run it on that host")
    conn = open_for_reading(uri)
    try:
        caps = conn.getDomainCapabilities(None, "x86_64", None, "kvm", 0)
        v = conn.getVersion()
    except libvirt_module().libvirtError as e:
        raise EnvironmentProblem(f"{uri}: {e.get_error_message()}") from None
    finally:
        conn.close()
    path = (parse_xml(caps.encode(), "domain capabilities").getroot().findtext("path") or "").strip()
    if not path:
        raise EnvironmentProblem(f"{uri}: the domain capabilities name no emulator")
    return path, f"{v // 1000000}.{v // 1000 % 1000}.{v % 1000}"


def check_kvm(device: str = "/dev/kvm") -> None:
    """KVM must be there and ours to open: QEMU starts with accel=kvm."""
    if not os.path.exists(device):
        raise EnvironmentProblem(f"KVM is not available on this host ({device} does not exist): "
                                 "nothing to verify against")
    try:
        os.close(os.open(device, os.O_RDWR | os.O_CLOEXEC))
    except PermissionError:
        raise EnvironmentProblem(f"cannot open {device}: run `virtxml-cpu verify` as root or as a member of "
                                 "the kvm group") from None
    except OSError as e:
        raise EnvironmentProblem(f"KVM is not usable on this host: {device}: {e.strerror}") from None


def qemu_identity(device: str = "/dev/kvm") -> Identity:
    """As root, QEMU runs as an unprivileged user holding the group that may open /dev/kvm; as root only
    when nobody less privileged can open it. Otherwise as this user."""
    if os.geteuid() != 0:
        return Identity(pwd.getpwuid(os.geteuid()).pw_name)
    st = os.stat(device)
    group_rw = st.st_mode & 0o060 == 0o060
    other_rw = st.st_mode & 0o006 == 0o006
    for name in QEMU_USERS:
        try:
            pw = pwd.getpwnam(name)
        except KeyError:
            continue
        if pw.pw_uid == 0:
            continue
        if other_rw:
            return Identity(name, pw.pw_uid, pw.pw_gid, ())
        if group_rw:
            return Identity(f"{name} (group {st.st_gid})", pw.pw_uid, pw.pw_gid, (st.st_gid,))
    return Identity("root")


class Runner:
    """Starts one QEMU per call in a private directory; each is killed after `timeout` seconds."""

    def __init__(self, emulator: str, identity: Identity, directory: str, timeout: float):
        self.emulator, self.identity, self.dir, self.timeout = emulator, identity, directory, timeout
        self._n = 0
        self._lock = threading.Lock()
        self.killed = 0  # QEMUs the watchdog had to kill

    def _expire(self, proc: subprocess.Popen) -> None:
        with self._lock:
            self.killed += 1
        _kill(proc)

    def session(self, machine_opt: str, cpu: str | None, work: Callable[[QMP], object]) -> object:
        """Start QEMU paused, run `work` on its monitor, stop it. Raises QMPClosed with QEMU's own message
        when it does not start or answer."""
        with self._lock:
            self._n += 1
            tag = str(self._n)
        sock, err = os.path.join(self.dir, f"{tag}.qmp"), os.path.join(self.dir, f"{tag}.err")
        argv = [self.emulator, "-S", "-nodefaults", "-nographic", "-machine", machine_opt,
                "-qmp", f"unix:{sock},server=on,wait=off"] + (["-cpu", cpu] if cpu else [])
        try:
            with open(err, "wb") as errf:
                proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=errf, stderr=errf, cwd=self.dir,
                                        start_new_session=True, close_fds=True, **self.identity.popen())
        except OSError as e:
            raise QMPClosed(f"cannot run {self.emulator} as {self.identity.name}: {e.strerror}") from None
        watchdog = threading.Timer(self.timeout, self._expire, (proc,))
        watchdog.start()
        try:
            with QMP.connect_unix(sock, self.timeout, alive=lambda: proc.poll() is None) as mon:
                mon.handshake()
                result = work(mon)
                try:
                    mon.execute("quit")
                except (QMPClosed, QMPError):
                    pass
            return result
        except QMPClosed as e:
            _kill(proc)
            raise QMPClosed(_last_line(err) or str(e)) from None
        except QMPError as e:
            raise QMPClosed(str(e)) from None
        except (KeyError, IndexError, TypeError, AttributeError) as e:
            raise QMPClosed(f"an answer verify cannot read ({type(e).__name__}: {e})") from None
        finally:
            watchdog.cancel()
            try:
                proc.wait(2)
            except subprocess.TimeoutExpired:
                _kill(proc)
            for path in (sock, err):
                try:
                    os.unlink(path)
                except OSError:
                    pass


def _kill(proc: subprocess.Popen) -> None:
    """The process group QEMU was started in (a wrapper script and the QEMU it runs)."""
    if proc.poll() is None:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except OSError:
            pass
        proc.wait()


def _last_line(path: str) -> str:
    try:
        with open(path, "rb") as fh:
            fh.seek(max(0, os.fstat(fh.fileno()).st_size - 4096))
            text = fh.read().decode(errors="replace")
    except OSError:
        return ""
    found = [ln.strip() for ln in text.splitlines() if ln.strip() and "warning:" not in ln]
    return found[-1] if found else ""


def probe(runner: Runner) -> Build:
    """The QEMU's version, package string, machine types (with compat-props where it answers) and models."""
    def work(mon: QMP):
        version = mon.execute("query-version")
        try:
            machines, compat = mon.execute("query-machines", {"compat-props": True}), True
        except QMPError:  # before QEMU 9.x: no such argument
            machines, compat = mon.execute("query-machines"), False
        models = frozenset(d["name"] for d in mon.execute("query-cpu-definitions"))
        return version, machines, compat, models

    version, machines, compat, models = runner.session("none,accel=kvm", None, work)
    q = version["qemu"]
    return Build(runner.emulator, f"{q['major']}.{q['minor']}.{q['micro']}", version.get("package", "").strip(),
                 machines, compat, models)


def read_vcpu(runner: Runner, machine: str, mode: CpuMode) -> Run:
    def work(mon: QMP):
        path = mon.execute("query-cpus-fast")[0]["qom-path"]
        out = {}
        for p in rules.PROPERTIES:
            try:
                out[p] = "on" if mon.execute("qom-get", {"path": path, "property": p}) else "off"
            except QMPError as e:
                if "not found" not in e.desc:
                    raise QMPClosed(str(e)) from None
                out[p] = "absent"
        return out

    start = time.monotonic()
    if runner.killed >= GIVE_UP_AFTER:
        why = f"not tried: {runner.killed} QEMUs did not answer within {runner.timeout:g} s"
        return Run(machine, mode, None, why, 0.0)
    try:
        got = runner.session(f"{machine},accel=kvm", mode.qemu_cpu, work)
        return Run(machine, mode, got, None, time.monotonic() - start)
    except QMPClosed as e:
        return Run(machine, mode, None, str(e), time.monotonic() - start)


def run(opts: VerifyOptions) -> Outcome:
    start = time.monotonic()
    emulator, libvirt_version = _libvirt_emulator(opts.connect) if opts.connect else (find_emulator(opts), None)
    check_kvm()
    identity = qemu_identity()
    directory = tempfile.mkdtemp(prefix="virtxml-cpu-verify-")
    try:
        if identity.uid is not None:
            os.chown(directory, identity.uid, identity.gid)
        runner = Runner(emulator, identity, directory, opts.timeout)
        try:
            build = probe(runner)
        except QMPClosed as e:
            raise EnvironmentProblem(f"QEMU or KVM is not usable: {emulator} (as {identity.name}): {e}") from None
        if libvirt_version and libvirt_version != build.version:  # a libvirtd in a chroot or container
            raise EnvironmentProblem(f"{opts.connect} runs QEMU {libvirt_version}, but {emulator} here is "
                                     f"{build.version}: libvirt's emulator lives in another filesystem; "
                                     "name it with --emulator")
        host = tool_host(build, probe_kvm(), opts.qemu_flavour, opts.flavour_source)
        machines = x86_machines(build.machines, opts.machines)
        modes = cpu_modes(build.models, opts.modes)
        if not machines:
            raise BadInput(f"{emulator} lists no x86 PC machine type"
                           + (" matching --machine" if opts.machines else ""))
        if opts.progress:
            opts.progress(f"{len(machines)} machine types x {len(modes)} CPU models on {emulator}, "
                          f"{opts.workers} at a time")
        jobs = [(m, mode) for m in machines for mode in modes]
        with ThreadPoolExecutor(max_workers=max(1, opts.workers)) as pool:
            runs = list(pool.map(lambda job: read_vcpu(runner, *job), jobs))
    finally:
        shutil.rmtree(directory, ignore_errors=True)
    tool = {(r.machine, r.mode.key): tool_answer(r.machine, r.mode, host) for r in runs if r.qemu is not None}
    found = [d for r in runs if r.qemu is not None for d in disagreements(r, tool[r.machine, r.mode.key])]
    compat_checked = None
    if build.compat_props:
        cases = compat_cases(build.machines, opts.machines)
        compat_checked = len(cases) * len(modes) * 2 * len(rules.PROPERTIES)
        found += [d for case in cases for mode in modes for d in compat_disagreements(case, mode, host)]
    if all(r.qemu is None for r in runs):
        raise EnvironmentProblem(f"QEMU started no machine type: {runs[0].error}")
    if runner.killed >= GIVE_UP_AFTER:
        raise EnvironmentProblem(f"{emulator} stopped answering: {runner.killed} QEMUs killed after "
                                 f"{opts.timeout:g} s each; nothing verified")
    return Outcome(build, host, identity, machines, modes, runs, found, compat_checked, time.monotonic() - start,
                   {k: {p: v.qemu_property for p, v in res.features.items() if p in rules.PROPERTIES}
                    for k, res in tool.items()})


# ---------------------------------------------------------------------------------------------------------
# The record of builds verified on this host (read by `apply` and `hook install`).

def read_record(path: str = DEFAULT_RECORD) -> dict:
    """Verified builds; empty unless the file is a root-owned regular file nobody else may write, in a
    root-owned directory, small, and of the expected shape."""
    try:
        dst = os.stat(os.path.dirname(path) or ".")
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK)
    except OSError:
        return {}
    try:
        st = os.fstat(fd)
        if (not stat.S_ISREG(st.st_mode) or st.st_uid != 0 or st.st_mode & 0o022 or dst.st_uid != 0
                or dst.st_mode & 0o022 or st.st_size > MAX_RECORD_BYTES):
            return {}
        data = json.loads(os.read(fd, MAX_RECORD_BYTES + 1))
    except (OSError, ValueError):
        return {}
    finally:
        os.close(fd)
    verified = data.get("verified") if isinstance(data, dict) and data.get("format") == 1 else None
    if not isinstance(verified, dict):
        return {}
    return {k: v for k, v in verified.items() if isinstance(k, str) and isinstance(v, dict)}


def write_record(o: Outcome, path: str = DEFAULT_RECORD) -> str:
    """Note a pass (root only: the record is trusted because only root can write it)."""
    if os.geteuid() != 0:
        return f"not recorded in {path}: only root keeps the record of verified builds"
    verified = read_record(path)
    verified[o.build.key] = {"at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "checks": o.checks,
                             "tool": __version__, "build": o.host.qemu_flavour}
    data = json.dumps({"format": 1, "verified": verified}, indent=1, sort_keys=True).encode()
    if len(data) > MAX_RECORD_BYTES:  # keep the newest entries
        verified = {o.build.key: verified[o.build.key]}
        data = json.dumps({"format": 1, "verified": verified}, indent=1, sort_keys=True).encode()
    try:
        os.makedirs(os.path.dirname(path), mode=0o755, exist_ok=True)
        tmp = f"{path}.{os.getpid()}.tmp"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        os.replace(tmp, path)
    except OSError as e:
        return f"not recorded in {path}: {e.strerror}"
    return f"recorded in {path}"


def local_build() -> tuple[str, str, str] | None:
    """(emulator, version, package) of the QEMU a local libvirt would use, from its --version."""
    for name in LOCAL_EMULATORS:
        path = shutil.which(name)
        if not path:
            continue
        try:
            out = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=10,
                                 stdin=subprocess.DEVNULL).stdout
        except (OSError, subprocess.SubprocessError):
            return None
        parsed = parse_version_line(out.splitlines()[0] if out.strip() else "")
        return (os.path.abspath(path), *parsed) if parsed else None
    return None


def unverified_note(path: str = DEFAULT_RECORD) -> str | None:
    """One line for `apply` and `hook install` when this host's QEMU build was never verified here."""
    build = local_build()
    if build is None or record_key(*build) in read_record(path):
        return None
    emulator, version, package = build
    return (f"note: the rules were never verified against {emulator} (QEMU {version}"
            + (f", {package}" if package else "") + ") on this host: run `virtxml-cpu verify` first")
