"""The hook run as libvirt runs it, everything it reads in a temporary directory: a definition, a config,
libvirt's capabilities cache, the decision digest and a log socket."""

from __future__ import annotations

import io
import os
import socket

from tests.support import FIXTURES
from virtxml_cpu.hook import entry as hook_entry
from virtxml_cpu.host import caps_cache

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
        monkeypatch.setattr(caps_cache, "CACHE_DIR", str(self.caps))
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
                               f'syslog_socket = "{self.sock_path}"\nlibvirt_config_dir = ""\n')

    def cache(self, package: str) -> None:
        path = caps_cache.cache_file(EMULATOR, str(self.caps))
        tmp = path + ".new"
        with open(tmp, "w") as fh:
            fh.write(CAPS.format(package=package))
        os.replace(tmp, path)  # as libvirt rewrites it

    def start(self, xml: bytes = XML, op: str = "prepare", name: str = "scratch") -> str:
        rc = hook_entry.main(["enforce", str(self.config), str(self.digests), name, op, "begin", "-"],
                            stdin=io.BytesIO(xml))
        assert rc == 0
        return self.sock.recv(65536).decode().split(": ", 1)[1]
