"""`verify` without KVM: the QMP client against a scripted QMP server on a real unix socket, and the
comparison against a fake emulator (a real process serving QMP) whose answers the test chooses."""

from __future__ import annotations

import json
import os
import socket
import threading
import time
from pathlib import Path

import pytest

from virtxml_cpu.host.sources import assemble
from virtxml_cpu.tables import qemu
from virtxml_cpu.verify import run as verify
from virtxml_cpu.verify import launch, record as verify_record
from virtxml_cpu.core.hostfacts import HostFacts
from virtxml_cpu.host.qmp import QMP, QMPClosed, QMPError

from tests.support.qemu import TRUE_7_2, named

GREETING = {"QMP": {"version": {"qemu": {"major": 7, "minor": 2, "micro": 22}, "package": ""}, "capabilities": []}}


class ScriptedServer:
    """Accepts one connection; for each command read, `reply(cmd)` gives the lines to send (dicts), or None
    to stay silent, or "close"."""

    def __init__(self, path: Path, reply, greeting=GREETING):
        self.path, self.reply, self.greeting = str(path), reply, greeting
        self.received: list[dict] = []
        self.srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.srv.bind(self.path)
        self.srv.listen(1)
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self):
        conn, _ = self.srv.accept()
        with conn:
            conn.sendall(json.dumps(self.greeting).encode() + b"\r\n")
            buf = b""
            while True:
                data = conn.recv(65536)
                if not data:
                    return
                buf += data
                while b"\n" in buf:
                    line, buf = buf.split(b"\n", 1)
                    cmd = json.loads(line)
                    self.received.append(cmd)
                    out = self.reply(cmd)
                    if out == "close":
                        return
                    for msg in out or ():
                        conn.sendall((json.dumps(msg) + "\r\n").encode())

    def close(self):
        self.srv.close()


def answer(cmd, value):
    return {"return": value, "id": cmd.get("id")}


def test_handshake_execute_skips_events_and_replies_to_other_ids(tmp_path):
    def reply(cmd):
        if cmd["execute"] == "qmp_capabilities":
            return [answer(cmd, {})]
        return [{"event": "STOP", "timestamp": {"seconds": 1, "microseconds": 0}},
                {"return": "stale", "id": "someone-else"}, {},  # not ours: skipped
                answer(cmd, {"echo": cmd.get("arguments")})]

    srv = ScriptedServer(tmp_path / "qmp", reply)
    with QMP.connect_unix(str(tmp_path / "qmp"), timeout=5) as mon:
        assert mon.handshake()["version"]["qemu"]["major"] == 7
        assert mon.execute("qom-get", {"path": "/x", "property": "l3-cache"}) == {"echo": {"path": "/x", "property": "l3-cache"}}
        assert mon.execute("query-version") == {"echo": None}
    assert [c["execute"] for c in srv.received] == ["qmp_capabilities", "qom-get", "query-version"]
    assert len({c["id"] for c in srv.received}) == 3  # every command has its own id
    srv.close()


def test_error_reply_raises_with_class_and_description(tmp_path):
    def reply(cmd):
        if cmd["execute"] == "qmp_capabilities":
            return [answer(cmd, {})]
        return [{"error": {"class": "GenericError", "desc": "Property 'x86_64-cpu.foo' not found"}, "id": cmd["id"]}]

    ScriptedServer(tmp_path / "qmp", reply)
    with QMP.connect_unix(str(tmp_path / "qmp"), timeout=5) as mon:
        mon.handshake()
        with pytest.raises(QMPError) as e:
            mon.execute("qom-get", {"path": "/x", "property": "foo"})
    assert e.value.klass == "GenericError" and "not found" in e.value.desc


def test_a_silent_server_times_out_and_a_closing_one_is_reported(tmp_path):
    ScriptedServer(tmp_path / "silent", lambda cmd: [answer(cmd, {})] if cmd["execute"] == "qmp_capabilities" else None)
    with QMP.connect_unix(str(tmp_path / "silent"), timeout=0.5) as mon:
        mon.handshake()
        t = time.monotonic()
        with pytest.raises(QMPClosed, match="did not answer within"):
            mon.execute("query-cpus-fast")
        assert 0.4 < time.monotonic() - t < 3
    ScriptedServer(tmp_path / "closing", lambda cmd: "close")
    with QMP.connect_unix(str(tmp_path / "closing"), timeout=5) as mon:
        with pytest.raises(QMPClosed, match="closed the monitor"):
            mon.handshake()


