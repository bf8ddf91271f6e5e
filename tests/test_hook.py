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


ENV = {"LC_ALL": "C", "PATH": "/usr/bin:/bin", "HOME": "/root"}  # what libvirt gives a hook


def _front(tmp_path, python=sys.executable, lib=None, config=None, mode="enforce", digest_dir=""):
    """The hook as `hook install` renders it, in tmp_path."""
    path = tmp_path / "virtxml-cpu"
    lib = hookinstall.lib_dirs() if lib is None else lib
    path.write_text(hookinstall.render(hookinstall.template(), python, hookinstall.PACKAGE_PARENT, mode, config, lib,
                                       digest_dir))
    path.chmod(0o755)
    return path


def _recorder(tmp_path):
    """An interpreter stand-in that records that it was started, then runs the real one."""
    marker = tmp_path / "started"
    rec = tmp_path / "python"
    rec.write_text(f"#!/bin/sh\necho \"$@\" >> {marker}\nexec {sys.executable} \"$@\"\n")
    rec.chmod(0o755)
    return str(rec), marker


@pytest.mark.parametrize("op", [("start", "begin"), ("started", "begin"), ("stopped", "end"),
                                ("release", "end"), ("reconnect", "begin"), ("attach", "begin"), ("unknown", "x"),
                                ("prepare", "end"), ("migrate", "end")])
def test_ignored_operations_start_no_interpreter(tmp_path, op):
    python, marker = _recorder(tmp_path)
    hook_path = _front(tmp_path, python)
    r = subprocess.run([str(hook_path), "vm", *op, "-"], input=NEEDS_FIX, capture_output=True, env=ENV, timeout=60)
    assert r.returncode == 0 and r.stdout == r.stderr == b""
    assert not marker.exists()


def test_handled_operations_run_the_isolated_interpreter(tmp_path):
    python, marker = _recorder(tmp_path)
    hook_path = _front(tmp_path, python, config=cfg(tmp_path, "enforce"))
    r = subprocess.run([str(hook_path), "scratch", "prepare", "begin", "-"], input=NEEDS_FIX, capture_output=True,
                       env=ENV, timeout=60)
    assert r.returncode == 1 and b"refusing to start 'scratch'" in r.stderr
    assert marker.read_text().startswith("-I -S -c ")


def test_the_source_tree_hook_runs_from_the_checkout(tmp_path):
    """hooks/qemu (the unrendered front) finds virtxml_cpu above itself, lxml through site."""
    r = subprocess.run(["/bin/sh", str(HOOK), "scratch", "prepare", "begin", "-"], input=NEEDS_FIX,
                       capture_output=True, env=ENV, timeout=60)
    assert r.returncode == 0 and b"decision=inject" in r.stderr, r.stderr


def test_a_missing_interpreter_fails_open(tmp_path):
    hook_path = _front(tmp_path, str(tmp_path / "gone" / "python3"))
    r = subprocess.run([str(hook_path), "scratch", "prepare", "begin", "-"], input=NEEDS_FIX, capture_output=True,
                       env=ENV, timeout=60)
    assert r.returncode == 0 and b"guest start not checked" in r.stderr


def test_no_environment_variable_steers_the_installed_hook(tmp_path):
    """A root hook must not depend on libvirt not passing PYTHONPATH or VIRTXML_CPU_CONFIG: a module
    planted on PYTHONPATH is never imported, a config named by VIRTXML_CPU_CONFIG never read."""
    planted = tmp_path / "planted"
    for mod in ("lxml", "virtxml_cpu"):
        (planted / mod).mkdir(parents=True)
        (planted / mod / "__init__.py").write_text(f"open({str(tmp_path / 'ran')!r}, 'a').write({mod!r})\n")
    (tmp_path / "env.toml").write_text('[hook]\nmode = "enforce"\n')
    hook_path = _front(tmp_path, mode="audit")  # no config named: the default path
    env = dict(ENV, PYTHONPATH=str(planted), VIRTXML_CPU_CONFIG=str(tmp_path / "env.toml"), PYTHONHOME=str(planted))
    r = subprocess.run([str(hook_path), "scratch", "prepare", "begin", "-"], input=NEEDS_FIX, capture_output=True,
                       env=env, timeout=60)
    assert not (tmp_path / "ran").exists()
    if not os.path.exists("/etc/virtxml-cpu/config.toml"):
        assert r.returncode == 0 and b"mode=audit" in r.stderr and b"decision=inject" in r.stderr, r.stderr


