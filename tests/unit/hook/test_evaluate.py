"""The hook's logic and installer without libvirt: modes, fail-open, fast path, chain pass-through."""

from __future__ import annotations

import io
import json
import os
import socket
import subprocess
import sys

import pytest

from virtxml_cpu.hook import evaluate, act, install
from virtxml_cpu.hook import status as hook_status

from tests.support import FIXTURES, ROOT, Capture

HOOK = ROOT / "hooks" / "qemu"
NEEDS_FIX = (FIXTURES / "handwritten-no-cpu.xml").read_bytes()
FINE = (FIXTURES / "pvspinlock-off.xml").read_bytes()


NOT_LOOKING = 'libvirt_config_dir = ""\n'  # names here are no libvirt domain's: no transient check


def cfg(tmp_path, mode, extra=""):
    p = tmp_path / "c.toml"
    p.write_text(f'[hook]\nmode = "{mode}"\nspool = "{tmp_path / "spool"}"\n{NOT_LOOKING}{extra}')
    return str(p)


def run_hook(tmp_path, mode, xml, op="prepare", capsys=None):
    log = Capture()
    rc = evaluate.run(["scratch", op, "begin", "-"], config_path=cfg(tmp_path, mode), stdin=io.BytesIO(xml), log=log)
    return rc, log.lines


def test_audit_logs_one_line_and_allows(tmp_path):
    rc, lines = run_hook(tmp_path, "audit", NEEDS_FIX)
    assert rc == 0 and len(lines) == 1
    assert "decision=inject" in lines[0] and "domain=scratch" in lines[0] and "machine=" in lines[0]


def test_enforce_refuses_only_when_work_is_needed(tmp_path, capsys):
    rc, _ = run_hook(tmp_path, "enforce", NEEDS_FIX)
    err = capsys.readouterr().err
    assert rc == 1 and err.count("\n") == 1
    assert "lacks kvm-pv-unhalt" in err and "virtxml-cpu apply --yes -- scratch" in err and "policy='never'" in err
    assert run_hook(tmp_path, "enforce", FINE)[0] == 0


def test_queue_writes_a_spool_entry(tmp_path):
    xml = NEEDS_FIX.replace(b"<name>scratch</name>", b"<name>scratch</name><uuid>0b7e2d1c-6a51-4f0e-8d7b-3c2f9e1a4b66</uuid>")
    rc, _ = run_hook(tmp_path, "queue", xml)
    entry = json.loads((tmp_path / "spool" / "0b7e2d1c-6a51-4f0e-8d7b-3c2f9e1a4b66.json").read_text())
    assert rc == 0 and entry["domain"] == "scratch" and entry["rule"] == "policy-compat" and entry["time"]


UUID = "0b7e2d1c-6a51-4f0e-8d7b-3c2f9e1a4b66"
WITH_UUID = NEEDS_FIX.replace(b"<name>scratch</name>", f"<name>scratch</name><uuid>{UUID}</uuid>".encode())


@pytest.mark.parametrize("mode", ["enforce", "queue", "audit"])
@pytest.mark.parametrize("op", ["migrate", "restore"])
def test_the_prepare_after_restore_or_migrate_is_not_a_cold_start(tmp_path, capsys, op, mode):
    """libvirt runs `prepare begin` after `restore begin` (restore, managed save) and after `migrate begin`
    (incoming migration) with nothing that tells it from a cold start's: that prepare neither refuses nor
    queues, and its one line says the guest needs a cold boot; the next cold start is a cold start again."""
    rc, lines = run_hook(tmp_path, mode, WITH_UUID, op=op)
    assert rc == 0 and lines == [] and capsys.readouterr().out == ""
    rc, lines = run_hook(tmp_path, mode, WITH_UUID)
    assert rc == 0 and capsys.readouterr() == ("", "")
    assert len(lines) == 1 and f"op=prepare after={op} " in lines[0] and "decision=cold-boot" in lines[0]
    assert lines[0].endswith(act.COLD_BOOT) and "decision=inject" not in lines[0]
    assert not (tmp_path / "spool").exists() or not list((tmp_path / "spool").glob("*.json"))
    rc, lines = run_hook(tmp_path, mode, WITH_UUID)  # the mark counted once
    assert rc == (1 if mode == "enforce" else 0) and "decision=inject" in lines[-1] and "after=" not in lines[-1]
    assert (mode == "queue") == (tmp_path / "spool" / f"{UUID}.json").exists()