def test_not_a_greeting_and_no_socket(tmp_path):
    ScriptedServer(tmp_path / "http", lambda cmd: None, greeting={"hello": "world"})
    with QMP.connect_unix(str(tmp_path / "http"), timeout=5) as mon:
        with pytest.raises(QMPClosed, match="not a QMP greeting"):
            mon.handshake()
    t = time.monotonic()
    with pytest.raises(QMPClosed, match="exited before"):
        QMP.connect_unix(str(tmp_path / "none"), timeout=5, alive=lambda: False)
    with pytest.raises(QMPClosed, match="no QMP monitor"):
        QMP.connect_unix(str(tmp_path / "none"), timeout=0.3)
    assert time.monotonic() - t < 3


def test_probe_reads_version_machines_models_and_copes_without_compat_props(fake):
    binary = launch.probe(fake())
    assert (binary.release, binary.version, binary.package, binary.compat_props) == ((7, 2, 9), "7.2.9", "Fake 1:7.2-1", False)
    assert "EPYC" in binary.models
    assert launch.probe(fake(compat=True)).compat_props
    assert verify.x86_machines(binary.machines) == ["pc", "pc-i440fx-2.7", "pc-i440fx-7.2", "pc-q35-7.2", "q35"]
    assert verify.x86_machines(binary.machines, ("pc-q35-*",)) == ["pc-q35-7.2"]
    host = assemble(verify.sources(verify.VerifyOptions(), binary, kvm=False))
    assert host.aliases == {"pc": "pc-i440fx-7.2", "q35": "pc-q35-7.2", "": "pc-i440fx-7.2"}
    assert host.qemu_build == "upstream" and host.qemu_version == (7, 2, 9)
    flag = assemble(verify.sources(verify.VerifyOptions(qemu_build="ubuntu"), binary, kvm=False))
    assert (flag.qemu_build, flag.build_source) == ("ubuntu", "--qemu-build")


def test_query_versions_fields_are_the_facts_not_a_version_line_made_from_them(fake):
    """query-version's typed release and package become the host facts through the one function a parsed
    --version line and libvirt's cache go through (hostfacts.release_facts): the basis quotes what QMP
    said, never a `QEMU emulator version` line this QEMU did not print."""
    from virtxml_cpu.core.hostfacts import build_from_version
    from virtxml_cpu.host.caps_cache import QemuCaps

    binary = launch.probe(fake())
    facts = verify.qemu_facts(binary)
    what = f"{binary.emulator} query-version"
    assert (facts.qemu_version, facts.package, facts.qemu_build) == ((7, 2, 9), "Fake 1:7.2-1", "upstream")
    assert facts.build_source == f"{what}: package Fake 1:7.2-1" and "emulator version" not in facts.build_source
    assert facts.sources == (what, f"{binary.emulator} query-machines")
    # the same release and package string, as QMP, a --version line or libvirt's cache says them: one answer
    package = "Debian 1:8.2.2+ds-0ubuntu1.4"
    qmp = verify.qemu_facts(binary._replace(release=(8, 2, 2), package=package))
    line = build_from_version(f"QEMU emulator version 8.2.2 ({package})", "q --version")
    cache = QemuCaps("/q", (8, 2, 2), package, ()).host_facts("cache")
    assert {(f.qemu_version, f.qemu_build, f.package) for f in (qmp, line, cache)} == {((8, 2, 2), "ubuntu", package)}


def test_what_qemu_says_is_compared_with_what_the_tool_computes(fake, host):
    # the lab host's /dev/kvm, recorded
    host = assemble(verify.sources(verify.VerifyOptions(), launch.probe(fake()), kvm=False))._replace(cpuid=host.cpuid)
    # A faithful QEMU: no disagreement. A property QEMU does not have counts as off.
    good = launch.read_vcpu(fake(props={"pc-i440fx-7.2/-": {**TRUE_7_2, "kvm-msi-ext-dest-id": None}}),
                            "pc-i440fx-7.2", named())
    assert good.qemu["kvm-msi-ext-dest-id"] == "absent" and good.qemu["l3-cache"] == "on"
    assert verify.disagreements(good, verify.tool_answer("pc-i440fx-7.2", named(), host)) == []
    # pc-i440fx-2.7 has l3-cache off (pc_compat_2_7): a QEMU that says on disagrees, and the line says why.
    bad = launch.read_vcpu(fake(props={"pc-i440fx-2.7/Skylake-Client": TRUE_7_2}), "pc-i440fx-2.7", named("intel"))
    found = verify.disagreements(bad, verify.tool_answer("pc-i440fx-2.7", named("intel"), host))
    assert [(d.prop, d.qemu, d.tool) for d in found] == [("l3-cache", "on", "off")]
    assert found[0].line().startswith("DISAGREE pc-i440fx-2.7 Skylake-Client l3-cache: QEMU on, tool off (")
    assert "pc_compat_2_7" in found[0].reason


