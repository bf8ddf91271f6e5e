"""The package installs like any other: a wheel (and an sdist) built from this tree, installed into a fresh
venv outside it, gives a working `virtxml-cpu hook install|status|uninstall` and a hook that evaluates a
guest when libvirt runs it (through its shebang, with libvirt's bare environment)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest

from tests.support import FIXTURES, ROOT
from tests.support.users import unshared_dir

LIBVIRT_ENV = {"LC_ALL": "C", "PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "HOME": "/root", "USER": "root",
               "LOGNAME": "root", "TMPDIR": "/tmp"}  # all a libvirt hook gets


@pytest.fixture(scope="module")
def dist(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("dist")
    for what in (["wheel", "--no-deps", "-w", str(out)], ):
        cmd = [sys.executable, "-m", "pip", *what, str(ROOT)]
        r = subprocess.run(cmd + ["--no-build-isolation", "-q"], capture_output=True, text=True)
        if r.returncode:
            subprocess.run(cmd + ["-q"], check=True, capture_output=True, text=True)
    return out


@pytest.fixture(scope="module")
def venv(dist):
    """Outside /tmp: `hook install` takes no interpreter below a sticky directory."""
    top = unshared_dir("vxc-wheel-")
    env = top / "vxc"
    subprocess.run([sys.executable, "-m", "venv", str(env)], check=True)
    (wheel,) = dist.glob("virtxml_cpu-*.whl")
    subprocess.run([str(env / "bin" / "pip"), "install", "-q", str(wheel)], check=True, cwd="/")
    yield env
    shutil.rmtree(top, ignore_errors=True)


def test_wheel_carries_the_hook_script(dist):
    (wheel,) = dist.glob("virtxml_cpu-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    assert "virtxml_cpu/hook/qemu-hook" in names and "virtxml_cpu/tables/builds/ubuntu.py" in names
    assert "virtxml_cpu/hook/vdsm-hook" in names  # VDSM's before_vm_start front, copied from the installed package
    assert "virtxml_cpu/render/prometheus.py" in names


def test_wheel_carries_every_module_of_the_tree(dist):
    """A module added or split off (xml/parse.py, xml/edit.py, hook/digest_key.py) is installed too."""
    (wheel,) = dist.glob("virtxml_cpu-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    tree = {p.relative_to(ROOT).as_posix() for p in (ROOT / "virtxml_cpu").rglob("*.py") if "__pycache__" not in p.parts}
    assert {"virtxml_cpu/xml/parse.py", "virtxml_cpu/xml/edit.py", "virtxml_cpu/hook/digest_key.py"} <= tree
    assert tree <= names, sorted(tree - names)


def test_sdist_carries_the_hook_script(tmp_path):
    r = subprocess.run([sys.executable, "-c", "import setuptools.build_meta as b, sys; "
                        f"print(b.build_sdist({str(tmp_path)!r}))"], cwd=ROOT, capture_output=True, text=True)
    if r.returncode:
        pytest.fail(f"sdist build failed: {r.stderr.strip().splitlines()[-1:]}")
    (sdist,) = tmp_path.glob("virtxml*cpu-*.tar.gz")
    names = tarfile.open(sdist).getnames()
    assert any(n.endswith("virtxml_cpu/hook/qemu-hook") for n in names), names


def test_installed_package_installs_a_hook_that_libvirt_can_run(venv, tmp_path):
    assert ROOT not in venv.resolve().parents  # installed apart from the checkout
    cli = str(venv / "bin" / "virtxml-cpu")
    hooks = tmp_path / "hooks"
    config = tmp_path / "config.toml"
    config.write_text(f'[hook]\nsyslog_socket = "{tmp_path}/no-syslog"\nspool = "{tmp_path}/spool/pending"\n')
    r = subprocess.run([cli, "hook", "install", "--hooks-dir", str(hooks), "--qemu-d", "--mode", "audit",
                        "--config", str(config), "--digest-dir", str(tmp_path / "decisions")],
                       capture_output=True, text=True, cwd="/")
    assert r.returncode == 0, r.stderr
    script = hooks / "qemu.d" / "virtxml-cpu"
    text = script.read_text()
    settings = dict(re.findall(r"^(PYTHON|DIGEST_DIR)='([^']*)'", text, flags=re.M))
    assert text.startswith("#!/bin/sh\n") and settings["PYTHON"].startswith(f"{venv}/bin/python"), settings
    assert settings["DIGEST_DIR"] == str(tmp_path / "decisions")
    r = subprocess.run([cli, "hook", "status", "--hooks-dir", str(hooks)], capture_output=True, text=True, cwd="/")
    assert r.returncode == 0 and "installed, mode audit" in r.stdout and "ok" in r.stdout, r.stdout
    xml = (FIXTURES / "handwritten-no-cpu.xml").read_bytes()
    r = subprocess.run([str(script), "scratch", "prepare", "begin", "-"], input=xml, capture_output=True,
                       env=LIBVIRT_ENV, cwd="/")
    assert r.returncode == 0 and r.stdout == b""
    assert b"decision=inject" in r.stderr and b"rule=policy-compat" in r.stderr, r.stderr
    r = subprocess.run([str(script), "scratch", "started", "begin", "-"], input=xml, capture_output=True,
                       env=LIBVIRT_ENV, cwd="/")
    assert (r.returncode, r.stdout, r.stderr) == (0, b"", b"")
    r = subprocess.run([cli, "hook", "uninstall", "--hooks-dir", str(hooks)], capture_output=True, text=True)
    assert r.returncode == 0 and not script.exists()
    assert os.listdir(hooks / "qemu.d") == []


def test_installed_package_carries_a_vdsm_hook_that_runs(venv, tmp_path):
    """The front in the installed package, copied into a hook directory and pointed at the venv's Python,
    run as VDSM runs it (tests/unit/hook/test_vdsm.py has the contract): the file it names is rewritten."""
    (front,) = venv.glob("lib/python*/site-packages/virtxml_cpu/hook/vdsm-hook")
    assert os.access(front, os.X_OK)
    config = tmp_path / "config.toml"
    config.write_text(f'[hook]\nspool = "{tmp_path}/spool/pending"\n')  # its caps digest beside it, not in /var/lib
    lines = [f"PYTHONS='{venv}/bin/python'" if line.startswith("PYTHONS=") else
             f"CONFIG='{config}'" if line.startswith("CONFIG=") else line for line in front.read_text().split("\n")]
    hook = tmp_path / "50_virtxml-cpu"
    hook.write_text("\n".join(lines))
    hook.chmod(0o755)
    doc = tmp_path / "domxml"
    doc.write_bytes((FIXTURES / "handwritten-no-cpu.xml").read_bytes())
    r = subprocess.run([str(hook)], capture_output=True, cwd="/", env={"PATH": "/usr/bin:/bin", "_hook_domxml": str(doc),
                                                                       "vmId": "v1", "PYTHONPATH": str(ROOT)})
    assert r.returncode == 0 and b"added kvm-pv-unhalt" in r.stderr, r.stderr
    assert doc.read_bytes() != (FIXTURES / "handwritten-no-cpu.xml").read_bytes()
    assert b"<pvspinlock state='on'/>" in doc.read_bytes()
