"""The Debian package on real Debian 12 systems.

(a) The chroot lab with libvirt 11.3 / QEMU 10.0.2: `apt-get install ./virtxml-cpu_*.deb` reloads its
    libvirtd, a guest start is logged by the hook, `audit` runs with Debian's python3-libvirt, the units
    verify; `apt remove` takes the hook out and `apt purge` the config and spool, and guests still start.
    The chroot is left as found (every package the test brought in is purged again).
(b) A fresh minimal Debian 12 (debootstrap minbase, cached): the package installs without libvirt;
    `audit` says libvirt is missing in one line (exit 3), `explain` works, the completion completes.
(c) Debian's prometheus-node-exporter in that system scrapes what the audit service's own command
    (the installed unit's ExecStart, run there with python3-libvirt) wrote about the host lab.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import socket
import subprocess
import time
import urllib.request
from contextlib import contextmanager, suppress
from pathlib import Path

import pytest

from tests.lab import harness
from tests.lab.debroot import LogSocket, apt_get, copy_in, in_root, packages, settle_after_reload
from tests.lab.hooks import clear_interrupted

from tests.support import ROOT, require_lab

libvirt = require_lab()
pytestmark = pytest.mark.lab

BPO = harness.BPO_LAB
LAB_DIR = harness.LAB_DIR
MINBASE = Path(os.environ.get("VIRTXML_CPU_MINBASE_ROOT", LAB_DIR / "bookworm-minbase"))
DEB_CACHE = LAB_DIR / "minbase-debs"  # packages the minimal chroots downloaded, kept for the next run
HOOK = "etc/libvirt/hooks/qemu.d/virtxml-cpu"
CONFIG = "etc/virtxml-cpu/config.toml"
TEXTFILE_DIR = "var/lib/prometheus/node-exporter"
UNITS = ("virtxml-cpu-watch.service", "virtxml-cpu-audit.service", "virtxml-cpu-audit.timer")
HM = "<cpu mode='host-model' check='partial'/>"


def start_paused(conn, name: str) -> None:
    dom = conn.lookupByName(name)
    dom.createWithFlags(libvirt.VIR_DOMAIN_START_PAUSED)
    assert dom.isActive()
    dom.destroy()


def test_a_install_hook_audit_remove_purge_in_the_libvirt_11_lab(deb):
    harness.bring_up(BPO)
    root = BPO.root
    if "virtxml-cpu" in packages(root):  # an interrupted earlier run
        apt_get(root, "purge", "virtxml-cpu")
    clear_interrupted(BPO)  # a hook test's hook, if a run was killed inside one
    before = packages(root)
    assert not (root / HOOK).exists()
    conn = harness.connect(BPO)
    log = LogSocket(root)
    name = harness.unique_name("deb")
    conn.defineXML(harness.startable(harness.boot_sector_guest(name, "pc-q35-10.0", HM, lab=BPO)).decode())
    t0 = time.monotonic()
    try:
        out = apt_get(root, "install", copy_in(root, deb), "python3-libvirt")
        print(f"\n(a) install: {time.monotonic() - t0:.1f} s")
        assert "hooks/qemu.d/virtxml-cpu installed (audit mode" in out and "reloaded libvirtd" in out, out
        assert (root / HOOK).is_symlink() and os.readlink(root / HOOK) == "/usr/libexec/virtxml-cpu/qemu-hook"
        assert (root / "usr/libexec/virtxml-cpu/qemu-hook").read_text().startswith("#!/bin/sh\n")
        assert (root / "usr/bin/virtxml-cpu").read_text().startswith("#!/usr/bin/python3\n")
        status = in_root(root, "virtxml-cpu", "hook", "status").stdout
        assert "libvirt 11." in status and "qemu.d/virtxml-cpu: installed, mode audit" in status, status
        assert "interpreter /usr/bin/python3 ok" in status, status
        verify = in_root(root, "systemd-analyze", "verify", "--man=no", *(f"/lib/systemd/system/{u}" for u in UNITS),
                         check=False)
        assert verify.returncode == 0 and not verify.stderr.strip(), verify.stderr
        assert (root / "etc/systemd/system/timers.target.wants/virtxml-cpu-audit.timer").is_symlink()
        assert not (root / "etc/systemd/system/multi-user.target.wants/virtxml-cpu-watch.service").exists()

        # The conffile as shipped is all comments; the hook's log line goes to the test's socket.
        assert all(not line.strip() or line.startswith("#") or line == "[hook]"
                   for line in (root / CONFIG).read_text().splitlines())
        (root / CONFIG).write_text(f'[hook]\nsyslog_socket = "{log.inside}"\n')
        settle_after_reload(BPO)
        start_paused(conn, name)
        lines = log.lines(name)
        assert len(lines) == 1 and "op=prepare" in lines[0] and "decision=inject" in lines[0], lines

        audit = in_root(root, "virtxml-cpu", "audit", "--format", "json", name, check=False)
        assert audit.returncode == 1, audit.stderr  # the guest needs the fix
        rows = [json.loads(line) for line in audit.stdout.splitlines()]
        assert any(name in row.values() for row in rows), rows
        in_root(root, "virtxml-cpu", "audit", "--format", "prometheus", "-o", "/tmp/vxc-deb.prom", name,
                check=False)
        prom = (root / "tmp/vxc-deb.prom").read_text()
        assert [v for _, v in samples(prom, "virtxml_cpu_domain_needs_fix", domain=name)] == [1], prom

        out = apt_get(root, "remove", "virtxml-cpu")
        assert "qemu hook removed" in out and "reloaded libvirtd" in out, out
        assert not os.path.lexists(root / HOOK) and (root / CONFIG).exists()
        settle_after_reload(BPO)
        start_paused(conn, name)
        assert log.lines(name) == [], "the hook ran after apt remove"
        assert (root / "var/lib/virtxml-cpu").exists()  # the spool stays until purge

        apt_get(root, "purge", "virtxml-cpu")
        assert not (root / "etc/virtxml-cpu").exists() and not (root / "var/lib/virtxml-cpu").exists()
        assert not os.path.lexists(root / "etc/systemd/system/timers.target.wants/virtxml-cpu-audit.timer")
        start_paused(conn, name)
        assert log.lines(name) == []
        print(f"(a) install, hook, audit, remove, purge: {time.monotonic() - t0:.1f} s")
    finally:
        with suppress(libvirt.libvirtError):
            conn.lookupByName(name).undefine()
        conn.close()
        log.close()
        with suppress(FileNotFoundError):
            (root / "tmp" / deb.name).unlink()
        with suppress(FileNotFoundError):
            (root / "tmp/vxc-deb.prom").unlink()
        added = sorted(packages(root) - before)
        if added:
            apt_get(root, "purge", *added)
        assert packages(root) == before
        settle_after_reload(BPO)  # the daemon the lab started is still the one answering


def debootstrap_minbase() -> Path:
    """A pristine minimal Debian 12 (debootstrap --variant=minbase, with package lists), made once."""
    if (MINBASE / ".complete").exists():
        return MINBASE
    staging = MINBASE.with_name(MINBASE.name + ".new")
    shutil.rmtree(staging, ignore_errors=True)
    mirror = os.environ.get("VIRTXML_CPU_MIRROR", "http://deb.debian.org/debian")
    subprocess.run(["debootstrap", "--variant=minbase", "bookworm", str(staging), mirror], check=True,
                   capture_output=True, timeout=900)
    in_root(staging, "apt-get", "-q", "update")
    in_root(staging, "apt-get", "clean")
    (staging / ".complete").write_text("debootstrap --variant=minbase bookworm\n")
    staging.rename(MINBASE)
    return MINBASE


@contextmanager
def mounted(what: list[str], where: Path):
    where.mkdir(parents=True, exist_ok=True)
    subprocess.run(["mount", *what, str(where)], check=True)
    try:
        yield
    finally:
        subprocess.run(["umount", "-l", str(where)], check=False)


@pytest.fixture(scope="module")
def fresh():
    """A copy of the pristine minimal system (so every run starts fresh) with /proc and the kept packages."""
    t0 = time.monotonic()
    mounts = Path("/proc/mounts").read_text()
    for stale in LAB_DIR.glob("minbase-run-*"):  # left by an interrupted run
        if f" {stale}/" not in mounts:
            subprocess.run(["rm", "-rf", "--one-file-system", str(stale)], check=False)
    pristine = debootstrap_minbase()
    work = LAB_DIR / f"minbase-run-{os.getpid()}"
    subprocess.run(["cp", "-a", f"{pristine}/.", str(work)], check=True)
    DEB_CACHE.mkdir(parents=True, exist_ok=True)
    archives = work / "var/cache/apt/archives"
    for cached in DEB_CACHE.glob("*.deb"):
        shutil.copy(cached, archives)
    # No daemon starts in here (prometheus-node-exporter's postinst would start it): the test does.
    policy = work / "usr/sbin/policy-rc.d"
    policy.write_text("#!/bin/sh\nexit 101\n")
    policy.chmod(0o755)
    print(f"\nfresh minimal Debian 12: {time.monotonic() - t0:.1f} s")
    try:
        with mounted(["-t", "proc", "proc"], work / "proc"):
            yield work
    finally:
        for downloaded in archives.glob("*.deb"):
            if not (DEB_CACHE / downloaded.name).exists():
                shutil.copy(downloaded, DEB_CACHE)
        # /proc is unmounted above; --one-file-system keeps rm inside this copy whatever is left mounted.
        subprocess.run(["rm", "-rf", "--one-file-system", str(work)], check=False)


def test_b_installs_without_libvirt_and_says_so_in_one_line(fresh, deb):
    t0 = time.monotonic()
    out = apt_get(fresh, "install", copy_in(fresh, deb))
    assert "libvirtd is not running" in out, out
    assert not {"libvirt0", "python3-libvirt"} & packages(fresh)
    audit = in_root(fresh, "virtxml-cpu", "audit", check=False)
    lines = [line for line in audit.stderr.splitlines() if line.strip()]
    assert audit.returncode == 3 and len(lines) == 1 and "libvirt" in lines[0], audit.stderr
    assert "apt-get install python3-libvirt" in lines[0]
    shutil.copy(ROOT / "examples" / "fedora-host-model.xml", fresh / "tmp")
    explain = in_root(fresh, "virtxml-cpu", "explain", "--no-host-probe", "/tmp/fedora-host-model.xml")
    assert "kvm-pv-unhalt" in explain.stdout and "decision" in explain.stdout.lower(), explain.stdout
    assert (fresh / "usr/share/man/man8/virtxml-cpu.8.gz").is_file()
    completion = in_root(fresh, "bash", "-c", "source /usr/share/bash-completion/completions/virtxml-cpu; "
                         "COMP_WORDS=(virtxml-cpu audit --format pr); COMP_CWORD=3; _virtxml_cpu; "
                         "echo \"${COMPREPLY[@]}\"").stdout.split()
    assert completion == ["prometheus"]
    print(f"(b) install into the minimal system and run: {time.monotonic() - t0:.1f} s")


def samples(text: str, metric: str, **labels: str) -> list[tuple[dict[str, str], float]]:
    """The samples of one metric whose labels include `labels`, whatever order the writer put them in."""
    out = []
    for m in re.finditer(rf'^{metric}(?:{{(.*)}})? (\S+)$', text, flags=re.M):
        have = dict(re.findall(r'(\w+)="((?:[^"\\]|\\.)*)"', m.group(1) or ""))
        if labels.items() <= have.items():
            out.append((have, float(m.group(2))))
    return out


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def scrape(port: int, timeout: float = 20) -> str:
    deadline = time.monotonic() + timeout
    while True:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as r:
                return r.read().decode()
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)


def test_c_node_exporter_scrapes_the_audit_services_metrics_of_the_host_lab(fresh, deb):
    t0 = time.monotonic()
    harness.bring_up()
    lab = harness.connect()
    if "virtxml-cpu" not in packages(fresh):
        apt_get(fresh, "install", copy_in(fresh, deb))
    apt_get(fresh, "install", "prometheus-node-exporter", "python3-libvirt")
    assert (fresh / TEXTFILE_DIR).is_dir()
    name = harness.unique_name("deb-metrics")
    lab.defineXML(harness.boot_sector_guest(name, "pc-q35-7.2", HM).decode())
    exec_start = next(line.split("=", 1)[1] for line in
                      (fresh / "lib/systemd/system/virtxml-cpu-audit.service").read_text().splitlines()
                      if line.startswith("ExecStart="))
    port = free_port()
    exporter = subprocess.Popen(["chroot", str(fresh), "/usr/bin/prometheus-node-exporter",
                                 f"--web.listen-address=127.0.0.1:{port}", "--collector.disable-defaults",
                                 "--collector.textfile", f"--collector.textfile.directory=/{TEXTFILE_DIR}"],
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        # The service's command as systemd would run it, in the system the package is installed in,
        # talking to the host lab's libvirtd through its socket.
        with mounted(["--bind", "/run/libvirt"], fresh / "run/libvirt"):
            audit = in_root(fresh, *shlex.split(exec_start), check=False)
        # 1: some domain needs the fix (ours does); 2 only when another domain vanished mid-audit
        assert audit.returncode == 1 or (audit.returncode == 2 and "vanished" in audit.stderr), audit.stderr
        metrics = scrape(port)
        mine = dict(host="qemu:///system", domain=name)
        assert [v for _, v in samples(metrics, "virtxml_cpu_domain_pv_unhalt", **mine, view="definition")] == [0]
        assert [v for _, v in samples(metrics, "virtxml_cpu_domain_needs_fix", **mine)] == [1]
        assert [v for _, v in samples(metrics, "virtxml_cpu_host_reachable", host="qemu:///system")] == [1]
        assert [v for _, v in samples(metrics, "node_textfile_scrape_error")] == [0]
        print(f"(c) node_exporter scrape: {metrics.count(name)} samples of {name}; {time.monotonic() - t0:.1f} s")
    finally:
        exporter.terminate()
        try:
            exporter.wait(timeout=10)
        except subprocess.TimeoutExpired:
            exporter.kill()
            exporter.wait()
        with suppress(libvirt.libvirtError):
            lab.lookupByName(name).undefine()
        lab.close()