def test_a_qemu_that_fails_or_hangs_is_reported_and_killed(fake):
    failed = launch.read_vcpu(fake(fail="failed to set MSR 0x10a"), "pc", named("host"))
    assert failed.qemu is None and failed.error == "qemu-system-x86_64: failed to set MSR 0x10a"
    t = time.monotonic()
    hung = launch.read_vcpu(fake(hang=True, timeout=1), "pc", named())
    assert hung.qemu is None and 0.9 < time.monotonic() - t < 5, hung
    assert not [p for p in os.listdir("/proc") if p.isdigit() and _cmdline(p).endswith("fake-qemu")]


def test_after_three_qemus_killed_no_more_are_started(fake):
    runner = fake(hang=True, timeout=0.5)
    assert launch.probe(runner).version == "7.2.9"  # `-machine none` answers; every machine type hangs
    t = time.monotonic()
    runs = [launch.read_vcpu(runner, "pc", named()) for _ in range(5)]
    assert runner.killed == 3 and time.monotonic() - t < 4
    assert [r.error for r in runs[3:]] == ["not tried: 3 QEMUs did not answer within 0.5 s"] * 2


def _cmdline(pid: str) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[1].decode()
    except (OSError, IndexError):
        return ""


def test_compat_props_are_checked_as_globals_on_the_newest_machine():
    host = HostFacts(aliases={"pc": "pc-i440fx-7.2", "q35": "pc-q35-7.2"}, qemu_build="upstream",
                     build_source="test")
    l3 = {"qom-type": "x86_64-cpu", "property": "l3-cache", "value": "off"}
    msi = {"qom-type": "x86_64-cpu", "property": "kvm-msi-ext-dest-id", "value": "off"}
    other = {"qom-type": "virtio-net-pci", "property": "x-mtu-bypass-backend", "value": "off"}
    machines = [{"name": "pc-i440fx-7.2", "alias": "pc", "compat-props": [other]},
                {"name": "pc-i440fx-2.7", "compat-props": [l3, msi, other]},
                {"name": "pc-q35-5.1", "compat-props": [msi]}, {"name": "pc-q35-7.2", "alias": "q35"}]
    cases = verify.compat_cases(machines)
    assert [(m, b, len(p)) for m, b, p in cases] == [("pc-i440fx-2.7", "pc-i440fx-7.2", 2),
                                                     ("pc-i440fx-7.2", "pc-i440fx-7.2", 0),
                                                     ("pc-q35-5.1", "pc-q35-7.2", 1), ("pc-q35-7.2", "pc-q35-7.2", 0)]
    assert not [d for c in cases for d in verify.compat_disagreements(c, named(), host)]
    # A QEMU whose pc-q35-5.1 does not turn kvm-msi-ext-dest-id off: visible under the split irqchip only.
    found = verify.compat_disagreements(("pc-q35-5.1", "pc-q35-7.2", ()), named(), host)
    assert [(d.prop, d.qemu, d.tool, d.check) for d in found] == [("kvm-msi-ext-dest-id", "on", "off", "compat-props")]
    assert "ioapic=qemu" in found[0].model


def test_cpu_modes_and_version_line():
    assert [m.label for m in verify.cpu_modes(frozenset({"Haswell", "Opteron_G3", "qemu64"}))] == [
        "default-cpu", "Haswell", "Opteron_G3", "host", "max"]
    assert [m.key for m in verify.cpu_modes(frozenset(), ("default", "host"))] == ["default", "host"]
    from virtxml_cpu.core.hostfacts import parse_version_line

    assert parse_version_line("QEMU emulator version 7.2.22 (Debian 1:7.2+dfsg-7+deb12u18+b3)") == (
        (7, 2, 22), "Debian 1:7.2+dfsg-7+deb12u18+b3")
    assert parse_version_line("QEMU emulator version 10.0.2") == ((10, 0, 2), "")
    assert len(qemu.PROPERTIES) == 18


