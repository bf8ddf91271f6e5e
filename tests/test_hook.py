"""The hook's logic and installer without libvirt: modes, fail-open, fast path, chain pass-through."""

from __future__ import annotations

import io
import json
import os
import socket
import subprocess
import sys

import pytest

from virtxml_cpu import hook, hookinstall

from .conftest import FIXTURES, ROOT, Capture

HOOK = ROOT / "hooks" / "qemu"
NEEDS_FIX = (FIXTURES / "handwritten-no-cpu.xml").read_bytes()
FINE = (FIXTURES / "pvspinlock-off.xml").read_bytes()


def cfg(tmp_path, mode, extra=""):
    p = tmp_path / "c.toml"
    p.write_text(f'[hook]\nmode = "{mode}"\nspool = "{tmp_path / "spool"}"\n{extra}')
    return str(p)


def run_hook(tmp_path, mode, xml, op="prepare", capsys=None):
    log = Capture()
    rc = hook.run(["scratch", op, "begin", "-"], config_path=cfg(tmp_path, mode), stdin=io.BytesIO(xml), log=log)
    return rc, log.lines


def test_audit_logs_one_line_and_allows(tmp_path):
    rc, lines = run_hook(tmp_path, "audit", NEEDS_FIX)
    assert rc == 0 and len(lines) == 1
    assert "decision=inject" in lines[0] and "domain=scratch" in lines[0] and "machine=" in lines[0]


def test_enforce_refuses_only_when_work_is_needed(tmp_path, capsys):
    rc, _ = run_hook(tmp_path, "enforce", NEEDS_FIX)
    err = capsys.readouterr().err
    assert rc == 1 and err.count("\n") == 1
    assert "lacks kvm-pv-unhalt" in err and "virtxml-cpu apply scratch" in err and "policy='never'" in err
    assert run_hook(tmp_path, "enforce", FINE)[0] == 0


def test_queue_writes_a_spool_entry(tmp_path):
    xml = NEEDS_FIX.replace(b"<name>scratch</name>", b"<name>scratch</name><uuid>0b7e2d1c-6a51-4f0e-8d7b-3c2f9e1a4b66</uuid>")
    rc, _ = run_hook(tmp_path, "queue", xml)
    entry = json.loads((tmp_path / "spool" / "0b7e2d1c-6a51-4f0e-8d7b-3c2f9e1a4b66.json").read_text())
    assert rc == 0 and entry["domain"] == "scratch" and entry["rule"] == "policy-compat" and entry["time"]


@pytest.mark.parametrize("op", ["migrate", "restore"])
def test_migrate_and_restore_print_nothing_and_say_cold_boot(tmp_path, capsys, op):
    rc, lines = run_hook(tmp_path, "enforce", NEEDS_FIX, op=op)
    assert rc == 0 and capsys.readouterr().out == ""
    assert "cold boot" in lines[0]


@pytest.mark.parametrize("stdin", [b"", b"\x00\xffgarbage", b"<domain", b"<network/>"])
def test_garbage_stdin_fails_open(tmp_path, stdin):
    rc, lines = run_hook(tmp_path, "enforce", stdin)
    assert rc == 0 and "guest not checked" in lines[0]