def test_a_restore_of_a_guest_that_needs_nothing_logs_no_cold_boot(tmp_path):
    fine = FINE.replace(b"<name>old-kernel-guest</name>", f"<name>scratch</name><uuid>{UUID}</uuid>".encode(), 1)
    assert run_hook(tmp_path, "enforce", fine, op="restore") == (0, [])
    rc, lines = run_hook(tmp_path, "enforce", fine)
    assert rc == 0 and "after=restore" in lines[0] and "decision=keep" in lines[0] and "cold boot" not in lines[0]


def test_another_domains_restore_does_not_let_a_cold_start_in(tmp_path):
    other = WITH_UUID.replace(UUID.encode(), b"11111111-2222-3333-4444-555555555555")
    assert run_hook(tmp_path, "enforce", other, op="restore")[0] == 0
    assert run_hook(tmp_path, "enforce", WITH_UUID)[0] == 1


@pytest.mark.parametrize("op", ["migrate", "restore"])
def test_a_restore_that_cannot_be_marked_says_so(tmp_path, op):
    (tmp_path / "incoming").symlink_to(tmp_path)  # the marks' directory, beside the spool, is a link
    rc, lines = run_hook(tmp_path, "enforce", WITH_UUID, op=op)
    assert rc == 0 and len(lines) == 1 and "result=\"not marked\"" in lines[0] and "symbolic link" in lines[0]


@pytest.mark.parametrize("stdin", [b"", b"\x00\xffgarbage", b"<domain", b"<network/>"])
def test_garbage_stdin_fails_open(tmp_path, stdin):
    rc, lines = run_hook(tmp_path, "enforce", stdin)
    assert rc == 0 and "guest not checked" in lines[0]


