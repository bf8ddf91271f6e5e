"""The hook's decision digest: a repeat start is answered from it; any change to what the decision read
(the definition, the config, libvirt's capabilities cache, the package) is a miss, never a stale answer."""

from __future__ import annotations

import io
import os
import socket
import subprocess
import sys

import pytest

from virtxml_cpu import digest, domain, hookact, hookentry, qemucaps, xmlio

from .conftest import FIXTURES, ROOT

XML = (FIXTURES / "handwritten-no-cpu.xml").read_bytes().replace(
    b"</devices>", b"<emulator>/usr/bin/qemu-system-x86_64</emulator></devices>")
XML = XML[XML.index(b"<domain"):]  # as libvirt hands it over: the root element first
EMULATOR = "/usr/bin/qemu-system-x86_64"
CAPS = """<qemuCaps>
  <emulator>/usr/bin/qemu-system-x86_64</emulator>
  <version>7002022</version>
  <package>{package}</package>
  <machine type='kvm' name='pc-i440fx-7.2' alias='pc' default='yes'/>
  <machine type='kvm' name='pc-q35-7.2' alias='q35'/>
</qemuCaps>
"""


class Host:
    """A config, a capabilities cache, a digest directory and a log socket, all in tmp_path."""

    def __init__(self, tmp_path, monkeypatch):
        self.root = tmp_path
        self.caps = tmp_path / "caps"
        self.caps.mkdir(mode=0o755)
        monkeypatch.setattr(qemucaps, "CACHE_DIR", str(self.caps))
        self.digests = tmp_path / "decisions"
        self.config = tmp_path / "config.toml"
        self.sock_path = tmp_path / "log.sock"
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.bind(str(self.sock_path))
        self.sock.settimeout(2)
        self.configure()
        self.cache("Debian 1:7.2+dfsg-7+deb12u18")

    def configure(self, extra: str = "") -> None:
        self.config.write_text(f'{extra}[hook]\nmode = "audit"\nspool = "{self.root / "spool"}"\n'
                               f'syslog_socket = "{self.sock_path}"\n')

    def cache(self, package: str) -> None:
        path = qemucaps.cache_file(EMULATOR, str(self.caps))
        tmp = path + ".new"
        with open(tmp, "w") as fh:
            fh.write(CAPS.format(package=package))
        os.replace(tmp, path)  # as libvirt rewrites it

    def start(self, xml: bytes = XML, op: str = "prepare", name: str = "scratch") -> str:
        rc = hookentry.main(["enforce", str(self.config), str(self.digests), name, op, "begin", "-"],
                            stdin=io.BytesIO(xml))
        assert rc == 0
        return self.sock.recv(65536).decode().split(": ", 1)[1]


@pytest.fixture
def host(tmp_path, monkeypatch):
    h = Host(tmp_path, monkeypatch)
    yield h
    h.sock.close()


def test_a_repeat_start_logs_the_same_line_plus_cached(host):
    first = host.start()
    again = host.start()
    assert "decision=inject" in first and "qemu=upstream" in first and "cached=yes" not in first
    assert again == first + " cached=yes"
    assert len(list(host.digests.iterdir())) == 1


def test_libvirts_per_start_values_still_hit(host):
    """What libvirt changes between two starts of one domain: the root's id (seen in the lab), a dynamic
    security label (SELinux picks a new MCS pair each start)."""
    label = (b"<seclabel type='dynamic' model='selinux' relabel='yes'><label>system_u:system_r:svirt_t:s0:c%d,c9"
             b"</label><imagelabel>system_u:object_r:svirt_image_t:s0:c%d,c9</imagelabel></seclabel></domain>")
    one = XML.replace(b"<domain type='kvm'>", b"<domain type='kvm' id='3'>").replace(b"</domain>", label % (1, 1))
    two = XML.replace(b"<domain type='kvm'>", b"<domain type='kvm' id='41'>").replace(b"</domain>", label % (7, 7))
    assert one != two and digest.canonical(one) == digest.canonical(two)
    first = host.start(one)
    assert host.start(two) == first + " cached=yes"


def test_a_changed_definition_is_never_answered_from_the_digest(host):
    host.start()
    fixed = XML.replace(b"</os>", b"</os><features><pvspinlock state='on'/></features>")
    line = host.start(fixed)
    assert "cached=yes" not in line and "decision=keep" in line
    renamed = XML.replace(b"<name>scratch</name>", b"<name>scratch2</name>")
    assert "cached=yes" not in host.start(renamed, name="scratch2")
    # the id of a child element, or an attribute that only looks like libvirt's, is the definition's own
    assert digest.canonical(XML.replace(b"<domain type='kvm'>", b"<domain type='kvm' id='x1'>")) != digest.canonical(XML)
    assert "cached=yes" not in host.start(XML.replace(b"<domain type='kvm'>", b"<domain id='5' type='qemu'>"))


def test_a_changed_config_is_never_answered_from_the_digest(host):
    host.start()
    host.configure('policy = "never"\n')
    line = host.start()
    assert "cached=yes" not in line and "decision=keep" in line and "rule=policy-never" in line
    assert host.start() == line + " cached=yes"


