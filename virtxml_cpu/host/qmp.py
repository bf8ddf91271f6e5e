"""A minimal QMP client (QEMU Machine Protocol, docs/interop/qmp-spec.rst): the greeting, the capabilities
handshake, and commands whose replies are matched by id; asynchronous events are skipped. Standard library
only, every read bounded by a deadline, so a stuck QEMU cannot hang the caller."""

from __future__ import annotations

import json
import os
import socket
import time
from typing import Any

MAX_LINE = 16 * 1024 * 1024  # a query-machines reply with compat-props is ~1 MiB on QEMU 10


class QMPError(Exception):
    """QEMU answered a command with an error (its class and description)."""

    def __init__(self, command: str, klass: str, desc: str):
        super().__init__(f"{command}: {klass}: {desc}")
        self.command, self.klass, self.desc = command, klass, desc


class QMPClosed(Exception):
    """The monitor went away, timed out or spoke something that is not QMP."""


class QMP:
    """One QMP connection over a connected stream socket (unix, or one end of a socketpair in tests)."""

    def __init__(self, sock: socket.socket, timeout: float = 10.0):
        self.sock = sock
        self.timeout = timeout
        self.greeting: dict | None = None
        self._buf = b""
        self._next_id = 0

    @classmethod
    def connect_unix(cls, path: str, timeout: float = 10.0, alive=lambda: True) -> "QMP":
        """Connect to a QMP server socket that may not exist yet (QEMU is starting): retry until `timeout`
        or until `alive()` says the server process is gone."""
        deadline = time.monotonic() + timeout
        while True:
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            try:
                sock.settimeout(max(0.05, deadline - time.monotonic()))
                sock.connect(path)
                return cls(sock, timeout)
            except OSError as e:
                sock.close()
                if not alive():
                    raise QMPClosed("QEMU exited before its monitor answered") from None
                if time.monotonic() >= deadline:
                    raise QMPClosed(f"no QMP monitor at {path} after {timeout:g} s ({os.strerror(e.errno or 0)})") \
                        from None
                time.sleep(0.02)

    def close(self) -> None:
        try:
            self.sock.close()
        except OSError:
            pass

    def __enter__(self) -> "QMP":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def handshake(self) -> dict:
        """Read the greeting and leave capabilities-negotiation mode; returns the greeting's "QMP" part."""
        msg = self._read(time.monotonic() + self.timeout)
        if "QMP" not in msg:
            raise QMPClosed(f"not a QMP greeting: {str(msg)[:200]}")
        self.greeting = msg["QMP"]
        self.execute("qmp_capabilities")
        return self.greeting

    def execute(self, command: str, arguments: dict | None = None) -> Any:
        """Run one command; its "return" value, or QMPError. Replies to other ids and events are skipped."""
        self._next_id += 1
        ident = f"vxc-{self._next_id}"
        msg: dict[str, Any] = {"execute": command, "id": ident}
        if arguments:
            msg["arguments"] = arguments
        deadline = time.monotonic() + self.timeout
        try:
            self.sock.settimeout(self.timeout)
            self.sock.sendall(json.dumps(msg).encode() + b"\n")
        except OSError as e:
            raise QMPClosed(f"{command}: cannot send: {e.strerror or e}") from None
        while True:
            reply = self._read(deadline)
            if "event" in reply or reply.get("id") != ident:
                continue
            if "error" in reply:
                err = reply["error"] if isinstance(reply["error"], dict) else {}
                raise QMPError(command, str(err.get("class", "")), str(err.get("desc", "")))
            if "return" not in reply:
                raise QMPClosed(f"{command}: a reply without return or error: {str(reply)[:200]}")
            return reply["return"]

    def _read(self, deadline: float) -> dict:
        """The next JSON object (one per line, as QEMU writes them; blank lines skipped)."""
        line = b""
        while not line.strip():
            line = self._line(deadline)
        try:
            msg = json.loads(line)
        except ValueError:
            raise QMPClosed(f"not JSON from the monitor: {line[:200]!r}") from None
        if not isinstance(msg, dict):
            raise QMPClosed(f"not a QMP message: {line[:200]!r}")
        return msg

    def _line(self, deadline: float) -> bytes:
        while b"\n" not in self._buf:
            left = deadline - time.monotonic()
            if left <= 0:
                raise QMPClosed(f"QEMU did not answer within {self.timeout:g} s")
            if len(self._buf) > MAX_LINE:
                raise QMPClosed("a QMP message longer than 16 MiB")
            try:
                self.sock.settimeout(left)
                chunk = self.sock.recv(65536)
            except socket.timeout:
                raise QMPClosed(f"QEMU did not answer within {self.timeout:g} s") from None
            except OSError as e:
                raise QMPClosed(f"monitor connection: {e.strerror or e}") from None
            if not chunk:
                raise QMPClosed("QEMU closed the monitor connection")
            self._buf += chunk
        line, self._buf = self._buf.split(b"\n", 1)
        return line
