"""The trust boundary, tried as a second, unprivileged local user would: owning a venv directory, its
pyvenv.cfg or a config, planting links in their own directories and in /tmp, swapping a directory they
own, re-pointing a link between two QEMUs. Root must run only root's code, take settings only from
root's config and write nowhere through another user's link."""

from __future__ import annotations

import io
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from virtxml_cpu.hook import evaluate, install
from virtxml_cpu.host import caps_cache as host_caps_cache

from tests.support import FIXTURES, ROOT, Capture
from tests.support.qemu import caps_cache
from tests.support.users import LXML_DIR, NOBODY, cli, theirs

ROOT_ONLY = pytest.mark.skipif(os.geteuid() != 0, reason="needs root (other users, root-owned files)")
NEEDS_FIX = (FIXTURES / "handwritten-no-cpu.xml").read_bytes()
UUID = "0b7e2d1c-6a51-4f0e-8d7b-3c2f9e1a4b66"



def as_nobody(*argv: str) -> None:
    subprocess.run(["runuser", "-u", "nobody", "--", *argv], check=True, timeout=30)


def with_uuid(xml: bytes) -> bytes:
    return xml.replace(b"<name>scratch</name>", f"<name>scratch</name><uuid>{UUID}</uuid>".encode())


def queue_config(d: Path, spool_dir: Path) -> str:
    p = d / "c.toml"
    p.write_text(f'[hook]\nmode = "queue"\nspool = "{spool_dir}"\nlibvirt_config_dir = ""\n')
    return str(p)


# --- 8. spool and digest directories: nothing is created through a planted link ----------------------------


@ROOT_ONLY
def test_a_link_planted_above_the_spool_or_digest_dir_makes_root_create_nothing(shared):
    """spool = "/tmp/X/pending" is allowed (a sticky ancestor); another user plants /tmp/X as a link to a
    root-only directory. Root used to create pending/ (and qemu-caps/) there before refusing the spool."""

    sticky = shared / "tmp"
    sticky.mkdir()
    sticky.chmod(0o1777)
    protected = shared / "root-only"
    protected.mkdir(mode=0o700)
    as_nobody("ln", "-s", str(protected), str(sticky / "X"))
    log = Capture()
    rc = evaluate.run(["scratch", "prepare", "begin", "-"], config_path=queue_config(shared, sticky / "X" / "pending"),
                  stdin=io.BytesIO(with_uuid(NEEDS_FIX)), log=log)
    assert rc == 0 and list(protected.iterdir()) == [], list(protected.iterdir())
    assert any("fix not queued" in line and "symbolic link" in line for line in log.lines), log.lines
    caps = shared / "caps"
    caps_cache(caps, "/usr/bin/qemu-system-x86_64", "Debian 1:8.2.2+ds-0ubuntu1.4")
    facts, _ = host_caps_cache.lookup("/usr/bin/qemu-system-x86_64", str(caps), str(sticky / "X" / "qemu-caps"))
    assert facts.qemu_build == "ubuntu" and list(protected.iterdir()) == []


@ROOT_ONLY
def test_a_spool_created_in_a_sticky_directory_is_private_and_a_raced_directory_of_theirs_refused(shared):
    sticky = shared / "tmp"
    sticky.mkdir()
    sticky.chmod(0o1777)
    as_nobody("mkdir", str(sticky / "Y"))  # theirs, made before root's run
    log = Capture()
    evaluate.run(["scratch", "prepare", "begin", "-"], config_path=queue_config(shared, sticky / "Y" / "pending"),
             stdin=io.BytesIO(with_uuid(NEEDS_FIX)), log=log)
    assert not (sticky / "Y" / "pending").exists() and any("owned by uid 65534" in x for x in log.lines), log.lines
    evaluate.run(["scratch", "prepare", "begin", "-"], config_path=queue_config(shared, sticky / "Z" / "pending"),
             stdin=io.BytesIO(with_uuid(NEEDS_FIX)), log=Capture())
    assert (sticky / "Z" / "pending" / f"{UUID}.json").is_file()
    assert oct((sticky / "Z" / "pending").stat().st_mode & 0o777) == "0o700"


# --- 1. hook install runs only root's code ----------------------------------------------------------------


def _venv(where: Path) -> Path:
    base = getattr(sys, "_base_executable", sys.executable)
    subprocess.run([base, "-m", "venv", "--without-pip", str(where)], check=True, timeout=120)
    return where / "bin" / "python"


