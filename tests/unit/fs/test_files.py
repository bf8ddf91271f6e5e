"""File handling never loses a byte: backups, special files, identity, ownership, xattrs, concurrency,
output errors and config hardening -- each defect the packaging issue lists, as a test."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys
import time

import pytest

from tests.support import FIXTURES, ROOT

SRC = FIXTURES / "handwritten-no-cpu.xml"
PV = b"<pvspinlock state='on'/>"


def run(*args, stdin=None, env=None, stdout=subprocess.PIPE, **kw):
    e = dict(os.environ, **(env or {}))
    e.pop("VIRTXML_CPU_CONFIG", None) if "VIRTXML_CPU_CONFIG" not in (env or {}) else None
    return subprocess.run([sys.executable, "-m", "virtxml_cpu", *args], input=stdin, stdout=stdout,
                          stderr=subprocess.PIPE, cwd=ROOT, timeout=60, env=e, **kw)


def as_nobody(fn) -> tuple[int, str]:
    """Run fn() in a forked child with uid/gid nobody; (exit code of the error, or 0, message)."""
    from virtxml_cpu.errors import VirtxmlCpuError

    rfd, wfd = os.pipe()
    pid = os.fork()
    if pid == 0:  # child
        os.close(rfd)
        code, msg = 0, ""
        try:
            os.setgid(65534)
            os.setuid(65534)
            fn()
        except VirtxmlCpuError as e:
            code, msg = e.exit_code, str(e)
        except BaseException as e:  # noqa: BLE001 - reported to the parent
            code, msg = 99, f"{type(e).__name__}: {e}"
        os.write(wfd, f"{code}\n{msg}".encode())
        os._exit(0)
    os.close(wfd)
    with os.fdopen(rfd, "rb") as fh:
        out = fh.read().decode()
    os.waitpid(pid, 0)
    code, msg = out.split("\n", 1)
    return int(code), msg


def one_line(r, code):
    err = r.stderr.decode()
    assert r.returncode == code, (r.returncode, err)
    assert err.count("\n") == 1 and err.startswith("virtxml-cpu: ") and "Traceback" not in err, err


@pytest.fixture
def vm(tmp_path):
    p = tmp_path / "vm.xml"
    shutil.copy(SRC, p)
    return p


def test_backup_does_not_follow_a_link_and_never_overwrites(vm, tmp_path):
    victim = tmp_path / "victim"
    victim.write_bytes(b"precious")
    (tmp_path / "vm.xml.orig").symlink_to(victim)
    r = run("rewrite", "--in-place", "--backup", ".orig", "--no-host-probe", str(vm))
    assert r.returncode == 0, r.stderr
    assert victim.read_bytes() == b"precious" and (tmp_path / "vm.xml.orig").is_symlink()
    assert (tmp_path / "vm.xml.orig.1").read_bytes() == SRC.read_bytes()
    assert b"original kept as" in r.stderr and b"vm.xml.orig.1" in r.stderr
    # A regular backup in the way is kept too; one holding exactly the bytes read is reused, not doubled.
    edited = SRC.read_bytes().replace(b"</domain>", b"<!-- edited --></domain>")
    vm.write_bytes(edited)
    r = run("rewrite", "--in-place", "--backup", ".orig", "--no-host-probe", str(vm))
    assert (tmp_path / "vm.xml.orig.1").read_bytes() == SRC.read_bytes()
    assert (tmp_path / "vm.xml.orig.2").read_bytes() == edited
    vm.write_bytes(edited)
    r = run("rewrite", "--in-place", "--backup", ".orig", "--no-host-probe", str(vm))
    assert r.returncode == 0 and b"vm.xml.orig.2" in r.stderr and not (tmp_path / "vm.xml.orig.3").exists()


def test_backup_is_written_from_the_bytes_read_not_copied_later(vm):
    from virtxml_cpu.fs.files import update_in_place

    def transform(data):  # a careless writer changes the file after our read: the backup is what we read
        with open(vm, "r+b") as fh:
            fh.write(b"<!-- scribbled -->")
        return data + b"<!-- new -->", None

    written, _, backup = update_in_place(str(vm), transform, ".orig")
    assert written and open(backup, "rb").read() == SRC.read_bytes()


@pytest.mark.parametrize("trial", range(3))
def test_concurrent_in_place_runs_make_one_change_and_keep_the_original(tmp_path, trial):
    vm = tmp_path / "vm.xml"
    shutil.copy(SRC, vm)
    cmd = [sys.executable, "-m", "virtxml_cpu", "rewrite", "--in-place", "--backup", ".orig", "--no-host-probe",
           str(vm)]
    procs = [subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE) for _ in range(12)]
    errs = [p.communicate(timeout=120)[1] for p in procs]
    assert all(p.returncode == 0 for p in procs), errs
    assert vm.read_bytes().count(PV) == 1
    assert (tmp_path / "vm.xml.orig").read_bytes() == SRC.read_bytes()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["vm.xml", "vm.xml.orig"]


def test_output_to_a_device_is_refused_unless_it_is_our_stdout(tmp_path):
    r = run("rewrite", "--no-host-probe", "-o", "/dev/null", str(SRC))
    one_line(r, 2)
    assert stat.S_ISCHR(os.stat("/dev/null").st_mode)
    with open(os.devnull, "wb") as null:
        r = run("rewrite", "--no-host-probe", "-o", "/dev/null", str(SRC), stdout=null)
    assert r.returncode == 0, r.stderr


def test_in_place_on_a_fifo_is_refused_without_blocking(tmp_path):
    fifo = tmp_path / "vm.xml"
    os.mkfifo(fifo)
    r = run("rewrite", "--in-place", "--no-host-probe", str(fifo))
    one_line(r, 2)
    assert stat.S_ISFIFO(os.stat(fifo).st_mode)


def test_output_naming_the_input_under_another_name_is_refused(vm, tmp_path):
    for other in ("./vm.xml", str(tmp_path / "." / "vm.xml")):
        r = run("rewrite", "--no-host-probe", "-o", other, "vm.xml", cwd=tmp_path) if False else \
            subprocess.run([sys.executable, "-m", "virtxml_cpu", "rewrite", "--no-host-probe", "-o", other, "vm.xml"],
                           cwd=tmp_path, capture_output=True, env=dict(os.environ, PYTHONPATH=str(ROOT)))
        one_line(r, 2)
    os.link(vm, tmp_path / "hard.xml")
    r = run("rewrite", "--no-host-probe", "-o", str(tmp_path / "hard.xml"), str(vm))
    one_line(r, 2)
    assert vm.read_bytes() == SRC.read_bytes()


@pytest.fixture
def open_dir():
    """A directory anybody can reach (pytest's own temporary root is private to root)."""
    import tempfile
    from pathlib import Path

    d = Path(tempfile.mkdtemp(prefix="vxc-shared-", dir="/tmp"))
    os.chmod(d, 0o777)
    yield d
    shutil.rmtree(d)


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to create files owned by others")
def test_owner_and_group_kept_or_the_write_refused(open_dir):
    shared = open_dir
    os.chmod(shared, 0o755)  # root replaces nothing in a directory others can write (tests/unit/fs/test_trusted.py)
    vm = shared / "vm.xml"
    shutil.copy(SRC, vm)
    os.chown(vm, 12345, 12345)
    os.chmod(vm, 0o666)
    r = run("rewrite", "--in-place", "--no-host-probe", str(vm))  # root keeps any owner
    assert r.returncode == 0 and PV in vm.read_bytes()
    st = os.stat(vm)
    assert (st.st_uid, st.st_gid, stat.S_IMODE(st.st_mode)) == (12345, 12345, 0o666)
    os.chmod(shared, 0o777)
    shutil.copy(SRC, vm)
    os.chown(vm, 12345, 12345)
    from virtxml_cpu.fs.files import update_in_place

    code, msg = as_nobody(lambda: update_in_place(str(vm), lambda d: (d + b"<!-- x -->", None)))
    assert code == 3 and "cannot keep its owner" in msg and "\n" not in msg, msg  # nobody cannot give it away
    assert vm.read_bytes() == SRC.read_bytes()
    assert os.stat(vm).st_uid == 12345 and sorted(p.name for p in shared.iterdir()) == ["vm.xml"]


def test_extended_attributes_survive(vm):
    try:
        os.setxattr(vm, "user.origin", b"virt-install")
    except OSError as e:
        pytest.skip(f"this filesystem has no user xattrs ({e.strerror})")
    r = run("rewrite", "--in-place", "--no-host-probe", str(vm))
    assert r.returncode == 0 and PV in vm.read_bytes()
    assert os.getxattr(vm, "user.origin") == b"virt-install"


def test_epipe_is_quiet():
    p = subprocess.Popen([sys.executable, "-m", "virtxml_cpu", "explain", "--no-host-probe"]
                         + [str(SRC)] * 200, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    p.stdout.readline()
    p.stdout.close()
    err = p.stderr.read()
    p.wait(timeout=60)
    assert b"Traceback" not in err and b"BrokenPipe" not in err, err
    assert p.returncode in (0, 3)


def test_full_stdout_is_one_line_exit_3():
    with open("/dev/full", "wb") as full:
        r = run("rewrite", "--no-host-probe", str(SRC), stdout=full)
    one_line(r, 3)


@pytest.mark.parametrize("text,needle", [
    ("a = " + "[" * 5000 + "]" * 5000 + "\n", b"an array, which no setting takes"),
    ("a = " + "{ b = " * 5000 + "1" + " }" * 5000 + "\n", b"nested too deeply"),
    ("[hook]\nsyslog_socket = true\n", b"hook.syslog_socket must be a string"),
    ("[hook]\nspool = 5\n", b"hook.spool must be a string"),
    ("policy = 3\n", b"policy must be a string"),
    ("hook = 1\n", b"hook must be a table"),
])
def test_bad_config_is_one_line_exit_2_and_the_hook_fails_open(tmp_path, text, needle):
    cfg = tmp_path / "c.toml"
    cfg.write_text(text)
    r = run("explain", "--no-host-probe", "--config", str(cfg), str(SRC))
    one_line(r, 2)
    assert needle in r.stderr
    from virtxml_cpu.hook import evaluate

    logged = []
    rc = evaluate.run(["vm", "prepare", "begin", "-"], mode="enforce", config_path=str(cfg),
                  stdin=open(SRC, "rb"), log=lambda msg, **kw: logged.append(msg))
    assert rc == 0 and "config unusable" in logged[0]


def test_config_from_dev_zero_is_bounded():
    t = time.monotonic()
    r = run("explain", "--no-host-probe", str(SRC), env={"VIRTXML_CPU_CONFIG": "/dev/zero"})
    one_line(r, 2)
    assert time.monotonic() - t < 20 and b"not a regular file (a device)" in r.stderr


def test_exemption_typo_keeps_the_domain_and_says_why(tmp_path):
    data = SRC.read_bytes().replace(b"</domain>", b"<metadata><vxc:cpu xmlns:vxc='urn:virtxml-cpu:domain:1' "
                                                  b"policy='Never'/></metadata></domain>")
    r = run("rewrite", "--no-host-probe", "-", stdin=data)
    assert r.returncode == 0 and r.stdout == data
    r = run("explain", "--no-host-probe", "-", stdin=data)
    assert b"metadata-invalid" in r.stdout and b"policy='Never'" in r.stdout


@pytest.mark.parametrize("suffix", ["", "/x", "a/b"])
def test_backup_suffix_must_be_a_suffix(vm, suffix):
    r = run("rewrite", "--in-place", "--backup", suffix, "--no-host-probe", str(vm))
    one_line(r, 2)
    assert vm.read_bytes() == SRC.read_bytes()


def test_a_newline_in_a_file_name_stays_one_line(tmp_path):
    odd = tmp_path / "vm\nevil.xml"
    odd.write_bytes(b"<domain")
    r = run("explain", "--no-host-probe", str(odd))
    one_line(r, 2)
    assert b"vm\\nevil.xml" in r.stderr


def test_unreadable_input_and_config_both_exit_3(open_dir):
    if os.geteuid() != 0:
        pytest.skip("needs root to drop privileges")
    tmp_path = open_dir
    os.chmod(tmp_path, 0o755)  # a config in a directory others can write is refused (exit 2) before it is read
    cfg = tmp_path / "c.toml"
    cfg.write_text('policy = "compat"\n')
    os.chmod(cfg, 0o600)
    xml = tmp_path / "vm.xml"
    shutil.copy(SRC, xml)
    os.chmod(xml, 0o600)
    from virtxml_cpu.core.config import load
    from virtxml_cpu.fs.files import read_input

    assert as_nobody(lambda: load(str(cfg)))[0] == 3
    assert as_nobody(lambda: read_input(str(xml)))[0] == 3


@pytest.fixture
def small_fs(tmp_path):
    """A 256 KiB tmpfs, to run out of space on purpose (root only)."""
    if os.geteuid() != 0:
        pytest.skip("needs root to mount a tmpfs")
    mnt = tmp_path / "small"
    mnt.mkdir()
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=256k", "tmpfs", str(mnt)], capture_output=True)
    if r.returncode:
        pytest.skip(f"cannot mount a tmpfs here: {r.stderr.decode().strip()}")
    yield mnt
    subprocess.run(["umount", str(mnt)], check=False)


def test_a_full_disk_leaves_the_file_and_the_old_backup_whole(small_fs):
    vm = small_fs / "vm.xml"
    shutil.copy(SRC, vm)
    old = small_fs / "vm.xml.orig"
    old.write_bytes(b"<!-- a good old backup -->\n" * 100)
    filler = small_fs / "filler"
    with open(filler, "wb", buffering=0) as fh:  # fill the filesystem up to the last few bytes
        try:
            while True:
                fh.write(b"\0" * 1024)
        except OSError:
            pass
    r = run("rewrite", "--in-place", "--backup", ".orig", "--no-host-probe", str(vm))
    one_line(r, 3)
    assert vm.read_bytes() == SRC.read_bytes()
    assert old.read_bytes() == b"<!-- a good old backup -->\n" * 100
    assert sorted(p.name for p in small_fs.iterdir()) == ["filler", "vm.xml", "vm.xml.orig"]


@pytest.mark.parametrize("verb", [["explain", "--format", "json"], ["rewrite", "--check"]])
def test_deciding_on_a_10_mib_domain_takes_at_most_10x_its_size(tmp_path, verb):
    sys.path.insert(0, str(ROOT / "bench"))
    import file_cost

    big = tmp_path / "big.xml"
    file_cost.big_document(big, 10 * 1024 * 1024)
    # VmHWM is this address space's peak; ru_maxrss would include the forking pytest's (Linux keeps it
    # across execve).
    probe = ("import re, sys, runpy\n"
             "sys.argv = ['virtxml-cpu'] + sys.argv[1:]\n"
             "try:\n    runpy.run_module('virtxml_cpu', run_name='__main__')\n"
             "except SystemExit as e:\n    code = e.code\n"
             "hwm = re.search(r'VmHWM:\\s+(\\d+)', open('/proc/self/status').read()).group(1)\n"
             "sys.stderr.write(f'\\nMAXRSS {hwm} {code}\\n')\n")
    r = subprocess.run([sys.executable, "-c", probe, *verb, "--no-host-probe", "--qemu-build", "upstream",
                        str(big)], cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, timeout=120)
    kib, code = r.stderr.decode().rsplit("MAXRSS ", 1)[1].split()
    assert code in ("0", "1", "None"), r.stderr[-500:]
    assert int(kib) <= 10 * big.stat().st_size // 1024, f"{kib} KiB for a {big.stat().st_size // 1024} KiB document"


# --- the directory is opened once; links are followed as fs.protected_symlinks would ----------------------


def test_a_link_is_followed_the_target_updated_the_link_kept_and_the_backup_beside_the_target(tmp_path):
    (tmp_path / "real").mkdir()
    (tmp_path / "links").mkdir()
    target = tmp_path / "real" / "vm.xml"
    shutil.copy(SRC, target)
    (tmp_path / "links" / "hop").symlink_to("../real/vm.xml")  # relative to the link's own directory
    (tmp_path / "links" / "vm.xml").symlink_to("hop")  # and a chain of two
    r = run("rewrite", "--in-place", "--backup", ".orig", "--no-host-probe", str(tmp_path / "links" / "vm.xml"))
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "links" / "vm.xml").is_symlink() and PV in target.read_bytes()
    assert (tmp_path / "real" / "vm.xml.orig").read_bytes() == SRC.read_bytes()
    assert sorted(p.name for p in (tmp_path / "links").iterdir()) == ["hop", "vm.xml"]
    assert b"real/vm.xml.orig" in r.stderr, r.stderr


def test_a_linked_directory_in_the_path_is_followed(tmp_path):
    (tmp_path / "real").mkdir()
    (tmp_path / "alias").symlink_to("real")
    shutil.copy(SRC, tmp_path / "real" / "vm.xml")
    for args in (["--in-place"], ["-o", str(tmp_path / "alias" / "out.xml")]):
        r = run("rewrite", *args, "--no-host-probe", str(tmp_path / "alias" / "vm.xml"))
        assert r.returncode == 0, r.stderr
    assert PV in (tmp_path / "real" / "vm.xml").read_bytes() and PV in (tmp_path / "real" / "out.xml").read_bytes()
    assert sorted(p.name for p in (tmp_path / "real").iterdir()) == ["out.xml", "vm.xml"]


def test_a_directory_swapped_while_the_file_is_locked_gets_nothing_and_the_run_says_so(tmp_path):
    """The swap the in-place lock cannot stop: the path's directory becomes a link elsewhere while the new
    content is computed. Refused in one line; neither directory is written."""
    from virtxml_cpu.errors import EnvironmentProblem
    from virtxml_cpu.fs.files import update_in_place

    (tmp_path / "d").mkdir()
    protected = tmp_path / "protected"
    protected.mkdir()
    victim = protected / "vm.xml"
    victim.write_bytes(b"not yours")
    shutil.copy(SRC, tmp_path / "d" / "vm.xml")

    def swap(data):
        os.rename(tmp_path / "d", tmp_path / "d.old")
        os.symlink(protected, tmp_path / "d")
        return data + b"<!-- new -->", None

    with pytest.raises(EnvironmentProblem, match="directory was moved or replaced .*nothing was written"):
        update_in_place(str(tmp_path / "d" / "vm.xml"), swap, ".orig")
    assert victim.read_bytes() == b"not yours" and [p.name for p in protected.iterdir()] == ["vm.xml"]
    assert [p.name for p in (tmp_path / "d.old").iterdir()] == ["vm.xml"]
    assert (tmp_path / "d.old" / "vm.xml").read_bytes() == SRC.read_bytes()


def test_a_swap_after_the_last_check_still_writes_only_where_the_locked_file_is(tmp_path, monkeypatch):
    """Past the last check, a swap can still happen; every write is relative to the directory fd, so the
    locked file's own directory gets the change (and the backup), the link's target nothing."""
    from virtxml_cpu.fs import files

    (tmp_path / "d").mkdir()
    protected = tmp_path / "protected"
    protected.mkdir()
    (protected / "vm.xml").write_bytes(b"not yours")
    shutil.copy(SRC, tmp_path / "d" / "vm.xml")
    monkeypatch.setattr(files, "_still_named", lambda *a: None)  # the swap lands after it

    def swap(data):
        os.rename(tmp_path / "d", tmp_path / "d.old")
        os.symlink(protected, tmp_path / "d")
        return data + b"<!-- new -->", None

    written, _, _ = files.update_in_place(str(tmp_path / "d" / "vm.xml"), swap, ".orig")
    assert written and [p.name for p in protected.iterdir()] == ["vm.xml"]
    assert (protected / "vm.xml").read_bytes() == b"not yours"
    assert (tmp_path / "d.old" / "vm.xml").read_bytes() == SRC.read_bytes() + b"<!-- new -->"
    assert (tmp_path / "d.old" / "vm.xml.orig").read_bytes() == SRC.read_bytes()


def _planted(directory, mode, dir_owner, link_owner, target):
    directory.mkdir()
    os.chmod(directory, mode)
    os.chown(directory, dir_owner, dir_owner)
    link = directory / "vm.xml"
    link.symlink_to(target)
    os.lchown(link, link_owner, link_owner)
    return link


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to make links owned by others")
@pytest.mark.parametrize("mode,dir_owner,link_owner,followed", [
    (0o1777, 0, 65534, False),  # another user's link in /tmp: what fs.protected_symlinks refuses
    (0o1777, 0, 0, True),  # root's own link there
    (0o1777, 65534, 65534, False),  # the sticky directory's owner's link: protected_symlinks follows it, root not
    (0o0777, 0, 65534, False),  # not sticky: the kernel follows it, root does not
    (0o0755, 65534, 65534, False),  # a link in another user's own directory
    (0o0755, 65534, 0, True),  # root's link in another user's directory (the target is root's)
])
def test_as_root_a_final_link_is_followed_only_when_it_is_roots(open_dir, mode, dir_owner, link_owner, followed):
    os.chmod(open_dir, 0o755)
    target = open_dir / "victim.xml"
    shutil.copy(SRC, target)
    link = _planted(open_dir / "d", mode, dir_owner, link_owner, target)
    r = run("rewrite", "--in-place", "--no-host-probe", str(link))
    out = open_dir / "d" / "out.xml"
    if followed:
        assert r.returncode == 0 and PV in target.read_bytes(), r.stderr
        return
    one_line(r, 3)
    assert b"not followed (as fs.protected_symlinks)" in r.stderr or b"only root's links are followed" in r.stderr
    assert target.read_bytes() == SRC.read_bytes() and link.is_symlink()
    link.unlink()  # -o through such a link: refused the same way, nothing created through it
    link.symlink_to(out.with_name("created.xml"))
    os.lchown(link, link_owner, link_owner)
    r = run("rewrite", "--no-host-probe", "-o", str(link), str(SRC))
    one_line(r, 3)
    assert sorted(p.name for p in (open_dir / "d").iterdir()) == ["vm.xml"]


def test_in_place_on_a_directory_or_a_trailing_slash_is_refused(tmp_path, vm):
    for path in (str(tmp_path), str(vm) + "/", str(tmp_path) + "/."):
        r = run("rewrite", "--in-place", "--no-host-probe", path)
        one_line(r, 2)
    assert vm.read_bytes() == SRC.read_bytes() and sorted(p.name for p in tmp_path.iterdir()) == ["vm.xml"]


def test_read_input_reads_whole_files_and_refuses_directories_and_oversize(tmp_path):
    """read_input opens with os.open and stops at a regular file's first short read: every size up to the
    limit comes back whole, a file past it only to one byte over (what check_raw refuses), a directory is
    the same one line as with open(), and a pipe's short reads are not taken for its end."""
    from virtxml_cpu.errors import BadInput
    from virtxml_cpu.fs.files import read_input
    from virtxml_cpu.constants import MAX_DEFINITION_BYTES

    for size in (0, 1, 4095, 4096, 65537, MAX_DEFINITION_BYTES, MAX_DEFINITION_BYTES + 5):
        f = tmp_path / f"f{size}"
        data = (bytes(range(251)) * (size // 251 + 1))[:size]
        f.write_bytes(data)
        got = read_input(str(f))
        assert got == data[:MAX_DEFINITION_BYTES + 1], size
    with pytest.raises(BadInput, match="is a directory"):
        read_input(str(tmp_path))
    with pytest.raises(BadInput, match="no such file"):
        read_input(str(tmp_path / "absent"))
    r, w = os.pipe()  # not a regular file: short reads are not its end
    os.write(w, b"<dom")
    pid = os.fork()
    if pid == 0:
        time.sleep(0.2)
        os.write(w, b"ain/>")
        os._exit(0)
    os.close(w)
    try:
        assert read_input(f"/dev/fd/{r}") == b"<domain/>"
    finally:
        os.waitpid(pid, 0)
        os.close(r)