def test_a_changed_capabilities_cache_is_never_answered_from_the_digest(host):
    assert "qemu=upstream" in host.start()
    host.cache("1:8.2.2+ds-0ubuntu1")
    line = host.start()
    assert "cached=yes" not in line and "qemu=ubuntu" in line
    os.unlink(qemucaps.cache_file(EMULATOR, str(host.caps)))
    line = host.start()
    assert "cached=yes" not in line and "qemu=unknown" in line


def test_a_changed_package_is_never_answered_from_the_digest(host, monkeypatch):
    first = host.start()
    monkeypatch.setattr(digest, "__version__", "99.0")
    assert host.start() == first  # a miss: the same decision, evaluated again
    assert host.start() == first + " cached=yes"


def test_an_edited_module_is_a_new_package(tmp_path):
    tree = tmp_path / "virtxml_cpu"
    (tree / "flavours").mkdir(parents=True)
    (tree / "engine.py").write_text("x = 1\n")
    (tree / "flavours" / "upstream.py").write_text("y = 1\n")
    before = digest.package_identity(str(tree))
    os.utime(tree / "flavours" / "upstream.py", ns=(1, 1))
    assert digest.package_identity(str(tree)) != before


@pytest.mark.parametrize("damage", ["flip", "truncate", "link", "foreign", "group-writable"])
def test_a_bad_entry_is_a_miss(host, damage):
    first = host.start()
    (entry,) = host.digests.iterdir()
    raw = entry.read_bytes()
    if damage == "flip":
        entry.write_bytes(raw.replace(b"decision=inject", b"decision=keep").replace(b'"inject"', b'"keep"'))
    elif damage == "truncate":
        entry.write_bytes(raw[: len(raw) // 2])
    elif damage == "link":
        (host.root / "elsewhere").write_bytes(raw)
        entry.unlink()
        entry.symlink_to(host.root / "elsewhere")
    elif damage == "foreign":
        if os.geteuid() != 0:
            pytest.skip("needs root to give the entry to another user")
        os.chown(entry, 65534, 65534)
    else:
        entry.chmod(0o620)
    line = host.start()
    assert line == first  # evaluated again, not answered from the damaged entry


def test_a_directory_others_can_change_is_not_used(host):
    first = host.start()
    host.digests.chmod(0o777)  # anyone could have planted its entry: neither read nor written
    assert host.start() == first and host.start() == first
    host.digests.chmod(0o700)
    assert host.start() == first + " cached=yes"


def test_the_store_is_bounded(host, monkeypatch):
    monkeypatch.setattr(digest, "MAX_ENTRIES", 3)
    for i in range(6):
        host.start(XML.replace(b"<name>scratch</name>", b"<name>s%d</name>" % i), name=f"s{i}")
    assert len(list(host.digests.iterdir())) <= 3


def test_enforce_refuses_from_the_digest_too(host, capsys):
    host.configure()
    host.config.write_text(host.config.read_text().replace('mode = "audit"', 'mode = "enforce"'))
    for cached in (False, True):
        rc = hookentry.main(["", str(host.config), str(host.digests), "scratch", "prepare", "begin", "-"],
                            stdin=io.BytesIO(XML))
        line = host.sock.recv(65536).decode()
        assert rc == 1 and "result=refused" in line and ("cached=yes" in line) == cached
        assert "refusing to start 'scratch'" in capsys.readouterr().err


def test_the_hit_path_imports_neither_lxml_nor_the_tables(host, tmp_path):
    """Through the rendered front, as libvirt runs it: the second start imports no lxml, no rule table, no
    typing, no regular expression engine."""
    from virtxml_cpu import hookinstall

    wrap = tmp_path / "python-importtime"
    wrap.write_text(f"#!/bin/sh\nexec {sys.executable} -X importtime \"$@\"\n")
    wrap.chmod(0o755)
    front = tmp_path / "hook"
    front.write_text(hookinstall.render(hookinstall.template(), str(wrap), hookinstall.PACKAGE_PARENT, "audit",
                                        str(host.config), hookinstall.lib_dirs(), str(host.digests)))
    front.chmod(0o755)
    env = {"LC_ALL": "C", "PATH": "/usr/bin:/bin", "HOME": "/root"}
    runs = [subprocess.run([str(front), "scratch", "prepare", "begin", "-"], input=XML, capture_output=True,
                           env=env, timeout=60) for _ in range(2)]
    lines = [host.sock.recv(65536).decode() for _ in runs]
    assert "cached=yes" not in lines[0] and lines[1].endswith(" cached=yes")
    modules = {line.rsplit("|", 1)[-1].strip() for line in runs[1].stderr.decode().splitlines() if "|" in line}
    assert "virtxml_cpu.digest" in modules
    assert not {"lxml", "lxml.etree", "virtxml_cpu.engine", "virtxml_cpu.flavours", "virtxml_cpu.properties",
                "typing", "re", "tomllib", "tomli", "toml", "json"} & modules, sorted(modules)


def test_the_entry_keeps_the_limits_and_names_of_the_modules_it_avoids():
    assert hookentry.MAX_DEFINITION_BYTES == xmlio.MAX_INPUT_BYTES
    assert hookact.OWN_NS == domain.OWN_NS
    assert (ROOT / "virtxml_cpu" / "flavours").is_dir()  # package_identity's second directory