def test_broken_config_fails_open(tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text("mode = [")
    log = Capture()
    assert evaluate.run(["x", "prepare", "begin", "-"], config_path=str(bad), stdin=io.BytesIO(NEEDS_FIX), log=log) == 0
    assert "config unusable" in log.lines[0]


def test_syslog_socket_receives_the_line(tmp_path):
    sock_path = tmp_path / "log.sock"
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as s:
        s.bind(str(sock_path))
        s.settimeout(2)
        evaluate.run(["scratch", "prepare", "begin", "-"], stdin=io.BytesIO(NEEDS_FIX),
                 config_path=cfg(tmp_path, "audit", f'syslog_socket = "{sock_path}"\n'))
        msg = s.recv(65536).decode()
    assert msg.startswith("<14>virtxml-cpu[") and "decision=inject" in msg


ENV = {"LC_ALL": "C", "PATH": "/usr/bin:/bin", "HOME": "/root"}  # what libvirt gives a hook


def _front(tmp_path, python=sys.executable, lib=None, config=None, mode="enforce", digest_dir=""):
    """The hook as `hook install` renders it, in tmp_path."""
    path = tmp_path / "virtxml-cpu"
    lib = install.lib_dirs() if lib is None else lib
    path.write_text(install.render(install.template(), python, install.PACKAGE_PARENT, mode, config, lib,
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


def test_the_unrendered_front_imports_nothing_and_runs_no_site(tmp_path):
    """hooks/qemu in a checkout (PACKAGE_DIR=''): it used to import the virtxml_cpu found above its own path
    and run site, as root; whoever put a tree above the script ran code there. Now it imports nothing."""
    tree = tmp_path / "above"
    (tree / "virtxml_cpu").mkdir(parents=True)
    (tree / "virtxml_cpu" / "__init__.py").write_text(f"open({str(tmp_path / 'ran')!r}, 'a').write('package')\n")
    (tree / "sitecustomize.py").write_text(f"open({str(tmp_path / 'ran')!r}, 'a').write('site')\n")
    (tree / "hooks").mkdir()
    front = tree / "hooks" / "qemu"
    front.write_text(install.template())
    front.chmod(0o755)
    r = subprocess.run(["/bin/sh", str(front), "scratch", "prepare", "begin", "-"], input=NEEDS_FIX,
                       capture_output=True, env=ENV, timeout=60)
    assert not (tmp_path / "ran").exists()
    assert r.returncode == 0 and b"not rendered" in r.stderr and b"guest start not checked" in r.stderr, r.stderr
    assert HOOK.resolve() == (ROOT / "virtxml_cpu" / "hook" / "qemu-hook").resolve()  # hooks/qemu is this front


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root: the front checks ownership as root only")
@pytest.mark.parametrize("where", ["module", "directory", "link"])
def test_the_front_refuses_a_package_tree_root_does_not_own(tmp_path, where):
    """As root, the front imports from PACKAGE_DIR only when root alone can change what is there: another
    user's module, a directory others can write, or a link to another user's directory is refused (one
    line, exit 0, the guest starts unchecked), whatever `hook install` saw when it rendered the script."""
    import shutil

    parent = tmp_path / "pkg"
    parent.mkdir()
    tmp_path.chmod(0o755)
    shutil.copytree(ROOT / "virtxml_cpu", parent / "virtxml_cpu", ignore=shutil.ignore_patterns("__pycache__"))
    (parent / "virtxml_cpu" / "hook" / "entry.py").write_text(
        (ROOT / "virtxml_cpu" / "hook" / "entry.py").read_text()
        + f"\nopen({str(tmp_path / 'ran')!r}, 'a').write('imported')\n")
    front = tmp_path / "virtxml-cpu"
    front.write_text(install.render(install.template(), sys.executable, str(parent), "audit",
                                        cfg(tmp_path, "audit"), install.lib_dirs(), ""))
    front.chmod(0o755)
    r = subprocess.run([str(front), "scratch", "prepare", "begin", "-"], input=NEEDS_FIX, capture_output=True,
                       env=ENV, timeout=60)
    assert r.returncode == 0 and b"decision=" in r.stderr and (tmp_path / "ran").exists(), r.stderr  # root's: used
    (tmp_path / "ran").unlink()
    if where == "module":
        os.chown(parent / "virtxml_cpu" / "core" / "resolve.py", 65534, 65534)
    elif where == "directory":
        (parent / "virtxml_cpu" / "tables" / "builds").chmod(0o777)
    else:
        elsewhere = tmp_path / "elsewhere"
        shutil.move(str(parent / "virtxml_cpu" / "tables" / "builds"), str(elsewhere))
        os.chown(elsewhere, 65534, 65534)
        (parent / "virtxml_cpu" / "tables" / "builds").symlink_to(elsewhere)
    r = subprocess.run([str(front), "scratch", "prepare", "begin", "-"], input=NEEDS_FIX, capture_output=True,
                       env=ENV, timeout=60)
    assert not (tmp_path / "ran").exists()
    assert r.returncode == 0 and b"not root's alone" in r.stderr and b"guest start not checked" in r.stderr, r.stderr


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
    rc = evaluate.run(["scratch", "prepare", "begin", "-"], mode="audit", stdin=io.BytesIO(NEEDS_FIX), log=log)
    if not os.path.exists("/etc/virtxml-cpu/config.toml"):
        assert rc == 0 and "mode=audit" in log.lines[0]


def test_install_uninstall_status_never_touch_foreign_hooks(tmp_path):
    hooks = tmp_path / "hooks"
    lines = install.install(str(hooks), "queue", None, legacy=False)
    path = hooks / "qemu.d" / "virtxml-cpu"
    text = path.read_text()
    settings = install.installed_settings(text)
    assert os.access(path, os.X_OK) and text.startswith("#!/bin/sh\n")
    assert settings["PYTHON"] == sys.executable and settings["MODE"] == "queue"
    assert install.MARKER in text and ("virtqemud" in lines[-1] or "libvirtd" in lines[-1])
    installed, status = hook_status.status(str(hooks))
    assert installed and any("mode queue" in s for s in status)
    # legacy location: refuses to overwrite someone else's script, explains how to chain
    (hooks / "qemu").write_text("#!/bin/sh\necho theirs\n")
    with pytest.raises(Exception, match="not written by virtxml-cpu"):
        install.install(str(hooks), None, None, legacy=True)
    assert (hooks / "qemu").read_text() == "#!/bin/sh\necho theirs\n"
    install.uninstall(str(hooks))
    assert not path.exists() and (hooks / "qemu").exists()


def test_installed_copy_runs_standalone(tmp_path):
    hooks = tmp_path / "hooks"
    install.install(str(hooks), "enforce", cfg(tmp_path, "enforce"), legacy=False, digest_dir=str(tmp_path / "d"))
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


def _evaluated(r, modules) -> bool:
    """The full evaluation ran and ended as enforce does for this guest: refused, or (where this host's
    libvirt keeps no definition named `scratch`, with the default config) let in as transient."""
    refused = r.returncode == 1 and b"refusing to start 'scratch'" in r.stderr
    transient = r.returncode == 0 and os.path.isdir("/etc/libvirt/qemu") and "virtxml_cpu.hook.persistent" in modules
    return "virtxml_cpu.core.decision" in modules and (refused or transient)


def test_prepare_path_imports_from_the_rendered_directories_without_site(tmp_path):
    r, modules = _imports(tmp_path, install.lib_dirs())
    assert _evaluated(r, modules)
    lxml_alone = subprocess.run([sys.executable, "-I", "-S", "-X", "importtime", "-c",
                                 f"import sys; sys.path += {list(install.lib_dirs())!r}; import lxml.etree"],
                                capture_output=True, timeout=60).stderr.decode()
    ours = modules - {line.rsplit("|", 1)[-1].strip() for line in lxml_alone.splitlines() if "|" in line}
    assert "lxml.etree" in modules and not NOT_ON_PREPARE_PATH & ours, sorted(ours)
    if not os.path.exists("/etc/virtxml-cpu/config.toml"):  # no config file: no TOML parser either
        assert not TOML_READERS & modules


# What the prepare path itself never imports (beyond what lxml.etree imports on its own): each costs the cold start.
NOT_ON_PREPARE_PATH = {"site", "socket", "json", "pathlib", "typing", "threading", "enum", "inspect", "dataclasses",
                       "tomllib", "tomli", "toml", "hashlib", "weakref"}
TOML_READERS = {"tomllib", "tomli", "toml"}  # toml_read.toml_reader's, by Python version
SYSTEM_PYTHON, SYSTEM_LIB = "/usr/bin/python3", "/usr/lib/python3/dist-packages"


def test_prepare_path_imports_nothing_beyond_lxml_under_debians_python(tmp_path):
    """Debian's python3-lxml imports neither typing nor enum nor inspect: under it, whatever the prepare path
    imports beyond lxml.etree is the project's own cost (the venv's newer lxml hides typing)."""
    if subprocess.run([SYSTEM_PYTHON, "-I", "-S", "-c", f"import sys; sys.path.append({SYSTEM_LIB!r}); import lxml.etree"],
                      capture_output=True).returncode != 0:
        pytest.skip(f"SKIPPED LOUDLY: {SYSTEM_PYTHON} has no lxml (apt-get install python3-lxml)")
    r, modules = _imports(tmp_path, (SYSTEM_LIB,), python=SYSTEM_PYTHON)
    assert _evaluated(r, modules)
    lxml_alone = subprocess.run([SYSTEM_PYTHON, "-I", "-S", "-X", "importtime", "-c",
                                 f"import sys; sys.path.append({SYSTEM_LIB!r}); import lxml.etree"],
                                capture_output=True, timeout=60).stderr.decode()
    ours = modules - {line.rsplit("|", 1)[-1].strip() for line in lxml_alone.splitlines() if "|" in line}
    assert "lxml.etree" in modules and not NOT_ON_PREPARE_PATH & ours, sorted(ours)


def test_a_comments_only_config_costs_no_toml_parser(tmp_path):
    """The Debian package ships its config as comments only: the hook must not pay for tomllib there."""
    conf = tmp_path / "config.toml"
    conf.write_text((ROOT / "contrib" / "config.toml").read_text())
    r, modules = _imports(tmp_path, install.lib_dirs(), str(conf))
    assert _evaluated(r, modules)
    assert not TOML_READERS & modules


def test_lxml_not_where_rendered_fails_open_without_site(tmp_path):
    """The rendered directories are all the hook imports from: no site, no .pth file run as root."""
    r, modules = _imports(tmp_path, (str(tmp_path / "gone"),), cfg(tmp_path, "enforce"))
    assert r.returncode == 0 and b"cannot load virtxml_cpu" in r.stderr and b"guest start not checked" in r.stderr
    assert "site" not in modules


def test_lib_dirs_name_where_lxml_is_unless_beside_the_package():
    import lxml

    where = os.path.dirname(os.path.dirname(os.path.realpath(lxml.__file__)))
    assert install.lib_dirs() == (() if where == os.path.realpath(install.PACKAGE_PARENT) else (where,))
    assert install.lib_dirs(where) == ()


def test_front_decides_without_the_cyclic_collector_and_freezes_before_exit(tmp_path):
    """The front runs main() with gc disabled and freezes what the process holds before exiting (the
    interpreter's last collections walking lxml and the rule tables were ~4 ms of a cold start)."""
    pkg = tmp_path / "pkg" / "virtxml_cpu"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "hook").mkdir()
    (pkg / "hook" / "__init__.py").write_text("")
    (pkg / "fs").mkdir()
    for rel in ("hook/import_guard.py", "fs/__init__.py", "fs/trusted.py"):  # the guard and what it imports
        (pkg / rel).write_text((ROOT / "virtxml_cpu" / rel).read_text())
    (pkg / "hook" / "entry.py").write_text(
        "import atexit, gc, sys\n"
        "def main(argv):\n"
        "    sys.stdout.write(f'enabled={gc.isenabled()} argv={argv}\\n')\n"
        "    atexit.register(lambda: sys.stdout.write(f'frozen={gc.get_freeze_count() > 0}\\n'))\n"
        "    return 3\n")
    path = tmp_path / "virtxml-cpu"
    path.write_text(install.render(install.template(), sys.executable, str(tmp_path / "pkg"), "audit", None,
                                       (), ""))
    path.chmod(0o755)
    r = subprocess.run([str(path), "vm", "prepare", "begin", "-"], input=b"", capture_output=True, env=ENV,
                       timeout=60)
    assert r.returncode == 3, r.stderr
    assert r.stdout.decode().splitlines() == [
        "enabled=False argv=['audit', '', '', 'vm', 'prepare', 'begin', '-']", "frozen=True"]


@pytest.mark.parametrize("name", ["web01;cd ~attacker;sh .p;#", "--all", "-y", "$(touch pwned)`touch pwned`'\"*",
                                  "a\x1b[2Jb\u202ec\x9b%s\\101 d\x7f", "ends in\x01"])
def test_the_refusals_fix_runs_as_shown_with_just_that_name(tmp_path, name):
    """The suggested command, pasted into a shell (sh -c), passes exactly this one name to `apply`, after
    `--`, and the CLI takes it as a domain; the line itself holds no control or bidi character."""
    from virtxml_cpu.cli import build_parser

    msg = act.enforce_message(name, "off from the machine type")
    assert msg.isprintable()
    command = msg.split(" Fix: ", 1)[1].rsplit(", then start it. Exempt:", 1)[0]
    stub = tmp_path / "bin" / "virtxml-cpu"
    stub.parent.mkdir()
    stub.write_text(f"#!/bin/sh\nexec {sys.executable} -c 'import json, sys; print(json.dumps(sys.argv[1:]))' "
                    '"$@"\n')
    stub.chmod(0o755)
    r = subprocess.run(["sh", "-c", command], capture_output=True, cwd=tmp_path, timeout=30,
                       env={"PATH": f"{stub.parent}:/usr/bin:/bin", "HOME": str(tmp_path)})
    argv = json.loads(r.stdout)
    assert r.returncode == 0 and argv == ["apply", "--yes", "--", name], (command, argv)
    assert not (tmp_path / "pwned").exists()
    args = build_parser().parse_args(argv)
    assert args.domains == [name] and args.yes and not args.all and not args.pending