def _package_copy(where: Path) -> Path:
    shutil.copytree(ROOT / "virtxml_cpu", where / "virtxml_cpu", ignore=shutil.ignore_patterns("__pycache__"))
    return where


def _install(python: Path | str, package: Path, hooks: Path, *extra: str) -> subprocess.CompletedProcess:
    return cli("hook", "install", "--hooks-dir", str(hooks), "--legacy", *extra, python=str(python), cwd=package,
               pythonpath=f"{package}:{LXML_DIR}")


@ROOT_ONLY
@pytest.mark.parametrize("spoil", ["bin", "pyvenv.cfg", "home"])
def test_hook_install_refuses_a_venv_another_user_can_change(shared, unshared, spoil):
    """Their bin/ holds the link the shebang names (they replace bin/python); their pyvenv.cfg, or the
    home it names, decides where the standard library comes from (their os.py runs even with -I -S). The
    venv is outside /tmp, which install refuses on the way to an interpreter whoever owns the venv."""
    venv = unshared / "venv"
    python = _venv(venv)
    package = _package_copy(shared / "pkg")
    if spoil == "bin":
        theirs(venv / "bin")
    elif spoil == "pyvenv.cfg":
        theirs(venv / "pyvenv.cfg")
    else:
        home = shared / "their-home" / "bin"
        home.mkdir(parents=True)
        theirs(home.parent, home)
        cfg = (venv / "pyvenv.cfg").read_text()
        (venv / "pyvenv.cfg").write_text("".join(f"home = {home}\n" if line.startswith("home") else line + "\n"
                                                 for line in cfg.splitlines()))
    r = _install(python, package, shared / "hooks")
    assert r.returncode == 2 and not (shared / "hooks" / "qemu").exists(), (r.returncode, r.stdout, r.stderr)
    assert "not installing" in r.stderr and str(venv if spoil != "home" else home) in r.stderr, r.stderr
    assert r.stderr.count("\n") == 1


@ROOT_ONLY
def test_hook_install_refuses_a_link_inside_the_package_to_another_users_copy(shared):
    package = _package_copy(shared / "pkg")
    their = shared / "their-render"
    shutil.move(package / "virtxml_cpu" / "render", their)
    (package / "virtxml_cpu" / "render").symlink_to(their)  # root's link, to their copy
    theirs(their, *their.rglob("*"))
    r = _install(sys.executable, package, shared / "hooks")
    assert r.returncode == 2 and not (shared / "hooks" / "qemu").exists(), (r.returncode, r.stdout, r.stderr)
    assert "owned by uid 65534" in r.stderr and "render" in r.stderr, r.stderr


@ROOT_ONLY
def test_hook_status_rechecks_what_is_installed_and_says_what_fails(shared):
    package = _package_copy(shared / "pkg")
    hooks = shared / "hooks"
    r = _install(sys.executable, package, hooks)
    assert r.returncode == 0 and str(package) in (hooks / "qemu").read_text(), r.stderr
    status = cli("hook", "status", "--hooks-dir", str(hooks), cwd=package, pythonpath=f"{package}:{LXML_DIR}")
    assert status.returncode == 0 and "trusted" in status.stdout and "UNTRUSTED" not in status.stdout, status
    theirs(package / "virtxml_cpu" / "hook" / "evaluate.py")  # they may now edit what root runs at every guest start
    status = cli("hook", "status", "--hooks-dir", str(hooks), pythonpath=f"{ROOT}:{LXML_DIR}")
    assert status.returncode == 1, (status.stdout, status.stderr)
    want = f"UNTRUSTED: virtxml_cpu: {package}/virtxml_cpu/hook/evaluate.py is owned by uid 65534"
    assert want in status.stdout, status.stdout


@ROOT_ONLY
@pytest.mark.parametrize("name", ["turtle.py", "winreg.py", "tomli", "rnc2rng.py", "a_name_nobody_lists.py"])
def test_hook_install_refuses_a_module_of_theirs_beside_the_package_that_the_hook_could_import(shared, name):
    """turtle: the standard library's; winreg: not on Linux, but imported where present (mimetypes tries);
    tomli: the hook's TOML reader below Python 3.11; rnc2rng: lxml's optional import; and any other name:
    the interpreter may look up names no list holds. The package directory is first on the hook's path."""
    package = _package_copy(shared / "pkg")
    planted = package / name
    planted.mkdir() if name == "tomli" else planted.write_text("")
    theirs(planted)
    r = _install(sys.executable, package, shared / "hooks")
    assert r.returncode == 2 and not (shared / "hooks" / "qemu").exists(), (r.returncode, r.stdout, r.stderr)
    assert f"the hook's import path: {planted} is owned by uid {NOBODY}" in r.stderr, r.stderr


