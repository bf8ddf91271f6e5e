"""The root-run hook, the spool, the config and the file writers, tried as an attacker would: a domain
definition naming a script, a uuid naming a path, links planted by another user, FIFOs, forged log lines,
poisoned spool entries, and runs killed at random points. Each test guards against hanging."""

from __future__ import annotations

import io
import json
import os
import random
import shutil
import signal
import socket
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from virtxml_cpu.hook import evaluate, spool
from virtxml_cpu.core.domain import canonical_uuid
from virtxml_cpu.live.records import ApplyOutcome
from virtxml_cpu.fs.temps import remove_stale_temps

from tests.support import FIXTURES, ROOT, Capture
from tests.support.qemu import caps_cache

ROOT_ONLY = pytest.mark.skipif(os.geteuid() != 0, reason="needs root (other users, root-owned files)")
NEEDS_FIX = (FIXTURES / "handwritten-no-cpu.xml").read_bytes()
UUID = "0b7e2d1c-6a51-4f0e-8d7b-3c2f9e1a4b66"
NOBODY = 65534



def config(d: Path, mode: str, spool_dir: Path, extra: str = "") -> str:
    p = d / "c.toml"
    p.write_text(f'[hook]\nmode = "{mode}"\nspool = "{spool_dir}"\nlibvirt_config_dir = ""\n{extra}')
    return str(p)


def with_uuid(xml: bytes, uuid: str | None) -> bytes:
    return xml.replace(b"<name>scratch</name>", b"<name>scratch</name>" + (f"<uuid>{uuid}</uuid>".encode() if uuid else b""))


def in_subprocess(code: str, timeout: float = 20) -> subprocess.CompletedProcess:
    """Python code in a child; a hang is a failure (TimeoutExpired), never a stuck test run."""
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=timeout)


# --- the hook executes nothing a definition names -------------------------------------------------------


@ROOT_ONLY
def test_an_emulator_named_in_metadata_or_devices_is_never_executed(shared, tmp_path):
    ran = shared / "ran"
    ran.touch(mode=0o666)
    ran.chmod(0o666)
    evil = shared / "evil.sh"
    evil.write_text(f"#!/bin/sh\nid -u >> {ran}\necho 'QEMU emulator version 8.2.2 (Debian 1:8.2.2+ds-0ubuntu1.4)'\n")
    evil.chmod(0o755)
    xml = NEEDS_FIX.replace(b"<name>scratch</name>", b"<name>scratch</name><metadata><x:y xmlns:x='urn:x'><emulator>"
                            + str(evil).encode() + b"</emulator></x:y></metadata>")
    for doc in (xml, xml.replace(b"</devices>", f"<emulator>{evil}</emulator></devices>".encode())):
        log = Capture()
        rc = evaluate.run(["scratch", "prepare", "begin", "-"], config_path=config(tmp_path, "audit", tmp_path / "spool"),
                      stdin=io.BytesIO(doc), log=log)
        assert rc == 0 and ran.read_text() == "", ran.read_text()  # never ran, as root or anyone
        assert "qemu=unknown" in log.lines[-1] and "build unknown" in log.lines[-1]


