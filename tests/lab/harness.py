"""Drive a real libvirtd + QEMU/KVM: define, start paused, read vCPU properties with QMP qom-get,
boot a CPUID-printing boot sector. Used only by the lab tests."""

from __future__ import annotations

import json
import os
import re
import subprocess
import time
import uuid as uuidlib
from dataclasses import dataclass
from pathlib import Path

from lxml import etree

HERE = Path(__file__).resolve().parent
URI = "qemu:///system"
IMAGES = Path("/var/lib/libvirt/images/virtxml-cpu-lab")
PREFIX = "vxc-lab-"


@dataclass(frozen=True)
class Lab:
    """One real libvirtd + QEMU: how to reach it, the filesystem its QEMU sees and the script that brings it up."""

    key: str
    title: str
    uri: str
    root: Path
    up: tuple[str, ...]  # tests/lab/ script and its arguments

    def path(self, inside: Path) -> Path:
        """Where a path of the lab's own filesystem is on this host."""
        return self.root / inside.relative_to("/")


LAB_DIR = Path(os.environ.get("VIRTXML_CPU_LAB_DIR", "/var/lib/virtxml-cpu-lab"))


def chroot_lab(name: str, key: str, title: str) -> Lab:
    """A Debian chroot with its own daemons, made by up-chroot.sh NAME under LAB_DIR."""
    root = LAB_DIR / name
    return Lab(key, title, f"qemu:///system?socket={root}/run/libvirt/libvirt-sock", root, ("up-chroot.sh", name))


HOST_LAB = Lab("7.2", "Debian 12 QEMU 7.2 + libvirt 9.0", URI, Path("/"), ("up.sh",))
BPO_LAB = chroot_lab("bookworm-bpo", "10.0", "bookworm-backports QEMU 10.0 + libvirt 11.3 (chroot)")
BPO_ROOT = BPO_LAB.root
# The oldest and the newest Debian libvirt hosts in support (tests/lab/test_ends.py).
BULLSEYE_LAB = chroot_lab("bullseye", "5.2", "Debian 11 QEMU 5.2 + libvirt 7.0 + Python 3.9 (chroot)")
FORKY_LAB = chroot_lab("forky", "11.1", "Debian forky QEMU 11.1 + libvirt 12.8 (chroot)")
LABS = {lab.key: lab for lab in (HOST_LAB, BPO_LAB)}  # the full matrices (tests/lab/test_qemu.py)
END_LABS = {lab.key: lab for lab in (BULLSEYE_LAB, FORKY_LAB)}

# 16-bit real mode: CPUID 0x40000001, print EAX as 8 hex digits + newline on COM1 (0x3F8), halt.
# Source (nasm): mov eax,0x40000001; cpuid; mov ebx,eax; mov cx,8; mov dx,0x3f8;
# l: rol ebx,4; mov al,bl; and al,0xf; add al,'0'; cmp al,'9'; jbe o; add al,7; o: out dx,al; loop l;
# mov al,10; out dx,al; h: cli; hlt; jmp h
BOOT_CODE = bytes.fromhex(
    "66b8010000400fa26689c3b90800baf8"
    "0366c1c30488d8240f04303c39760204"
    "07eee2edb00aeefaf4ebfc")
# The same with `mov ebx,edx` (66 89 d3) in place of `mov ebx,eax` (66 89 c3): prints EDX, the KVM hints
# (bit 0 KVM_HINTS_REALTIME).
MOV_EBX = {"eax": bytes.fromhex("6689c3"), "edx": bytes.fromhex("6689d3")}


def boot_sector(register: str = "eax") -> bytes:
    """The CPUID 0x40000001 boot sector printing `register` (eax: features, edx: hints)."""
    code = BOOT_CODE.replace(MOV_EBX["eax"], MOV_EBX[register], 1)
    return code + bytes(510 - len(code)) + b"\x55\xaa"


BOOT_SECTOR = boot_sector("eax")


def lab_missing() -> str | None:
    """Why the lab cannot run here, or None."""
    if os.geteuid() != 0:
        return "not root"
    if not os.path.exists("/dev/kvm"):
        return "no /dev/kvm"
    return None


def bring_up(lab: Lab = HOST_LAB) -> None:
    subprocess.run(["bash", str(HERE / lab.up[0]), *lab.up[1:]], check=True)


def connect(lab: Lab = HOST_LAB):
    import libvirt

    libvirt.registerErrorHandler(lambda *_: None, None)
    return libvirt.open(lab.uri)