@pytest.mark.skipif(os.geteuid() != 0, reason="the record is root's: needs root")
def test_the_record_is_trusted_only_when_root_owned_and_well_formed(tmp_path, fake):
    tmp_path.chmod(0o755)
    record = tmp_path / "record.json"
    binary = launch.probe(fake())
    outcome = verify.VerifyResult(binary, assemble(verify.sources(verify.VerifyOptions(), binary, kvm=False)), launch.Identity("test"), [], [], [], [],
                             None, 0.0)
    assert verify_record.write_record(outcome, str(record)) == f"recorded in {record}"
    assert binary.key in verify_record.read_record(str(record))
    assert record.stat().st_mode & 0o777 == 0o644
    record.chmod(0o666)  # writable by anyone: ignored
    assert verify_record.read_record(str(record)) == {}
    record.chmod(0o644)
    link = tmp_path / "link.json"
    link.symlink_to(record)
    assert verify_record.read_record(str(link)) == {}
    for bad in (b"[]", b"{\"format\": 2, \"verified\": {}}", b"not json", b"{\"format\": 1, \"verified\": []}"):
        record.write_bytes(bad)
        assert verify_record.read_record(str(record)) == {}


def test_cli_verify_bad_emulator_and_the_note(tmp_path, monkeypatch, capsys):
    from virtxml_cpu import cli

    assert cli.main(["verify", "--emulator", str(tmp_path / "missing")]) == 2
    assert "not an executable file" in capsys.readouterr().err
    monkeypatch.setattr(verify_record, "local_binary", lambda: ("/usr/bin/qemu-system-x86_64", "9.9.9", "Test 1"))
    note = verify_record.unverified_note(str(tmp_path / "none.json"))
    assert note == ("note: the rules were never verified against /usr/bin/qemu-system-x86_64 (QEMU 9.9.9, Test 1) "
                    "on this host: run `virtxml-cpu verify` first")
    monkeypatch.setattr(verify_record, "local_binary", lambda: None)
    assert verify_record.unverified_note(str(tmp_path / "none.json")) is None


def test_hook_install_mentions_verify_for_an_unverified_build(tmp_path, monkeypatch, capsys):
    from virtxml_cpu import cli

    monkeypatch.setattr(verify_record, "local_binary", lambda: ("/opt/qemu/bin/qemu-system-x86_64", "9.9.9", "Test 1"))
    assert cli.main(["hook", "install", "--hooks-dir", str(tmp_path / "hooks"), "--qemu-d"]) == 0
    out = capsys.readouterr()
    assert out.out.startswith("installed ") and "run `virtxml-cpu verify`" not in out.out
    assert out.err == ("virtxml-cpu: note: the rules were never verified against /opt/qemu/bin/qemu-system-x86_64 "
                       "(QEMU 9.9.9, Test 1) on this host: run `virtxml-cpu verify` first\n")


def test_this_hosts_qemu_is_libvirts_emulator_not_the_first_on_path(tmp_path, monkeypatch, capsys):
    """`hook status`, the Cockpit page's "Last verify" and the unverified note name the QEMU libvirt runs
    (its capabilities cache says which), not whichever QEMU comes first on PATH."""
    from virtxml_cpu import cli
    from virtxml_cpu.host import caps_cache, local_qemu

    real = "/usr/bin/qemu-system-x86_64"
    if not os.access(real, os.X_OK):
        pytest.skip(f"SKIPPED LOUDLY: {real} is not installed; this test runs the real QEMU's --version")
    other = tmp_path / "bin" / "qemu-system-x86_64"
    other.parent.mkdir()
    other.write_text('#!/bin/sh\necho "QEMU emulator version 1.2.3 (Other 1)"\n')
    other.chmod(0o755)
    monkeypatch.setenv("PATH", f"{other.parent}{os.pathsep}{os.environ.get('PATH', '/usr/bin:/bin')}")
    cache = tmp_path / "caps"
    cache.mkdir()
    monkeypatch.setattr(caps_cache, "CACHE_DIR", str(cache))
    assert local_qemu.this_host() == str(other)  # libvirt named nothing: the first on PATH
    for emulator, arch in ((real, "x86_64"), ("/usr/bin/qemu-system-i386", "i686")):
        Path(caps_cache.cache_file(emulator, str(cache))).write_text(
            f"<qemuCaps>\n  <emulator>{emulator}</emulator>\n  <arch>{arch}</arch>\n</qemuCaps>\n")
    (cache / ("0" * 64 + ".xml")).write_text(f"<qemuCaps><emulator>{other}</emulator><arch>x86_64</arch></qemuCaps>")
    binary = verify_record.local_binary()
    assert binary is not None and binary[0] == real and binary[1] != "1.2.3"
    assert cli.main(["hook", "status", "--hooks-dir", str(tmp_path / "hooks"), "--format", "json"]) == 1
    assert json.loads(capsys.readouterr().out)["qemu"]["emulator"] == real