@ROOT_ONLY
def test_only_a_root_owned_capabilities_cache_nobody_else_can_write_is_believed(tmp_path):
    from virtxml_cpu.host import caps_cache as host_caps_cache


    emulator = "/usr/bin/qemu-system-x86_64"
    caps = tmp_path / "caps"
    caps_cache(caps, emulator, "Debian 1:8.2.2+ds-0ubuntu1.4")
    (f,) = caps.iterdir()
    digests = str(tmp_path / "digests")
    assert host_caps_cache.lookup(emulator, str(caps), digests)[0].qemu_build == "ubuntu"
    assert host_caps_cache.lookup(emulator, str(caps), digests)[0].qemu_build == "ubuntu"  # from the digest
    for spoil, undo, why in (
            (lambda: f.chmod(0o666), lambda: f.chmod(0o644), "writable by group or others"),
            (lambda: os.chown(f, NOBODY, NOBODY), lambda: os.chown(f, 0, 0), "owned by uid 65534"),
            (lambda: caps.chmod(0o777), lambda: caps.chmod(0o755), "writable by group or others"),
            (lambda: (f.rename(tmp_path / "real.xml"), f.symlink_to(tmp_path / "real.xml")),
             lambda: (f.unlink(), (tmp_path / "real.xml").rename(f)), "not a regular file")):
        spoil()
        facts, reason = host_caps_cache.lookup(emulator, str(caps), digests)
        assert facts.qemu_build is None and why in reason, reason
        undo()
    # a digest someone else could have written is not believed: the cache file is read again
    (d,) = Path(digests).iterdir()
    d.write_text(d.read_text().replace("ubuntu", "el9"))
    os.chown(d, NOBODY, NOBODY)
    assert host_caps_cache.lookup(emulator, str(caps), digests)[0].qemu_build == "ubuntu"
    # a cache file that describes another emulator is not this one's
    f.write_text(f.read_text().replace(emulator, "/usr/bin/other"))
    assert "describes /usr/bin/other" in host_caps_cache.lookup(emulator, str(caps))[1]


# --- a uuid is a uuid ------------------------------------------------------------------------------------


@pytest.mark.parametrize("text,expected", [
    ("0B7E2D1C6A514F0E8D7B3C2F9E1A4B66", UUID), (UUID.upper(), UUID), (f" {UUID}\n", UUID),
    ("/", None), ("../out/x", None), ("/etc/passwd", None), ("", None), (None, None), (UUID + "/", None),
    ("0b7e2d1c-6a51-4f0e-8d7b-3c2f9e1a4b6", None), ("0b7e2d1c6a51-4f0e-8d7b-3c2f9e1a4b66", None),
])
def test_uuid_grammar(text, expected):
    assert canonical_uuid(text) == expected


@pytest.mark.parametrize("uuid", ["/", "../out/x", "ABSOLUTE", None])
def test_queue_mode_never_writes_outside_its_spool(tmp_path, uuid):
    (tmp_path / "out").mkdir()
    spool_dir = tmp_path / "s" / "spool"
    uuid = str(tmp_path / "abs") if uuid == "ABSOLUTE" else uuid
    before = set(Path("/").iterdir())
    log = Capture()
    rc = evaluate.run(["scratch", "prepare", "begin", "-"], config_path=config(tmp_path, "queue", spool_dir),
                  stdin=io.BytesIO(with_uuid(NEEDS_FIX, uuid)), log=log)
    written = [p for p in tmp_path.rglob("*") if p.is_file() and p.name != "c.toml"]
    assert rc == 0 and written == [] and set(Path("/").iterdir()) == before, written
    assert any("fix not queued" in line and "is not a uuid" in line for line in log.lines), log.lines


# --- the spool cannot be turned against root ---------------------------------------------------------------


def _plant_as_nobody(spool_dir: Path, victim: Path) -> None:
    """Another user plants links where the hook's temporary files (old and new naming) would go."""
    for name in (f"{UUID}.json.{os.getpid()}.tmp", f"{UUID}.json"):
        subprocess.run(["runuser", "-u", "nobody", "--", "ln", "-s", str(victim), str(spool_dir / name)],
                       check=True, timeout=20)


@ROOT_ONLY
@pytest.mark.parametrize("how", ["world-writable", "owned by nobody"])
def test_hook_refuses_a_spool_others_can_write_and_follows_no_planted_link(shared, how):
    victim = shared / "victim"
    victim.write_text("root's secret")
    victim.chmod(0o600)
    spool_dir = shared / "spool"
    spool_dir.mkdir()
    spool_dir.chmod(0o777) if how == "world-writable" else os.chown(spool_dir, NOBODY, NOBODY)
    _plant_as_nobody(spool_dir, victim)
    log = Capture()
    rc = evaluate.run(["scratch", "prepare", "begin", "-"], config_path=config(shared, "queue", spool_dir),
                  stdin=io.BytesIO(with_uuid(NEEDS_FIX, UUID)), log=log)
    assert rc == 0 and victim.read_text() == "root's secret" and stat.S_IMODE(victim.stat().st_mode) == 0o600
    assert (spool_dir / f"{UUID}.json").is_symlink()  # left as the attacker made it: never written through
    assert any("fix not queued" in line and "refusing" in line for line in log.lines), log.lines