def startable(xml: bytes) -> bytes:
    """The copy a test starts: lab quirks of these nested-KVM hosts applied (never to tool output).

    host-model/host-passthrough/maximum need arch-capabilities disabled ("failed to set MSR 0x10a");
    custom models need check='none' (the host lacks e.g. svm for qemu64)."""
    root = etree.fromstring(xml)
    cpu = root.find("cpu")
    if cpu is not None:
        mode = cpu.get("mode", "custom")
        if mode in ("host-model", "host-passthrough", "maximum"):
            if not any(f.get("name") == "arch-capabilities" for f in cpu.findall("feature")):
                etree.SubElement(cpu, "feature", policy="disable", name="arch-capabilities")
        if mode == "custom":
            cpu.set("check", "none")
    return etree.tostring(root)


def unique_name(stem: str) -> str:
    """A lab domain's name: the prefix, `stem`, and a tag saying which process made it (`-HEX6pPID`), so
    that one pytest worker's cleanup never removes what another worker is still using in a shared lab."""
    return f"{PREFIX}{stem}-{uuidlib.uuid4().hex[:6]}p{os.getpid()}"


_MADE_BY = re.compile(r"-[0-9a-f]{6}p([1-9][0-9]*)")


def in_use_elsewhere(name: str) -> bool:
    """Whether `name` was made by another process of this machine that is still running (another xdist
    worker in the middle of its test); a leftover of an earlier run, or ours, is not."""
    made = _MADE_BY.findall(name)
    if not made or int(made[-1]) == os.getpid():
        return False
    try:
        os.kill(int(made[-1]), 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True
    return True


def qmp(dom, command: dict) -> object:
    import libvirt_qemu

    return json.loads(libvirt_qemu.qemuMonitorCommand(dom, json.dumps(command), 0))["return"]


def _qom_get(dom, path: str, prop: str) -> bool:
    """qom-get; a property this QEMU does not have (kvm-asyncpf-vmexit before 9.0) reads as off, as verify's."""
    import libvirt_qemu

    reply = json.loads(libvirt_qemu.qemuMonitorCommand(dom, json.dumps(
        {"execute": "qom-get", "arguments": {"path": path, "property": prop}}), 0))
    if "error" in reply and "not found" in reply["error"].get("desc", ""):
        return False
    return reply["return"]


TRANSIENT = "Resource temporarily unavailable"  # EAGAIN, e.g. libvirt loading its cgroup BPF program under load


def create(dom, flags: int = 0, tries: int = 3) -> None:
    """Start a domain; a start the host refused with EAGAIN is tried again (the labs start many QEMUs side by
    side on two cores), any other refusal is the test's answer."""
    import libvirt

    for attempt in range(tries):
        try:
            dom.createWithFlags(flags)
            return
        except libvirt.libvirtError as e:
            if TRANSIENT not in str(e) or attempt == tries - 1:
                raise
            time.sleep(1 + attempt)


def read_properties(conn, xml: bytes, props) -> dict[str, bool]:
    """Define, start paused, qom-get each property on vCPU 0, destroy, undefine."""
    dom = conn.defineXML(xml.decode())
    try:
        import libvirt

        create(dom, libvirt.VIR_DOMAIN_START_PAUSED)
        try:
            path = qmp(dom, {"execute": "query-cpus-fast"})[0]["qom-path"]
            return {p: _qom_get(dom, path, p) for p in props}
        finally:
            dom.destroy()
    finally:
        dom.undefine()


def boot_sector_guest(name: str, machine: str, cpu_xml: str = "", features_xml: str = "",
                      lab: Lab = HOST_LAB, register: str = "eax", cputune_xml: str = "") -> bytes:
    """A domain XML that boots the CPUID boot sector (printing `register`); serial output goes to a file."""
    lab.path(IMAGES).mkdir(parents=True, exist_ok=True)
    disk = IMAGES / f"{name}.img"
    lab.path(disk).write_bytes(boot_sector(register) + bytes(1024 * 1024 - 512))  # AHCI wants more than one sector
    log = IMAGES / f"{name}.serial"
    q35 = "q35" in machine
    bus, dev = ("sata", "sda") if q35 else ("ide", "hda")
    features = f"\n  <features>{features_xml}</features>" if features_xml else ""
    return f"""<domain type='kvm'>
  <name>{name}</name>
  <memory unit='MiB'>32</memory>
  <vcpu>2</vcpu>{cputune_xml}
  <os>
    <type arch='x86_64' machine='{machine}'>hvm</type>
    <boot dev='hd'/>
  </os>{features}
  {cpu_xml}
  <devices>
    <emulator>/usr/bin/qemu-system-x86_64</emulator>
    <disk type='file' device='disk'>
      <driver name='qemu' type='raw'/>
      <source file='{disk}'/>
      <target dev='{dev}' bus='{bus}'/>
    </disk>
    <serial type='file'>
      <source path='{log}'/>
    </serial>
    <video><model type='none'/></video>
  </devices>
</domain>
""".encode()


def serial_path(name: str, lab: Lab = HOST_LAB) -> Path:
    return lab.path(IMAGES / f"{name}.serial")


BOOT_WAIT = 60.0  # seconds for a boot sector's line: 2-5 s alone, much more beside the other labs' QEMUs


def start_and_read_cpuid(dom, timeout: float = BOOT_WAIT, lab: Lab = HOST_LAB) -> str:
    """Start a defined boot-sector guest, return the 8 hex digits it printed, destroy it."""
    log = serial_path(dom.name(), lab)
    if log.exists():
        log.unlink()
    create(dom)
    try:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if log.exists():
                text = log.read_text(errors="replace").strip()
                if len(text) >= 8:
                    return text[:8]
            time.sleep(0.1)
        raise AssertionError(f"{dom.name()}: no CPUID output on the serial port within {timeout}s")
    finally:
        dom.destroy()


def boot_and_read_cpuid(conn, xml: bytes, name: str, timeout: float = BOOT_WAIT, lab: Lab = HOST_LAB) -> str:
    """Define and start the boot-sector guest, return EAX of CPUID 0x40000001 as it printed it."""
    dom = conn.defineXML(xml.decode())
    try:
        return start_and_read_cpuid(dom, timeout, lab)
    finally:
        dom.undefine()


def libvirtd_pid() -> int:
    """The host lab's libvirtd, by its pidfile (the second lab's daemon in its chroot has the same name)."""
    return int(Path("/run/libvirtd.pid").read_text().split()[0])


def qemu_missing(lab: Lab) -> str | None:
    """Why the lab's QEMU cannot be run directly here (the lab tests' loud skip), or None."""
    missing = lab_missing()
    if missing:
        return missing
    if not (lab.root / "usr/bin/qemu-system-x86_64").exists():
        return f"no {lab.title} at {lab.root}"
    return None


def qemu_in(lab: Lab) -> list[str]:
    """The lab's qemu-system-x86_64, run in the lab's filesystem."""
    if lab.root == Path("/"):
        return ["qemu-system-x86_64"]
    return ["chroot", str(lab.root), "/usr/bin/qemu-system-x86_64"]


def qmp_direct(lab: Lab, commands: list[dict]) -> list[dict]:
    """Talk QMP to a bare `-machine none` QEMU of the lab (no libvirt); the replies in order."""
    lines = [json.dumps({"execute": "qmp_capabilities"})] + [json.dumps(c) for c in commands]
    lines.append(json.dumps({"execute": "quit"}))
    out = subprocess.run(qemu_in(lab) + ["-machine", "none", "-nodefaults", "-display", "none", "-qmp", "stdio"],
                         input="\n".join(lines) + "\n", capture_output=True, text=True, check=True,
                         timeout=120).stdout
    replies = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
    return [r for r in replies if "return" in r or "error" in r][1:1 + len(commands)]


def wait_for_libvirtd(timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if subprocess.run(["virsh", "-c", URI, "version"], capture_output=True).returncode == 0:
            return
        time.sleep(0.2)
    raise AssertionError("libvirtd did not come back")


def reload_hooks() -> None:
    """libvirtd discovers hook scripts at start and on SIGHUP."""
    os.kill(libvirtd_pid(), 1)
    time.sleep(1.5)
    wait_for_libvirtd()


def restart_libvirtd() -> None:
    pid = libvirtd_pid()
    os.kill(pid, 15)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and os.path.exists(f"/proc/{pid}"):
        time.sleep(0.1)
    subprocess.run(["libvirtd", "-d", "--listen"], check=True)
    wait_for_libvirtd()


def stop_watch(proc, conn, names, log) -> None:
    """Teardown of a test that ran `virtxml-cpu watch`: the process, the domains it defined, the files."""
    import libvirt

    if proc.poll() is None:
        proc.kill()
    for n in names:
        try:
            conn.lookupByName(n).undefine()
        except libvirt.libvirtError:
            pass
    conn.close()
    log.close()


def cleanup(conn) -> None:
    """Remove leftovers of earlier runs and this process's own (domains with the lab prefix), never a domain
    another running worker made (the chroot labs are shared between workers)."""
    for dom in conn.listAllDomains():
        if dom.name().startswith(PREFIX) and not in_use_elsewhere(dom.name()):
            if dom.isActive():
                dom.destroy()
            if dom.isPersistent():
                dom.undefine()