def test_hook_run_ignores_virtxml_cpu_config(tmp_path, monkeypatch):
    (tmp_path / "env.toml").write_text('[hook]\nmode = "enforce"\n')
    monkeypatch.setenv("VIRTXML_CPU_CONFIG", str(tmp_path / "env.toml"))
    log = Capture()
    rc = hook.run(["scratch", "prepare", "begin", "-"], mode="audit", stdin=io.BytesIO(NEEDS_FIX), log=log)
    if not os.path.exists("/etc/virtxml-cpu/config.toml"):
        assert rc == 0 and "mode=audit" in log.lines[0]


def test_install_uninstall_status_never_touch_foreign_hooks(tmp_path):
    hooks = tmp_path / "hooks"
    lines = hookinstall.install(str(hooks), "queue", None, legacy=False)
    path = hooks / "qemu.d" / "virtxml-cpu"
    text = path.read_text()
    settings = hookinstall.installed_settings(text)
    assert os.access(path, os.X_OK) and text.startswith("#!/bin/sh\n")
    assert settings["PYTHON"] == sys.executable and settings["MODE"] == "queue"
    assert hookinstall.MARKER in text and "SIGHUP" in lines[-1]
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
    hookinstall.install(str(hooks), "enforce", cfg(tmp_path, "enforce"), legacy=False, digest_dir=str(tmp_path / "d"))
    installed = hooks / "qemu.d" / "virtxml-cpu"
    r = subprocess.run([str(installed), "scratch", "prepare", "begin", "-"], input=NEEDS_FIX, capture_output=True,
                       env=ENV, timeout=60)
    assert r.returncode == 1 and b"refusing to start" in r.stderr
    r = subprocess.run([str(installed), "scratch", "started", "begin", "-"], input=NEEDS_FIX, capture_output=True,
                       env=ENV, timeout=60)
    assert r.returncode == 0 and r.stdout == r.stderr == b""


def _imports(tmp_path, lib, config=None, digest_dir="", xml=NEEDS_FIX, python=sys.executable):
    """Run the rendered front with an interpreter that reports its imports (-X importtime)."""
    wrap = tmp_path / "python-importtime"
    wrap.write_text(f"#!/bin/sh\nexec {python} -X importtime \"$@\"\n")
    wrap.chmod(0o755)
    path = _front(tmp_path, str(wrap), lib, config, digest_dir=digest_dir)
    r = subprocess.run([str(path), "scratch", "prepare", "begin", "-"], input=xml, capture_output=True, env=ENV,
                       timeout=60)
    modules = {line.rsplit("|", 1)[-1].strip() for line in r.stderr.decode().splitlines() if "|" in line}
    return r, modules


def test_prepare_path_imports_from_the_rendered_directories_without_site(tmp_path):
    r, modules = _imports(tmp_path, hookinstall.lib_dirs())
    assert r.returncode == 1 and b"refusing to start 'scratch'" in r.stderr  # the full evaluation ran
    lxml_alone = subprocess.run([sys.executable, "-I", "-S", "-X", "importtime", "-c",
                                 f"import sys; sys.path += {list(hookinstall.lib_dirs())!r}; import lxml.etree"],
                                capture_output=True, timeout=60).stderr.decode()
    ours = modules - {line.rsplit("|", 1)[-1].strip() for line in lxml_alone.splitlines() if "|" in line}
    assert "lxml.etree" in modules and not NOT_ON_PREPARE_PATH & ours, sorted(ours)
    if not os.path.exists("/etc/virtxml-cpu/config.toml"):  # no config file: no TOML parser either
        assert not TOML_READERS & modules


# What the prepare path itself never imports (beyond what lxml.etree imports on its own): each costs the cold start.
NOT_ON_PREPARE_PATH = {"site", "socket", "json", "pathlib", "typing", "threading", "enum", "inspect", "dataclasses",
                       "tomllib", "tomli", "toml", "hashlib", "weakref"}