@ROOT_ONLY
def test_hook_refuses_a_spool_that_is_a_link_or_a_file(shared, tmp_path):
    target = shared / "elsewhere"
    target.mkdir(mode=0o700)
    (shared / "link").symlink_to(target)
    (shared / "file").write_text("")
    for spool_dir, why in ((shared / "link", "symbolic link"), (shared / "file", "not a directory")):
        log = Capture()
        rc = evaluate.run(["scratch", "prepare", "begin", "-"], config_path=config(tmp_path, "queue", spool_dir),
                      stdin=io.BytesIO(with_uuid(NEEDS_FIX, UUID)), log=log)
        assert rc == 0 and list(target.iterdir()) == [] and sum(why in line for line in log.lines) == 1, log.lines


def test_a_good_spool_is_private_and_entries_are_whole(tmp_path):
    spool_dir = tmp_path / "new" / "spool"
    rc = evaluate.run(["scratch", "prepare", "begin", "-"], config_path=config(tmp_path, "queue", spool_dir),
                  stdin=io.BytesIO(with_uuid(NEEDS_FIX, UUID.upper())), log=Capture())
    st = spool_dir.stat()
    assert rc == 0 and stat.S_IMODE(st.st_mode) == 0o700 and st.st_uid == os.geteuid()
    assert [p.name for p in spool_dir.iterdir()] == [f"{UUID}.json"]


# --- nothing blocks on a FIFO --------------------------------------------------------------------------------


def test_a_fifo_or_device_config_is_one_line_exit_2_and_the_hook_fails_open(tmp_path):
    fifo = tmp_path / "config.toml"
    os.mkfifo(fifo)
    for path in (str(fifo), "/dev/null", str(tmp_path)):
        t = time.monotonic()
        r = subprocess.run([sys.executable, "-m", "virtxml_cpu", "explain", "--no-host-probe", "--config", path,
                            str(FIXTURES / "handwritten-no-cpu.xml")], capture_output=True, cwd=ROOT, timeout=20)
        err = r.stderr.decode()
        assert r.returncode == 2 and err.count("\n") == 1 and "not a regular file" in err, err
        assert time.monotonic() - t < 15
    r = in_subprocess(f"import io; from virtxml_cpu.hook import evaluate; lines = []\n"
                      f"rc = evaluate.run(['vm', 'prepare', 'begin', '-'], config_path={str(fifo)!r}, "
                      f"stdin=io.BytesIO(b'<domain/>'), log=lambda m, **k: lines.append(m))\n"
                      f"print(rc, len(lines), lines[0])")
    assert r.stdout.startswith("0 1 ") and "config unusable" in r.stdout and "not a regular file (a FIFO)" in r.stdout


@ROOT_ONLY
def test_proc_kmsg_as_config_does_not_hang():
    r = subprocess.run([sys.executable, "-m", "virtxml_cpu", "explain", "--no-host-probe",
                        str(FIXTURES / "handwritten-no-cpu.xml")], capture_output=True, cwd=ROOT, timeout=20,
                       env=dict(os.environ, VIRTXML_CPU_CONFIG="/proc/kmsg"))
    assert r.returncode == 2 and r.stderr.count(b"\n") == 1, r.stderr


def test_a_fifo_in_the_spool_is_skipped_and_the_other_entries_read(tmp_path):
    d = tmp_path / "spool"
    spool.write(str(d), UUID, {"name": "good"})
    os.mkfifo(d / "00000000-0000-0000-0000-000000000000.json")
    (d / "11111111-1111-1111-1111-111111111111.json").symlink_to(d / f"{UUID}.json")
    r = in_subprocess("from virtxml_cpu.hook import spool; w = []\n"
                      f"e = spool.entries({str(d)!r}, warn=w.append)\n"
                      "print([x.domain for x in e]); print('\\n'.join(w))")
    out = r.stdout.splitlines()
    assert r.returncode == 0 and out[0] == "['good']", r
    assert "FIFO" in out[1] and "symbolic link" in out[2]