# --- 2. only root's config steers root --------------------------------------------------------------------


def _their_config(shared: Path, spool_dir: Path, how: str) -> Path:
    if how == "their file":
        cfg = shared / "c.toml"
    else:  # root's file in their directory: they can replace it
        (shared / "theirs").mkdir()
        theirs(shared / "theirs")
        cfg = shared / "theirs" / "c.toml"
    cfg.write_text(f'[hook]\nmode = "queue"\nspool = "{spool_dir}"\nlibvirt_config_dir = ""\n')
    if how == "their file":
        theirs(cfg)
    return cfg


@ROOT_ONLY
@pytest.mark.parametrize("how", ["their file", "root's file in their directory"])
def test_hook_install_refuses_a_config_another_user_can_change(shared, how):
    cfg = _their_config(shared, shared / "anywhere" / "pending", how)
    r = _install(sys.executable, ROOT, shared / "hooks", "--config", str(cfg))
    assert r.returncode == 2 and not (shared / "hooks" / "qemu").exists(), (r.stdout, r.stderr)
    assert str(cfg) in r.stderr and r.stderr.count("\n") == 1, r.stderr


@ROOT_ONLY
@pytest.mark.parametrize("how", ["their file", "root's file in their directory"])
def test_the_hook_fails_open_on_a_config_another_user_can_change(shared, how):
    spool_dir = shared / "anywhere" / "pending"
    cfg = _their_config(shared, spool_dir, how)
    log = Capture()
    rc = evaluate.run(["scratch", "prepare", "begin", "-"], config_path=str(cfg), stdin=io.BytesIO(with_uuid(NEEDS_FIX)),
                  log=log)
    assert rc == 0 and not (shared / "anywhere").exists(), log.lines
    assert len(log.lines) == 1 and "config unusable" in log.lines[0] and str(cfg) in log.lines[0], log.lines


@ROOT_ONLY
def test_a_root_run_verb_refuses_a_config_another_user_can_change(shared):
    cfg = _their_config(shared, shared / "x", "their file")
    xml = str(FIXTURES / "handwritten-no-cpu.xml")
    r = cli("explain", "--no-host-probe", "--config", str(cfg), xml)
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and str(cfg) in r.stderr, r.stderr
    os.chown(cfg, 0, 0)
    cfg.chmod(0o664)  # root's, but the group may write it
    r = cli("explain", "--no-host-probe", xml, env={"VIRTXML_CPU_CONFIG": str(cfg)})
    assert r.returncode == 2 and "writable by group or others" in r.stderr and str(cfg) in r.stderr, r.stderr
    cfg.chmod(0o644)
    assert cli("explain", "--no-host-probe", "--config", str(cfg), xml).returncode == 0


# --- 4. verify runs the very emulator it checked -------------------------------------------------------------

KVM_AND_QEMU = pytest.mark.skipif(
    os.geteuid() != 0 or not os.path.exists("/dev/kvm") or not shutil.which("qemu-system-x86_64"),
    reason="needs root, /dev/kvm and qemu-system-x86_64 (verify starts a QEMU)")


def _children(pid: int) -> list[str]:
    try:
        return Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    except OSError:
        return []


