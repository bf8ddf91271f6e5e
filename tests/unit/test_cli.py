"""The command as a user runs it: exit codes, one-line errors, files never damaged."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest

from tests.support import FIXTURES, ROOT

HOSTILE = {
    "xxe.xml": b'<?xml version="1.0"?><!DOCTYPE d [<!ENTITY x SYSTEM "file:///etc/passwd">]>'
               b"<domain type='kvm'><name>&x;</name></domain>",
    "billion-laughs.xml": b'<?xml version="1.0"?><!DOCTYPE lolz [<!ENTITY lol "lol">'
                          b'<!ENTITY lol2 "&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;">'
                          b'<!ENTITY lol3 "&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;">]>'
                          b"<domain><name>&lol3;</name></domain>",
    "not-xml.xml": b"this is not xml at all {\n",
    "truncated.xml": b"<domain type='kvm'><name>x</name><os><type>hvm</type>",
    "not-domain.xml": b"<network><name>default</name></network>",
    "latin1.xml": "<domain type='kvm'><name>caf\u00e9</name></domain>".encode("latin-1"),
    "empty.xml": b"",
    "blank.xml": b"  \n\n",
}


def run(*args, stdin=None):
    return subprocess.run([sys.executable, "-m", "virtxml_cpu", *args], input=stdin, capture_output=True,
                          cwd=ROOT, timeout=60)


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_hostile_input_exit_2_one_line_and_file_untouched(tmp_path, name):
    path = tmp_path / name
    path.write_bytes(HOSTILE[name])
    before = os.stat(path)
    for args in (["rewrite", "--in-place", str(path)], ["explain", str(path)], ["rewrite", str(path)]):
        r = run(*args, "--no-host-probe")
        assert r.returncode == 2, (args, r.stderr)
        err = r.stderr.decode()
        assert err.count("\n") == 1 and err.startswith("virtxml-cpu: "), err
        assert "root:" not in err and "lollol" not in err  # no entity was expanded
        assert r.stdout == b""
    assert path.read_bytes() == HOSTILE[name]
    assert os.stat(path).st_mtime_ns == before.st_mtime_ns
    assert sorted(p.name for p in tmp_path.iterdir()) == [name]  # no temp files left


def test_in_place_rewrites_atomically_keeps_mode_and_backup(tmp_path):
    src = tmp_path / "vm.xml"
    shutil.copy(FIXTURES / "handwritten-no-cpu.xml", src)
    os.chmod(src, 0o640)
    original = src.read_bytes()
    r = run("rewrite", "--in-place", "--backup", ".orig", "--no-host-probe", str(src))
    assert r.returncode == 0, r.stderr
    assert b"<pvspinlock state='on'/>" in src.read_bytes()
    assert (tmp_path / "vm.xml.orig").read_bytes() == original
    assert os.stat(src).st_mode & 0o777 == 0o640
    assert sorted(p.name for p in tmp_path.iterdir()) == ["vm.xml", "vm.xml.orig"]


def test_in_place_leaves_unchanged_file_alone(tmp_path):
    src = tmp_path / "vm.xml"
    shutil.copy(FIXTURES / "pvspinlock-off.xml", src)
    os.utime(src, ns=(1_000_000_000, 1_000_000_000))
    r = run("rewrite", "--in-place", "--no-host-probe", str(src))
    assert r.returncode == 0
    assert src.read_bytes() == (FIXTURES / "pvspinlock-off.xml").read_bytes()
    assert os.stat(src).st_mtime_ns == 1_000_000_000


def test_check_exit_codes_and_multiple_files():
    work = FIXTURES / "handwritten-no-cpu.xml"
    fine = FIXTURES / "pvspinlock-off.xml"
    assert run("rewrite", "--check", "--no-host-probe", str(fine)).returncode == 0
    r = run("rewrite", "--check", "--no-host-probe", str(fine), str(work))
    assert r.returncode == 1 and b"would add kvm-pv-unhalt" in r.stdout


def test_stdin_stdout_and_output_file(tmp_path):
    data = (FIXTURES / "handwritten-no-cpu.xml").read_bytes()
    r = run("rewrite", "--no-host-probe", "-", stdin=data)
    assert r.returncode == 0 and b"<pvspinlock state='on'/>" in r.stdout
    out = tmp_path / "out.xml"
    r = run("rewrite", "--no-host-probe", "-o", str(out), str(FIXTURES / "handwritten-no-cpu.xml"))
    assert r.returncode == 0 and out.read_bytes() == run("rewrite", "--no-host-probe", "-", stdin=data).stdout


def test_explain_json_one_object_per_file():
    r = run("explain", "--format", "json", "--no-host-probe", "--qemu-build", "upstream",
            str(FIXTURES / "handwritten-no-cpu.xml"), str(FIXTURES / "windows-hyperv.xml"))
    assert r.returncode == 0
    docs = [json.loads(line) for line in r.stdout.decode().splitlines()]
    assert [d["domain"] for d in docs] == ["scratch", "win11"]
    for d in docs:
        assert {"file", "domain", "machine", "cpu_mode", "features", "decision"} <= d.keys()
        assert d["features"]["kvm-pv-unhalt"]["state"] == "off"
        assert d["decision"]["action"] == "inject"


def test_diff_shows_only_the_addition():
    r = run("rewrite", "--diff", "--no-host-probe", str(ROOT / "examples" / "fedora-host-model.xml"))
    plus = [line for line in r.stdout.decode().splitlines() if line.startswith("+") and not line.startswith("+++")]
    minus = [line for line in r.stdout.decode().splitlines() if line.startswith("-") and not line.startswith("---")]
    assert plus == ["+    <pvspinlock state='on'/>"] and minus == []


def test_usage_errors_exit_2():
    assert run("rewrite", "--backup", ".b", str(FIXTURES / "pvspinlock-off.xml")).returncode == 2
    assert run("frobnicate").returncode == 2
    r = run("explain", "--no-host-probe", "/nonexistent/file.xml")
    assert r.returncode == 2 and r.stderr.decode().count("\n") == 1


def test_bad_config_exit_2(tmp_path):
    cfg = tmp_path / "c.toml"
    cfg.write_text('policy = "sometimes"\n')
    r = run("explain", "--config", str(cfg), "--no-host-probe", str(FIXTURES / "pvspinlock-off.xml"))
    assert r.returncode == 2 and b"policy" in r.stderr


def test_config_policy_applies(tmp_path):
    cfg = tmp_path / "c.toml"
    cfg.write_text('policy = "always"\n')
    r = run("rewrite", "--check", "--config", str(cfg), "--no-host-probe", str(ROOT / "examples" / "pinned-old-machine.xml"))
    assert r.returncode == 1


def test_unreachable_libvirt_exit_3():
    r = run("explain", "--connect", "qemu+tcp://127.0.0.1:1/system", "--no-host-probe",
            str(FIXTURES / "pvspinlock-off.xml"))
    assert r.returncode == 3, r.stderr
    assert r.stderr.decode().count("\n") == 1


def test_cpu_feature_style_warns():
    r = run("rewrite", "--style", "cpu-feature", "--no-host-probe", str(FIXTURES / "handwritten-no-cpu.xml"))
    assert r.returncode == 0
    assert b"<feature policy='require' name='kvm_pv_unhalt'/>" in r.stdout
    assert b"unknown CPU feature" in r.stderr


def test_the_older_build_names_are_gone(capsys):
    """No "flavour" alias, none ever released: explain's JSON says qemu_build/qemu_build_basis only, and
    --qemu-flavour is refused as any unknown option is (exit 2); --help shows only --qemu-build."""
    from virtxml_cpu.cli import main
    fixture = str(FIXTURES / "openstack-nova-jammy-q35.xml")
    with pytest.raises(SystemExit) as refused:
        main(["explain", "--no-host-probe", "--format", "json", "--qemu-flavour", "rhel", fixture])
    assert refused.value.code == 2 and "--qemu-flavour" in capsys.readouterr().err
    assert main(["explain", "--no-host-probe", "--format", "json", "--qemu-build", "rhel", fixture]) == 0
    new = json.loads(capsys.readouterr().out)
    assert new["qemu_build"] == "ubuntu" and new["qemu_build_basis"].startswith("ubuntu: machine")
    assert not {"qemu_flavour", "qemu_flavour_basis"} & new.keys()  # the JSON says "build" only
    with pytest.raises(SystemExit):
        main(["explain", "--help"])
    shown = capsys.readouterr().out
    assert "--qemu-build" in shown and "--qemu-flavour" not in shown