# --- log lines cannot be forged -----------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["vm\nvirtxml-cpu[1]:decision=none", "vm\rx", "vm\u2028x", 'vm" x=1', "vm\x85x"])
def test_a_control_character_in_a_name_stays_one_log_line(tmp_path, name):
    xml = NEEDS_FIX.replace(b"<name>scratch</name>", f"<name>{name}</name>".encode())
    sock_path = tmp_path / "log.sock"
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as s:
        s.bind(str(sock_path))
        s.settimeout(5)
        evaluate.run([name, "prepare", "begin", "-"], stdin=io.BytesIO(xml),
                 config_path=config(tmp_path, "audit", tmp_path / "spool", f'syslog_socket = "{sock_path}"\n'))
        msg = s.recv(65536).decode()
    assert "decision=inject" in msg and not any(c in msg for c in "\n\r\u2028\x85"), msg
    assert msg.count(" decision=") == 1


def test_an_enforce_refusal_with_a_huge_name_still_reaches_syslog(tmp_path):
    """A 5 MB name made the line too long for one datagram: the refusal was lost (enforce logs it with no
    stderr fallback). Each field is cut, so the line fits and still says what happened."""
    name = "vm" + "x" * 5_000_000
    xml = NEEDS_FIX.replace(b"<name>scratch</name>", f"<name>{name}</name>".encode())
    sock_path = tmp_path / "log.sock"
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as s:
        s.bind(str(sock_path))
        s.settimeout(5)
        rc = evaluate.run([name, "prepare", "begin", "-"], stdin=io.BytesIO(xml),
                      config_path=config(tmp_path, "enforce", tmp_path / "spool", f'syslog_socket = "{sock_path}"\n'))
        msg = s.recv(65536).decode()
    assert rc == 1 and "result=refused" in msg and len(msg) < 4096, len(msg)


def test_a_syslog_that_stopped_reading_does_not_hold_the_guest_start(tmp_path):
    sock_path = tmp_path / "log.sock"
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as s:
        s.bind(str(sock_path))  # bound, never read: its queue fills
        with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as w:
            w.setblocking(False)
            w.connect(str(sock_path))
            try:
                while True:
                    w.send(b"x")
            except BlockingIOError:
                pass
        cfg = config(tmp_path, "audit", tmp_path / "spool", f'syslog_socket = "{sock_path}"\n')
        t = time.monotonic()
        r = in_subprocess(f"import io; from virtxml_cpu.hook import evaluate\n"
                          f"print(evaluate.run(['vm', 'prepare', 'begin', '-'], config_path={cfg!r}, "
                          f"stdin=io.BytesIO({NEEDS_FIX!r})))")
    assert r.stdout.strip() == "0" and "decision=inject" in r.stderr and time.monotonic() - t < 15


def test_log_fields_are_plain_tokens_or_quoted():
    from virtxml_cpu.hook.logline import kv

    assert kv(a="vm-1", b="two words", c="", d='x"=y', e=3) == 'a=vm-1 b="two words" c="" d="x\\"=y" e=3'


# --- one bad spool entry never stops the queue ----------------------------------------------------------------


@pytest.mark.parametrize("entry", [
    {"uuid": UUID, "attempts": "1e400"}, {"uuid": UUID, "attempts": -1}, {"uuid": UUID, "attempts": True},
    {"uuid": UUID, "next_try": "nan"}, {"uuid": UUID, "next_try": "1e400"}, {"uuid": "../x"}, {"uuid": UUID, "name": 5},
    {"uuid": UUID, "domain": 5}, {"uuid": UUID, "last_outcome": "transient"},
    {"uuid": UUID, "last_outcome": {"host": "h", "domain": "d", "kind": "vanished", "reason": ""}},
    [1], "deep",
])
def test_a_poisoned_entry_is_reported_and_skipped(tmp_path, entry):
    d = tmp_path / "spool"
    spool.write(str(d), "22222222-2222-2222-2222-222222222222", {"name": "after"})
    raw = json.dumps(entry).replace('"1e400"', "1e400").replace('"nan"', "NaN")
    raw = "[" * 30000 + "]" * 30000 if entry == "deep" else raw  # within the size bound
    (d / f"{UUID}.json").write_text(raw)
    warned = []
    assert [e.domain for e in spool.entries(str(d), warn=warned.append)] == ["after"]
    assert len(warned) == 1 and UUID in warned[0] and "\n" not in warned[0]


