"""The installed hook in the real libvirtd names the domain libvirt named: with `web01` and `web01\u00a0` both
defined, enforce refuses `web01\u00a0`'s start, and its `Fix:` run as shown through `sh -c` redefines
exactly `web01\u00a0`, leaving `web01` byte for byte as it was."""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile

import pytest

from tests.lab import harness

from tests.support import ROOT, require_lab

libvirt = require_lab()
pytestmark = pytest.mark.lab
HOOKS = "/etc/libvirt/hooks"
HM = "<cpu mode='host-model' check='partial'/>"


def cli(*args):
    r = subprocess.run([sys.executable, "-m", "virtxml_cpu", *args], capture_output=True, text=True, cwd=ROOT,
                       timeout=120)
    assert r.returncode == 0, r.stderr
    return r


@pytest.fixture(scope="module")
def enforcing(lab, tmp_path_factory):
    """The hook installed in enforce mode, logging to a socket of the test's (returned)."""
    root = tmp_path_factory.mktemp("hook")
    sockdir = tempfile.mkdtemp(prefix="vxc-", dir="/tmp")  # a socket path has at most 107 bytes
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind(os.path.join(sockdir, "log"))
    sock.settimeout(0.2)
    config = root / "config.toml"
    config.write_text(f'[hook]\nmode = "enforce"\nspool = "{root / "spool"}"\nsyslog_socket = "{sockdir}/log"\n')
    cli("hook", "install", "--hooks-dir", HOOKS, "--config", str(config), "--digest-dir", str(root / "decisions"))
    harness.reload_hooks()
    yield sock
    cli("hook", "uninstall", "--hooks-dir", HOOKS)
    harness.reload_hooks()
    sock.close()
    shutil.rmtree(sockdir)


def define(conn, name: str, files: str):
    """A startable guest named `name` (its disk and serial files named `files`)."""
    xml = harness.startable(harness.boot_sector_guest(files, "pc-q35-7.2", HM))
    text = "".join(f"&#{ord(c)};" for c in name)
    return conn.defineXML(xml.replace(f"<name>{files}</name>".encode(), f"<name>{text}</name>".encode()).decode())


def logged_domains(sock) -> list[str]:
    out = []
    while True:
        try:
            line = sock.recv(65536).decode()
        except (socket.timeout, BlockingIOError):
            return out
        m = re.search(r' domain=("(?:[^"\\]|\\.)*"|\S+)', line)
        out.append(json.loads(m.group(1)) if m.group(1).startswith('"') else m.group(1))


def test_the_refusals_fix_redefines_web01_nbsp_and_leaves_web01_alone(lab, enforcing, tmp_path):
    from virtxml_cpu.errors import shown

    plain = harness.unique_name("web01")
    nbsp = plain + "\u00a0"
    doms = [define(lab, plain, plain), define(lab, nbsp, plain + "-nbsp")]
    try:
        assert sorted(d.name() for d in doms) == sorted([plain, nbsp])  # libvirt kept the NBSP: two domains
        before = doms[0].XMLDesc(libvirt.VIR_DOMAIN_XML_INACTIVE)
        logged_domains(enforcing)
        with pytest.raises(libvirt.libvirtError) as e:
            doms[1].createWithFlags(libvirt.VIR_DOMAIN_START_PAUSED)
        msg = e.value.get_error_message()
        assert f"refusing to start '{shown(nbsp)}':" in msg, msg
        assert logged_domains(enforcing) == [nbsp]
        fix = msg.split(" Fix: ", 1)[1].rsplit(", then start it. Exempt:", 1)[0]
        print(f"\nthe refusal's Fix: {fix}")
        bindir = tmp_path / "bin"
        bindir.mkdir()
        (bindir / "virtxml-cpu").write_text(f'#!/bin/sh\nexec {sys.executable} -m virtxml_cpu "$@"\n')
        (bindir / "virtxml-cpu").chmod(0o755)
        (tmp_path / "none.toml").write_text("")
        r = subprocess.run(["sh", "-c", fix], capture_output=True, text=True, timeout=120,
                           env={"PATH": f"{bindir}:/usr/sbin:/usr/bin:/sbin:/bin", "HOME": str(tmp_path),
                                "PYTHONPATH": str(ROOT), "VIRTXML_CPU_CONFIG": str(tmp_path / "none.toml")})
        assert r.returncode == 0, (fix, r.stdout, r.stderr)
        lines = r.stdout.splitlines()
        assert lines and all(x.startswith(f"{shown(nbsp)}: ") for x in lines), r.stdout
        assert any(x.startswith(f"{shown(nbsp)}: added kvm-pv-unhalt") for x in lines), r.stdout
        assert doms[0].XMLDesc(libvirt.VIR_DOMAIN_XML_INACTIVE) == before  # web01: byte for byte as it was
        assert "<pvspinlock state='on'/>" in doms[1].XMLDesc(libvirt.VIR_DOMAIN_XML_INACTIVE)
        doms[1].createWithFlags(libvirt.VIR_DOMAIN_START_PAUSED)  # fixed: enforce lets it start
        doms[1].destroy()
        with pytest.raises(libvirt.libvirtError, match="refusing to start"):  # web01 still lacks the fix
            doms[0].createWithFlags(libvirt.VIR_DOMAIN_START_PAUSED)
    finally:
        for d in doms:
            if d.isActive():
                d.destroy()
            d.undefine()