def test_broken_config_fails_open(tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text("mode = [")
    log = Capture()
    assert hook.run(["x", "prepare", "begin", "-"], config_path=str(bad), stdin=io.BytesIO(NEEDS_FIX), log=log) == 0
    assert "config unusable" in log.lines[0]


def test_syslog_socket_receives_the_line(tmp_path):
    sock_path = tmp_path / "log.sock"
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as s:
        s.bind(str(sock_path))
        s.settimeout(2)
        hook.run(["scratch", "prepare", "begin", "-"], stdin=io.BytesIO(NEEDS_FIX),
                 config_path=cfg(tmp_path, "audit", f'syslog_socket = "{sock_path}"\n'))
        msg = s.recv(65536).decode()
    assert msg.startswith("<14>virtxml-cpu[") and "decision=inject" in msg


def _script(*args, stdin=b""):
    return subprocess.run([sys.executable, "-S", "-X", "importtime", str(HOOK), *args], input=stdin,
                          capture_output=True, timeout=60)


@pytest.mark.parametrize("op", [("start", "begin"), ("started", "begin"), ("stopped", "end"),
                                ("release", "end"), ("reconnect", "begin"), ("attach", "begin"), ("unknown", "x")])
def test_fast_path_exits_0_prints_nothing_imports_nothing(op):
    r = _script("vm", *op, "-", stdin=NEEDS_FIX)
    assert r.returncode == 0 and r.stdout == b""
    imported = r.stderr.decode()
    modules = [line.rsplit("|", 1)[-1].strip() for line in imported.splitlines() if "|" in line]
    assert modules and not {"site", "lxml", "virtxml_cpu", "json", "socket"} & set(modules), modules


def test_install_uninstall_status_never_touch_foreign_hooks(tmp_path):
    hooks = tmp_path / "hooks"
    lines = hookinstall.install(str(hooks), "queue", None, legacy=False)
    path = hooks / "qemu.d" / "virtxml-cpu"
    text = path.read_text()
    assert os.access(path, os.X_OK) and text.startswith(f"#!{sys.executable} -S\n")
    assert "MODE = 'queue'" in text and hookinstall.MARKER in text and "SIGHUP" in lines[-1]
    installed, status = hookinstall.status(str(hooks))
    assert installed and any("mode queue" in s for s in status)
    # legacy location: refuses to overwrite someone else's script, explains how to chain
    (hooks / "qemu").write_text("#!/bin/sh\necho theirs\n")
    with pytest.raises(Exception, match="not written by virtxml-cpu"):
        hookinstall.install(str(hooks), None, None, legacy=True)
    assert (hooks / "qemu").read_text() == "#!/bin/sh\necho theirs\n"
    hookinstall.uninstall(str(hooks))
    assert not path.exists() and (hooks / "qemu").exists()


def test_installed_copy_runs_standalone(tmp_path):
    hooks = tmp_path / "hooks"
    hookinstall.install(str(hooks), "enforce", cfg(tmp_path, "enforce"), legacy=False)
    installed = hooks / "qemu.d" / "virtxml-cpu"
    env = {"LC_ALL": "C", "PATH": "/usr/bin:/bin", "HOME": "/root"}  # what libvirt gives a hook
    r = subprocess.run([str(installed), "scratch", "prepare", "begin", "-"], input=NEEDS_FIX, capture_output=True,
                       env=env, timeout=60)
    assert r.returncode == 1 and b"refusing to start" in r.stderr
    r = subprocess.run([str(installed), "scratch", "started", "begin", "-"], input=NEEDS_FIX, capture_output=True,
                       env=env, timeout=60)
    assert r.returncode == 0 and r.stdout == r.stderr == b""


def _rendered(tmp_path, lib, config=None):
    path = tmp_path / "virtxml-cpu"
    path.write_text(hookinstall.render(hookinstall.template(), sys.executable, hookinstall.PACKAGE_PARENT,
                                       "enforce", config, lib))
    env = {"LC_ALL": "C", "PATH": "/usr/bin:/bin", "HOME": "/root"}
    r = subprocess.run([sys.executable, "-S", "-X", "importtime", str(path), "scratch", "prepare", "begin", "-"],
                       input=NEEDS_FIX, capture_output=True, env=env, timeout=60)
    modules = {line.rsplit("|", 1)[-1].strip() for line in r.stderr.decode().splitlines() if "|" in line}
    return r, modules


def test_prepare_path_imports_from_the_rendered_directories_without_site(tmp_path):
    r, modules = _rendered(tmp_path, hookinstall.lib_dirs())
    assert r.returncode == 1 and b"refusing to start 'scratch'" in r.stderr  # the full evaluation ran
    assert "lxml.etree" in modules and not {"site", "socket", "json", "pathlib"} & modules, sorted(modules)
    if not os.path.exists("/etc/virtxml-cpu/config.toml"):  # no config file: no TOML parser either
        assert "tomllib" not in modules


def test_a_comments_only_config_costs_no_toml_parser(tmp_path):
    """The Debian package ships its config as comments only: the hook must not pay for tomllib there."""
    conf = tmp_path / "config.toml"
    conf.write_text((ROOT / "contrib" / "config.toml").read_text())
    r, modules = _rendered(tmp_path, hookinstall.lib_dirs(), str(conf))
    assert r.returncode == 1 and b"refusing to start 'scratch'" in r.stderr
    assert "tomllib" not in modules


def test_prepare_path_falls_back_to_site_when_lxml_is_not_where_rendered(tmp_path):
    r, modules = _rendered(tmp_path, (str(tmp_path / "gone"),), cfg(tmp_path, "enforce"))
    assert r.returncode == 1 and b"refusing to start 'scratch'" in r.stderr
    assert {"site", "tomllib"} <= modules


def test_lib_dirs_name_where_lxml_is_unless_beside_the_package():
    import lxml

    where = os.path.dirname(os.path.dirname(os.path.realpath(lxml.__file__)))
    assert hookinstall.lib_dirs() == (() if where == os.path.realpath(hookinstall.PACKAGE_PARENT) else (where,))
    assert hookinstall.lib_dirs(where) == ()