def test_delay_never_overflows_and_2000_postponements_keep_the_entry(tmp_path):
    assert spool.delay(1025) == spool.delay(10**6) == spool.MAX_DELAY
    d = tmp_path / "spool"
    spool.write(str(d), UUID, {"name": "vm"})
    (e,) = spool.entries(str(d))
    skipped = ApplyOutcome("qemu:///system", "vm", "skipped", "transient domain")
    for _ in range(2000):
        e = spool.postpone(e, skipped, now=0.0)
    (back,) = spool.entries(str(d))
    assert back.attempts == 2000 and back.next_try == spool.MAX_DELAY and back.last_outcome == skipped


# --- killed runs: the file whole, no temp files, no second backup ------------------------------------------


def _sigkill_at_random(args: list[str], delay: float) -> None:
    """Fork a child that runs the CLI in-process (no interpreter start) and SIGKILL it after `delay`."""
    from virtxml_cpu import cli

    pid = os.fork()
    if pid == 0:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, 1)
        os.dup2(devnull, 2)
        try:
            code = cli.main(args)
        except BaseException:  # noqa: BLE001
            code = 99
        os._exit(code or 0)
    time.sleep(delay)
    os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)


def kill_loop(directory: str, runs: int) -> dict:
    """SIGKILL `rewrite --in-place --backup .orig` at random points, `runs` times; after each kill the file
    is whole, and the next run completes it leaving exactly FILE and FILE.orig. Runs in a fresh interpreter
    (a fork of the test process could inherit locks held by other tests' threads)."""
    from virtxml_cpu import cli

    tmp_path = Path(directory)
    big = NEEDS_FIX.replace(b"</domain>", b"<description>" + b"x" * 2_000_000 + b"</description></domain>")
    vm = tmp_path / "vm.xml"
    args = ["rewrite", "--in-place", "--backup", ".orig", "--no-host-probe", str(vm)]
    vm.write_bytes(big)
    t = time.monotonic()
    assert cli.main(args) == 0
    duration, done = time.monotonic() - t, vm.read_bytes()
    rng = random.Random(12)
    outcomes = {"untouched": 0, "rewritten": 0, "temp left": 0, "backup only": 0}
    done_runs = 0
    # At least `runs` kills, and on until every outcome was seen (a loaded machine shifts the phases of one
    # run, so the kill window follows what was seen: wider while nothing got rewritten), at most 4x `runs`.
    while done_runs < runs or (not all(outcomes.values()) and done_runs < 4 * runs):
        done_runs += 1
        if done_runs % 50 == 0 and not outcomes["rewritten"]:
            duration *= 1.5
        for p in tmp_path.iterdir():
            p.unlink()
        vm.write_bytes(big)
        _sigkill_at_random(args, rng.uniform(0, duration * 1.2))
        now = vm.read_bytes()
        assert now in (big, done)  # whole, whichever it is
        names = {p.name for p in tmp_path.iterdir()}
        outcomes["rewritten" if now == done else "untouched"] += 1
        outcomes["temp left"] += any(n.startswith(".virtxml-cpu.") for n in names)
        outcomes["backup only"] += now == big and "vm.xml.orig" in names
        with open(os.devnull, "w") as quiet:
            saved, sys.stderr = sys.stderr, quiet
            try:
                assert cli.main(args) == 0  # the next run completes what the killed one started
            finally:
                sys.stderr = saved
        names = sorted(p.name for p in tmp_path.iterdir())
        assert names == ["vm.xml", "vm.xml.orig"], names
        assert vm.read_bytes() == done and (tmp_path / "vm.xml.orig").read_bytes() == big
    return outcomes