@KVM_AND_QEMU
def test_verify_emulator_link_re_pointed_after_the_first_qemu_never_runs_the_new_target(shared):
    """`verify --emulator LINK` checked the link's target and started every QEMU through the link: its
    owner re-points it once the first QEMU runs, and their program gets QEMU's user and the kvm group."""
    real = shutil.which("qemu-system-x86_64")
    mine = shared / "theirs"
    mine.mkdir()
    ran = shared / "ran"
    ran.touch()
    ran.chmod(0o666)
    evil = mine / "evil"
    evil.write_text(f"#!/bin/sh\nid -u >> {ran}\nexec {real} \"$@\"\n")
    evil.chmod(0o755)
    theirs(mine, evil)
    as_nobody("ln", "-s", real, str(mine / "qemu"))
    root = subprocess.Popen([sys.executable, "-m", "virtxml_cpu", "verify", "--emulator", str(mine / "qemu"),
                             "--machine", "pc-q35-*", "--cpu", "default", "--workers", "1", "-q",
                             "--record", str(shared / "record.json")], cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 60
        while not _children(root.pid) and root.poll() is None and time.monotonic() < deadline:
            time.sleep(0.01)
        as_nobody("ln", "-sfn", str(evil), str(mine / "qemu"))  # the first QEMU runs: re-point the link
        out, err = root.communicate(timeout=300)
    finally:
        root.kill()
    assert ran.read_text() == "", (ran.read_text(), err[-2000:])
    assert root.returncode in (0, 1) and "agree" in (out + err), (root.returncode, out[-1000:], err[-2000:])


# --- 3. no root write through another user's link -----------------------------------------------------------


@pytest.fixture
def their_dir(shared):
    d = shared / "home"
    d.mkdir()
    theirs(d)
    protected = shared / "root-only"
    protected.mkdir(mode=0o700)
    return d, protected


def rewrite(*args: str) -> subprocess.CompletedProcess:
    return cli("rewrite", "--no-host-probe", *args)


@ROOT_ONLY
def test_rewrite_o_never_follows_their_final_link(their_dir):
    home, protected = their_dir
    as_nobody("ln", "-s", str(protected / "profile.sh"), str(home / "out.xml"))
    r = rewrite("-o", str(home / "out.xml"), str(FIXTURES / "handwritten-no-cpu.xml"))
    assert r.returncode == 3 and r.stderr.count("\n") == 1 and "symbolic link of uid 65534" in r.stderr, r.stderr
    assert list(protected.iterdir()) == [] and (home / "out.xml").is_symlink()


@ROOT_ONLY
def test_rewrite_o_never_follows_their_link_in_the_directory_part(their_dir):
    home, protected = their_dir
    as_nobody("ln", "-s", str(protected), str(home / "sub"))
    r = rewrite("-o", str(home / "sub" / "out.xml"), str(FIXTURES / "handwritten-no-cpu.xml"))
    assert r.returncode == 3 and "symbolic link of uid 65534" in r.stderr, r.stderr
    assert list(protected.iterdir()) == []


@ROOT_ONLY
def test_in_place_never_follows_their_link_to_a_root_file(their_dir):
    home, protected = their_dir
    victim = protected / "vm.xml"
    victim.write_bytes(NEEDS_FIX)
    as_nobody("ln", "-s", str(victim), str(home / "vm.xml"))
    r = rewrite("--in-place", str(home / "vm.xml"))
    assert r.returncode == 3 and victim.read_bytes() == NEEDS_FIX, r.stderr


@ROOT_ONLY
def test_as_root_their_directory_gets_only_a_fresh_file_and_nothing_of_theirs_is_replaced(their_dir):
    home, _ = their_dir
    src = str(FIXTURES / "handwritten-no-cpu.xml")
    r = rewrite("-o", str(home / "new.xml"), src)
    st = (home / "new.xml").lstat()
    assert r.returncode == 0 and st.st_uid == 0 and b"pvspinlock" in (home / "new.xml").read_bytes(), r.stderr
    assert sorted(p.name for p in home.iterdir()) == ["new.xml"]  # no temporary file left
    theirs(home / "new.xml")
    for args in (("-o", str(home / "new.xml"), src), ("--in-place", str(home / "new.xml"))):
        r = rewrite(*args)
        assert r.returncode == 3 and "belongs to uid 65534" in r.stderr and r.stderr.count("\n") == 1, r.stderr
        assert (home / "new.xml").lstat().st_ino == st.st_ino and sorted(p.name for p in home.iterdir()) == ["new.xml"]


def _audit_to(prom: Path) -> subprocess.CompletedProcess:
    pytest.importorskip("libvirt", reason="libvirt-python is not installed: the audit through libvirt's test "
                                          "driver is SKIPPED")
    return cli("audit", "--connect", "test:///default", "--no-host-probe", "--qemu-build", "upstream",
               "--format", "prometheus", "-o", str(prom))


@ROOT_ONLY
def test_the_audit_textfile_is_renamed_into_roots_directory_and_a_swapped_directory_is_refused(shared):
    """Debian gives /var/lib/prometheus to the prometheus user; node-exporter/ in it is root's. The
    audit unit's command (root) rewrites node-exporter/virtxml-cpu.prom at every run. The user swaps
    node-exporter/ for a directory of theirs holding virtxml-cpu.prom as a link into a root-only place:
    root must create nothing there."""
    var = shared / "prometheus"
    (var / "node-exporter").mkdir(parents=True)
    theirs(var)
    prom = var / "node-exporter" / "virtxml-cpu.prom"
    for _ in range(2):  # written, then replaced by rename
        r = _audit_to(prom)
        assert r.returncode in (0, 1) and "virtxml_cpu_host_reachable" in prom.read_text(), r.stderr
    assert prom.stat().st_uid == 0 and sorted(p.name for p in prom.parent.iterdir()) == ["virtxml-cpu.prom"]
    protected = shared / "root-only"
    protected.mkdir(mode=0o700)
    as_nobody("mv", str(var / "node-exporter"), str(var / "old"))
    as_nobody("mkdir", str(var / "node-exporter"))
    as_nobody("ln", "-s", str(protected / "evil.sh"), str(prom))
    r = _audit_to(prom)
    assert r.returncode == 3 and list(protected.iterdir()) == [] and prom.is_symlink(), r.stderr
    as_nobody("rm", str(prom))
    as_nobody("ln", "-s", str(protected), str(var / "nx"))  # or the directory itself swapped for a link
    as_nobody("rmdir", str(var / "node-exporter"))
    as_nobody("mv", str(var / "nx"), str(var / "node-exporter"))
    r = _audit_to(prom)
    assert r.returncode == 3 and list(protected.iterdir()) == [], r.stderr


# --- 10. postrm acts on $DPKG_ROOT only --------------------------------------------------------------------

NAMESPACES = pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("unshare"),
                                reason="needs root and unshare (a private mount namespace hides the real /var/lib)")


