"""The hook's log as a test reads it: a datagram socket bound where the config's `syslog_socket` points."""

from __future__ import annotations

import socket


def bound(path: str, timeout: float) -> socket.socket:
    """A datagram socket at `path` that waits at most `timeout` seconds for each line."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind(path)
    sock.settimeout(timeout)
    return sock


def drain(sock: socket.socket) -> list[str]:
    """Every datagram waiting on the socket (read until its timeout), in order."""
    out = []
    while True:
        try:
            out.append(sock.recv(65536).decode())
        except (socket.timeout, BlockingIOError):
            return out