def test_sigkill_at_random_points_leaves_the_file_whole_and_the_next_run_completes_cleanly(tmp_path):
    r = subprocess.run([sys.executable, "-c", "import json, sys; from tests.unit.hook.test_spool import kill_loop; "
                        f"print(json.dumps(kill_loop({str(tmp_path)!r}, 200)))"],
                       capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    outcomes = json.loads(r.stdout.splitlines()[-1])
    print(f"\nSIGKILL outcomes over 200 runs: {outcomes}")
    assert outcomes["untouched"] and outcomes["rewritten"] and outcomes["temp left"] and outcomes["backup only"]


def test_a_kill_between_backup_and_rename_does_not_make_a_second_backup(tmp_path):
    from virtxml_cpu.fs.files import locate, write_backup

    vm = tmp_path / "vm.xml"
    vm.write_bytes(NEEDS_FIX)
    place, fd = locate(str(vm)), os.open(vm, os.O_RDONLY)
    try:
        write_backup(place, ".orig", NEEDS_FIX, fd)  # what the killed run got done
    finally:
        os.close(fd)
        os.close(place.dfd)
    r = subprocess.run([sys.executable, "-m", "virtxml_cpu", "rewrite", "--in-place", "--backup", ".orig",
                        "--no-host-probe", str(vm)], capture_output=True, cwd=ROOT, timeout=60)
    assert r.returncode == 0 and sorted(p.name for p in tmp_path.iterdir()) == ["vm.xml", "vm.xml.orig"]
    assert (tmp_path / "vm.xml.orig").read_bytes() == NEEDS_FIX and b"pvspinlock" in vm.read_bytes()


@ROOT_ONLY
def test_stale_temp_files_of_dead_runs_are_removed_and_nothing_else(shared):
    dead = _dead_pid()
    stale = shared / f".virtxml-cpu.{dead}.abcdefgh.tmp"
    live = shared / f".virtxml-cpu.{os.getppid()}.abcdefgh.tmp"
    foreign = shared / f".virtxml-cpu.{dead}.ijklmnop.tmp"
    other = shared / f".virtxml-cpu.{dead}.tmp.keep"
    for p in (stale, live, foreign, other):
        p.write_text("x")
    os.chown(foreign, NOBODY, NOBODY)
    (shared / f".virtxml-cpu.{dead}.qrstuvwx.tmp").symlink_to(stale)
    out = shared / "report.xml"
    r = subprocess.run([sys.executable, "-m", "virtxml_cpu", "rewrite", "--no-host-probe", "-o", str(out),
                        str(FIXTURES / "handwritten-no-cpu.xml")], capture_output=True, cwd=ROOT, timeout=60)
    assert r.returncode == 0, r.stderr
    assert not stale.exists() and live.exists() and foreign.exists() and other.exists()
    assert (shared / f".virtxml-cpu.{dead}.qrstuvwx.tmp").is_symlink()
    assert remove_stale_temps(str(shared)) == []


def _dead_pid() -> int:
    p = subprocess.Popen(["true"])
    p.wait()
    return p.pid


# --- attacks on the root-run CLI by other users (found after the hardening above) -----------------------

KVM_AND_QEMU = pytest.mark.skipif(
    os.geteuid() != 0 or not os.path.exists("/dev/kvm") or not shutil.which("qemu-system-x86_64"),
    reason="needs root, /dev/kvm and qemu-system-x86_64 (verify starts a QEMU)")


@KVM_AND_QEMU
def test_a_process_of_the_qemu_user_cannot_make_root_open_a_file_through_verifys_private_directory(shared):
    """verify's private directory belongs to the user QEMU runs as (libvirt-qemu), and root opens each
    QEMU's log there by name. Any process of that user (here: the emulator itself, a wrapper that plants
    links for the next QEMUs' logs, then runs the real QEMU) must not make root truncate and write a file
    only root may touch."""
    victim_dir = shared / "root-only"
    victim_dir.mkdir(mode=0o700)
    victim = victim_dir / "secret"
    victim.write_bytes(b"root's data\n")
    victim.chmod(0o600)
    wrapper = Path("/opt") / f"vxc-sec-qemu-{os.getpid()}"  # root-owned path, as a trusted wrapper would be
    wrapper.write_text("#!/bin/sh\n"
                       f"for n in 2 3 4 5 6 7 8 9; do ln -s {victim} $n.err 2>/dev/null; done\n"
                       f"exec {shutil.which('qemu-system-x86_64')} \"$@\"\n")
    wrapper.chmod(0o755)
    try:
        subprocess.run([sys.executable, "-m", "virtxml_cpu", "verify", "--emulator", str(wrapper),
                        "--machine", "pc-q35-*", "--cpu", "default", "--workers", "1", "-q",
                        "--record", str(shared / "record.json")], capture_output=True, cwd=ROOT, timeout=120)
    finally:
        wrapper.unlink()
    assert victim.read_bytes() == b"root's data\n"


@ROOT_ONLY
def test_rewrite_in_place_cannot_be_redirected_into_a_protected_directory_by_swapping_a_parent(shared):
    """Root rewrites a file in a directory another user owns. The user holds the file's lock, lets go,
    and while root computes the rewrite swaps the file's directory for a link to a root-only directory.
    Root must not replace a file there (let alone hand it to that user)."""
    protected = shared / "protected"
    protected.mkdir(mode=0o700)
    victim = protected / "passwd"
    victim.write_bytes(b"root:x:0:0:root:/root:/bin/sh\n")
    victim.chmod(0o644)
    att = shared / "att"
    (att / "d").mkdir(parents=True)
    target = att / "d" / "passwd"
    filler = "<x:y xmlns:x='urn:x'>" + "<a b='c'/>" * 300000 + "</x:y>"  # a few seconds of work for root
    target.write_bytes(NEEDS_FIX.replace(b"</name>", b"</name><metadata>" + filler.encode() + b"</metadata>", 1))
    for p in (att, att / "d", target):
        os.chown(p, NOBODY, NOBODY)
    attacker = subprocess.Popen(
        ["runuser", "-u", "nobody", "--", "/usr/bin/python3", "-c",
         "import fcntl, os, sys, time\n"
         "att = sys.argv[1]\n"
         "fd = os.open(att + '/d/passwd', os.O_RDONLY)\n"
         "fcntl.flock(fd, fcntl.LOCK_EX)\n"
         "print('locked', flush=True)\n"
         "sys.stdin.readline()\n"  # root has the file open and waits for the lock
         "os.close(fd)\n"
         "time.sleep(0.4)\n"  # root has checked the file and is computing
         "os.rename(att + '/d', att + '/d.old')\n"
         "os.symlink(sys.argv[2], att + '/d')\n",
         str(att), str(protected)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert attacker.stdout.readline() == "locked\n"
        root = subprocess.Popen([sys.executable, "-m", "virtxml_cpu", "rewrite", "--no-host-probe", "--in-place",
                                 str(target)], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        deadline = time.monotonic() + 60
        while not _holds_open(root.pid, target) and root.poll() is None and time.monotonic() < deadline:
            time.sleep(0.02)
        attacker.stdin.write("go\n")
        attacker.stdin.flush()
        attacker.wait(30)
        root.communicate(timeout=120)
    finally:
        attacker.kill()
    st = victim.lstat()
    assert (st.st_uid, victim.read_bytes()) == (0, b"root:x:0:0:root:/root:/bin/sh\n")


@ROOT_ONLY
def test_hook_refuses_a_spool_below_a_directory_another_user_can_change(shared):
    """The spool itself is private, but its parent belongs to another user, who can swap the spool for a
    link to any directory between the hook's check and its write (done in a loop, the hook then wrote
    <uuid>.json, and left a temporary file, in a root-only directory). The hook must refuse such a spool."""
    parent = shared / "theirs"
    (parent / "spool").mkdir(parents=True, mode=0o700)
    os.chown(parent, NOBODY, NOBODY)
    log = Capture()
    rc = evaluate.run(["scratch", "prepare", "begin", "-"], config_path=config(shared, "queue", parent / "spool"),
                  stdin=io.BytesIO(with_uuid(NEEDS_FIX, UUID)), log=log)
    assert rc == 0 and not (parent / "spool" / f"{UUID}.json").exists(), log.lines
    assert any("fix not queued" in line for line in log.lines), log.lines


@pytest.mark.parametrize("number", ["1" + "0" * 400, "-" + "9" * 400])
def test_a_next_try_too_big_for_a_float_is_reported_and_skipped(tmp_path, number):
    """JSON integers have no bound: math.isfinite() of a 401-digit integer raises OverflowError, which is
    not a ValueError, so this one entry stopped the whole queue (apply --pending, watch)."""
    d = tmp_path / "spool"
    spool.write(str(d), "22222222-2222-2222-2222-222222222222", {"name": "after"})
    (d / f"{UUID}.json").write_text(f'{{"uuid": "{UUID}", "next_try": {number}}}')
    warned = []
    assert [e.domain for e in spool.entries(str(d), warn=warned.append)] == ["after"]
    assert len(warned) == 1 and UUID in warned[0]


@ROOT_ONLY
def test_hook_install_refuses_code_another_user_can_change(shared):
    """The installed hook runs as root at every guest start, importing virtxml_cpu from where `hook install`
    ran. Installed from a tree another user owns (a checkout or venv in their home), that user can edit
    virtxml_cpu/hook/evaluate.py and run anything as root at the next guest start: install must refuse it."""
    tree = shared / "checkout"
    shutil.copytree(ROOT / "virtxml_cpu", tree / "virtxml_cpu", ignore=shutil.ignore_patterns("__pycache__"))
    for p in [tree, *tree.rglob("*")]:
        os.chown(p, NOBODY, NOBODY)
    hooks = shared / "hooks"
    r = subprocess.run([sys.executable, "-c", "import sys; from virtxml_cpu.cli import main; sys.exit(main())",
                        "hook", "install", "--hooks-dir", str(hooks), "--legacy"],
                       cwd=tree, capture_output=True, text=True, timeout=60,
                       env=dict(os.environ, PYTHONPATH=str(tree)))
    installed = hooks / "qemu"
    assert not (installed.exists() and str(tree) in installed.read_text()), (r.returncode, r.stdout, r.stderr)


def _holds_open(pid: int, path: Path) -> bool:
    try:
        return any(os.readlink(f"/proc/{pid}/fd/{fd}") == str(path) for fd in os.listdir(f"/proc/{pid}/fd"))
    except OSError:
        return False


TRANSIENT = ApplyOutcome("qemu:///system", "vm", "skipped", "transient domain (no persistent definition to fix)")


def test_spool_postpones_with_growing_delay_and_keeps_the_outcome(tmp_path):
    d = str(tmp_path / "spool")
    spool.write(d, "0B7E2D1C6A514F0E8D7B3C2F9E1A4B66", {"name": "vm", "rule": "policy-compat"})  # as queued before "domain"
    (e,) = spool.entries(d)
    assert (e.uuid, e.domain, e.attempts) == ("0b7e2d1c-6a51-4f0e-8d7b-3c2f9e1a4b66", "vm", 0) and e.due(0)
    e1 = spool.postpone(e, TRANSIENT, now=1000.0)
    e2 = spool.postpone(e1, TRANSIENT, now=2000.0)
    assert (e1.next_try, e2.next_try) == (1060.0, 2120.0) and e2.attempts == 2
    (back,) = spool.entries(d)
    assert back.attempts == 2 and back.last_outcome == TRANSIENT and not back.due(2100.0) and back.due(2120.0)
    data = json.loads(open(back.path).read())
    assert data["rule"] == "policy-compat" and data["domain"] == "vm" and "name" not in data
    assert data["last_outcome"] == {"host": "qemu:///system", "domain": "vm", "kind": "skipped",
                                    "reason": "transient domain (no persistent definition to fix)"}
    assert spool.delay(30) == spool.MAX_DELAY
    spool.drop(back)
    assert spool.entries(d) == []


def test_spool_skips_unreadable_entries_with_a_warning(tmp_path):
    (tmp_path / "bad.json").write_text("{")
    warned = []
    assert spool.entries(str(tmp_path), warn=warned.append) == [] and "bad.json" in warned[0]