@NAMESPACES
@pytest.mark.parametrize("action", ["remove", "purge"])
def test_postrm_honours_dpkg_root_on_every_path(tmp_path, action):
    """Run in a private mount namespace whose /var/lib is an empty tmpfs standing in for this system's:
    the script, given DPKG_ROOT, must leave it alone and clean up the other root."""
    chroot = tmp_path / "chroot"
    script = (ROOT / "debian" / "virtxml-cpu.postrm").read_text().replace("#DEBHELPER#", "")
    (tmp_path / "postrm").write_text(script)
    state = "var/lib/virtxml-cpu/pending/x.json"
    prom = "var/lib/prometheus/node-exporter/virtxml-cpu.prom"
    for rel in (state, prom):
        (chroot / rel).parent.mkdir(parents=True, exist_ok=True)
        (chroot / rel).write_text("x")
    inside = (f"mount -t tmpfs vxc /var/lib && mkdir -p /var/lib/virtxml-cpu/pending "
              f"/var/lib/prometheus/node-exporter && touch /{state} /{prom} && "
              f"DPKG_ROOT={chroot} sh {tmp_path / 'postrm'} {action} && ls /{state} /{prom}")
    r = subprocess.run(["unshare", "--mount", "--propagation", "private", "sh", "-c", inside],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, (r.stdout, r.stderr)  # this system's files are all still there
    assert not (chroot / prom).exists()
    assert (chroot / state).exists() == (action == "remove")


@ROOT_ONLY
def test_verify_record_goes_through_no_link_of_theirs(their_dir, fake):
    from virtxml_cpu.verify import run as verify
    from virtxml_cpu.verify import launch as runner, record
    from virtxml_cpu.host.sources import assemble

    home, protected = their_dir
    as_nobody("ln", "-s", str(protected), str(home / "lib"))
    build = runner.probe(fake())
    host = assemble(verify.sources(verify.VerifyOptions(), build, kvm=False))
    outcome = verify.VerifyResult(build, host, runner.Identity("test"), [], [], [], [], None, 0.0)
    note = record.write_record(outcome, str(home / "lib" / "record.json"))
    assert note.startswith("not recorded") and list(protected.iterdir()) == [], note


@ROOT_ONLY
def test_hook_install_creates_nothing_through_their_link_for_the_hooks_directory(their_dir):
    home, protected = their_dir
    as_nobody("ln", "-s", str(protected), str(home / "hooks"))
    r = _install(sys.executable, ROOT, home / "hooks")
    assert r.returncode == 2 and list(protected.iterdir()) == [], (r.stdout, r.stderr)
    assert "owned by uid 65534" in r.stderr and r.stderr.count("\n") == 1, r.stderr


@ROOT_ONLY
def test_hook_install_renders_the_directories_it_checked(shared, monkeypatch):
    """`hook install` asked where lxml is twice, once for the check and once for the script: when the answer
    changed in between (another lxml found, another copy in sys.modules), the script imported from a
    directory nobody had checked, such as another user's. It asks once and renders what it checked."""
    from virtxml_cpu.hook import install, status as hook_status

    theirs_dir = shared / "their-lib"
    (theirs_dir / "lxml").mkdir(parents=True)
    theirs(theirs_dir, theirs_dir / "lxml")
    answers = iter([(LXML_DIR,)] + [(str(theirs_dir),)] * 5)
    monkeypatch.setattr(install, "lib_dirs", lambda package_dir=None: next(answers))
    hooks = shared / "hooks"
    install.install(str(hooks), "audit", None, legacy=True, digest_dir="")
    settings = install.installed_settings((hooks / "qemu").read_text())
    assert settings["LIB_DIRS"] == ("" if LXML_DIR == install.PACKAGE_PARENT else LXML_DIR), settings
    assert not hook_status.installed_problems(hooks / "qemu", settings["PYTHON"], settings)


@ROOT_ONLY
@pytest.mark.parametrize("spoil", ["theirs", "world-writable"])
@pytest.mark.parametrize("again", ["audit", "enforce"])
def test_hook_install_writes_roots_hook_over_one_another_user_can_change(shared, spoil, again):
    """Replacing its own hook, install kept the old file's owner (as -o keeps a user's file's), and one
    that already said the same was `unchanged` whoever owned it and whatever its mode: a hook of theirs,
    by an earlier install of theirs or a copy, or one anybody may write, stayed so, and libvirtd runs it as
    root at every guest start. The hook is then root's, 0755, whoever owned the one it replaces."""
    hooks = shared / "hooks"
    install.install(str(hooks), "audit", None, legacy=True, digest_dir="")
    if spoil == "theirs":
        theirs(hooks / "qemu")
    else:
        (hooks / "qemu").chmod(0o777)
    out = install.install(str(hooks), again, None, legacy=True, digest_dir="")
    st = (hooks / "qemu").stat()
    assert (st.st_uid, st.st_gid, oct(st.st_mode & 0o7777)) == (0, 0, "0o755"), out
    assert f"MODE='{again}'" in (hooks / "qemu").read_text() and out[0].startswith("installed"), out


@ROOT_ONLY
def test_hook_install_writes_nothing_into_a_hooks_directory_they_made_after_the_check(shared, monkeypatch):
    """The hooks directory was checked while missing (nobody else can create it where every directory
    above is checked, a sticky one aside), then made with its parents: in a sticky directory another user
    could make it first, between the two, and root's hook then lay in a directory of theirs."""
    sticky = shared / "tmp"
    sticky.mkdir()
    sticky.chmod(0o1777)
    checked = install.resolve_trusted

    def then_theirs(*args, **kwargs):
        out = checked(*args, **kwargs)
        if not (sticky / "h").exists():
            as_nobody("mkdir", str(sticky / "h"))
        return out
    monkeypatch.setattr(install, "resolve_trusted", then_theirs)
    with pytest.raises(install.BadInput, match="owned by uid 65534"):
        install.install(str(sticky / "h"), "audit", None, legacy=False, digest_dir="")
    assert not (sticky / "h" / "qemu.d" / "virtxml-cpu").exists()


@ROOT_ONLY
def test_hook_install_makes_the_hooks_directories_0755_whatever_the_umask(shared):
    """The hooks directories it makes are root's and 0755 (as the hook is), not what the umask leaves: with
    umask 002 they were group-writable, which install itself refuses on the way to a hook."""
    old = os.umask(0o002)
    try:
        out = install.install(str(shared / "hooks"), "audit", None, legacy=False, digest_dir="")
    finally:
        os.umask(old)
    assert out[0].startswith("installed"), out
    for d in (shared / "hooks", shared / "hooks" / "qemu.d"):
        assert oct(d.stat().st_mode & 0o7777) == "0o755", d
    assert oct((shared / "hooks" / "qemu.d" / "virtxml-cpu").stat().st_mode & 0o7777) == "0o755"
