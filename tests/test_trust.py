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
import tempfile
import time
from pathlib import Path

import pytest

from virtxml_cpu import hook, qemucaps

from .conftest import FIXTURES, ROOT, Capture

ROOT_ONLY = pytest.mark.skipif(os.geteuid() != 0, reason="needs root (other users, root-owned files)")
NEEDS_FIX = (FIXTURES / "handwritten-no-cpu.xml").read_bytes()
UUID = "0b7e2d1c-6a51-4f0e-8d7b-3c2f9e1a4b66"
NOBODY = 65534
LXML_DIR = os.path.dirname(os.path.dirname(os.path.realpath(__import__("lxml").__file__)))


@pytest.fixture
def shared():
    """A root-owned directory every user can traverse (pytest's temporary root is private to root)."""
    d = Path(tempfile.mkdtemp(prefix="vxc-trust-", dir="/tmp"))
    d.chmod(0o755)
    yield d
    shutil.rmtree(d, ignore_errors=True)


def as_nobody(*argv: str) -> None:
    subprocess.run(["runuser", "-u", "nobody", "--", *argv], check=True, timeout=30)


def theirs(*paths: Path) -> None:
    for p in paths:
        os.chown(p, NOBODY, NOBODY, follow_symlinks=False)


def cli(*args: str, python: str = sys.executable, cwd: Path = ROOT, pythonpath: str | None = None,
        env: dict | None = None) -> subprocess.CompletedProcess:
    environ = dict(os.environ, **(env or {}))
    if pythonpath:
        environ["PYTHONPATH"] = pythonpath
    return subprocess.run([python, "-c", "import sys; from virtxml_cpu.cli import main; sys.exit(main())", *args],
                          cwd=cwd, capture_output=True, text=True, timeout=120, env=environ)


def with_uuid(xml: bytes) -> bytes:
    return xml.replace(b"<name>scratch</name>", f"<name>scratch</name><uuid>{UUID}</uuid>".encode())


def queue_config(d: Path, spool_dir: Path) -> str:
    p = d / "c.toml"
    p.write_text(f'[hook]\nmode = "queue"\nspool = "{spool_dir}"\n')
    return str(p)


# --- 8. spool and digest directories: nothing is created through a planted link ----------------------------


@ROOT_ONLY
def test_a_link_planted_above_the_spool_or_digest_dir_makes_root_create_nothing(shared):
    """spool = "/tmp/X/pending" is allowed (a sticky ancestor); another user plants /tmp/X as a link to a
    root-only directory. Root used to create pending/ (and qemu-caps/) there before refusing the spool."""
    from .test_flavours import caps_cache

    sticky = shared / "tmp"
    sticky.mkdir()
    sticky.chmod(0o1777)
    protected = shared / "root-only"
    protected.mkdir(mode=0o700)
    as_nobody("ln", "-s", str(protected), str(sticky / "X"))
    log = Capture()
    rc = hook.run(["scratch", "prepare", "begin", "-"], config_path=queue_config(shared, sticky / "X" / "pending"),
                  stdin=io.BytesIO(with_uuid(NEEDS_FIX)), log=log)
    assert rc == 0 and list(protected.iterdir()) == [], list(protected.iterdir())
    assert any("fix not queued" in line and "symbolic link" in line for line in log.lines), log.lines
    caps = shared / "caps"
    caps_cache(caps, "/usr/bin/qemu-system-x86_64", "Debian 1:8.2.2+ds-0ubuntu1.4")
    facts, _ = qemucaps.lookup("/usr/bin/qemu-system-x86_64", str(caps), str(sticky / "X" / "qemu-caps"))
    assert facts.qemu_flavour == "ubuntu" and list(protected.iterdir()) == []


@ROOT_ONLY
def test_a_spool_created_in_a_sticky_directory_is_private_and_a_raced_directory_of_theirs_refused(shared):
    sticky = shared / "tmp"
    sticky.mkdir()
    sticky.chmod(0o1777)
    as_nobody("mkdir", str(sticky / "Y"))  # theirs, made before root's run
    log = Capture()
    hook.run(["scratch", "prepare", "begin", "-"], config_path=queue_config(shared, sticky / "Y" / "pending"),
             stdin=io.BytesIO(with_uuid(NEEDS_FIX)), log=log)
    assert not (sticky / "Y" / "pending").exists() and any("owned by uid 65534" in x for x in log.lines), log.lines
    hook.run(["scratch", "prepare", "begin", "-"], config_path=queue_config(shared, sticky / "Z" / "pending"),
             stdin=io.BytesIO(with_uuid(NEEDS_FIX)), log=Capture())
    assert (sticky / "Z" / "pending" / f"{UUID}.json").is_file()
    assert oct((sticky / "Z" / "pending").stat().st_mode & 0o777) == "0o700"