TOML_READERS = {"tomllib", "tomli", "toml"}  # config.toml_reader's, by Python version
SYSTEM_PYTHON, SYSTEM_LIB = "/usr/bin/python3", "/usr/lib/python3/dist-packages"


def test_prepare_path_imports_nothing_beyond_lxml_under_debians_python(tmp_path):
    """Debian's python3-lxml imports neither typing nor enum nor inspect: under it, whatever the prepare path
    imports beyond lxml.etree is the project's own cost (the venv's newer lxml hides typing)."""
    if subprocess.run([SYSTEM_PYTHON, "-I", "-S", "-c", f"import sys; sys.path.append({SYSTEM_LIB!r}); import lxml.etree"],
                      capture_output=True).returncode != 0:
        pytest.skip(f"SKIPPED LOUDLY: {SYSTEM_PYTHON} has no lxml (apt-get install python3-lxml)")
    r, modules = _imports(tmp_path, (SYSTEM_LIB,), python=SYSTEM_PYTHON)
    assert r.returncode == 1 and b"refusing to start 'scratch'" in r.stderr  # the full evaluation ran
    lxml_alone = subprocess.run([SYSTEM_PYTHON, "-I", "-S", "-X", "importtime", "-c",
                                 f"import sys; sys.path.append({SYSTEM_LIB!r}); import lxml.etree"],
                                capture_output=True, timeout=60).stderr.decode()
    ours = modules - {line.rsplit("|", 1)[-1].strip() for line in lxml_alone.splitlines() if "|" in line}
    assert "lxml.etree" in modules and not NOT_ON_PREPARE_PATH & ours, sorted(ours)


def test_a_comments_only_config_costs_no_toml_parser(tmp_path):
    """The Debian package ships its config as comments only: the hook must not pay for tomllib there."""
    conf = tmp_path / "config.toml"
    conf.write_text((ROOT / "contrib" / "config.toml").read_text())
    r, modules = _imports(tmp_path, hookinstall.lib_dirs(), str(conf))
    assert r.returncode == 1 and b"refusing to start 'scratch'" in r.stderr
    assert not TOML_READERS & modules


def test_lxml_not_where_rendered_fails_open_without_site(tmp_path):
    """The rendered directories are all the hook imports from: no site, no .pth file run as root."""
    r, modules = _imports(tmp_path, (str(tmp_path / "gone"),), cfg(tmp_path, "enforce"))
    assert r.returncode == 0 and b"cannot load virtxml_cpu" in r.stderr and b"guest start not checked" in r.stderr
    assert "site" not in modules


def test_lib_dirs_name_where_lxml_is_unless_beside_the_package():
    import lxml

    where = os.path.dirname(os.path.dirname(os.path.realpath(lxml.__file__)))
    assert hookinstall.lib_dirs() == (() if where == os.path.realpath(hookinstall.PACKAGE_PARENT) else (where,))
    assert hookinstall.lib_dirs(where) == ()


def test_front_decides_without_the_cyclic_collector_and_freezes_before_exit(tmp_path):
    """The front runs main() with gc disabled and freezes what the process holds before exiting (the
    interpreter's last collections walking lxml and the rule tables were ~4 ms of a cold start)."""
    pkg = tmp_path / "pkg" / "virtxml_cpu"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "hookentry.py").write_text(
        "import atexit, gc, sys\n"
        "def main(argv):\n"
        "    sys.stdout.write(f'enabled={gc.isenabled()} argv={argv}\\n')\n"
        "    atexit.register(lambda: sys.stdout.write(f'frozen={gc.get_freeze_count() > 0}\\n'))\n"
        "    return 3\n")
    path = tmp_path / "virtxml-cpu"
    path.write_text(hookinstall.render(hookinstall.template(), sys.executable, str(tmp_path / "pkg"), "audit", None,
                                       (), ""))
    path.chmod(0o755)
    r = subprocess.run([str(path), "vm", "prepare", "begin", "-"], input=b"", capture_output=True, env=ENV,
                       timeout=60)
    assert r.returncode == 3, r.stderr
    assert r.stdout.decode().splitlines() == [
        "enabled=False argv=['audit', '', '', 'vm', 'prepare', 'begin', '-']", "frozen=True"]
