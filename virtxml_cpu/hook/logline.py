"""Log lines that no value can forge: every field is quoted when it is not a plain token, and every line
has its control characters escaped before it is sent, so a domain name with a newline stays one line."""

from __future__ import annotations

import os
import sys

import _socket  # socket's C core: the hook does not pay for enum/selectors to send one datagram

from ..errors import shown

try:  # what json.dumps does to a str, without importing the json package
    from _json import encode_basestring_ascii as _quoted
except ImportError:  # pragma: no cover - an interpreter without the C accelerator
    from json.encoder import py_encode_basestring_ascii as _quoted

SYSLOG_SOCKET = "/dev/log"
SEND_TIMEOUT = 2.0  # seconds
MAX_FIELD = 512  # characters of one field value
_PLAIN = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.:/@+,-"  # a token of 1-256 of these


def field(value) -> str:
    """One log field value: plain tokens as they are, anything else JSON-quoted (spaces, quotes, `=`,
    control or non-ASCII characters escaped); cut at MAX_FIELD characters, so that no value can push a
    line past what syslog takes in one datagram (an enforce refusal is then lost, not just long)."""
    if not isinstance(value, str):
        return str(value)
    if len(value) > MAX_FIELD:
        value = value[:MAX_FIELD] + "..."
    return value if 0 < len(value) <= 256 and not value.strip(_PLAIN) else _quoted(value)  # no re to import


def kv(**fields) -> str:
    return " ".join(f"{k}={field(v)}" for k, v in fields.items())


class Log:
    """One line per event to syslog/journald through a datagram socket, else to stderr."""

    def __init__(self, path: str = SYSLOG_SOCKET):
        self.path = path

    def __call__(self, message: str, warning: bool = False, fallback: bool = True) -> None:
        message = shown(message)  # whatever a caller put in, it is one line
        pri = 8 + (4 if warning else 6)  # facility user, severity warning/info
        line = f"<{pri}>virtxml-cpu[{os.getpid()}]: {message}"
        try:
            s = _socket.socket(_socket.AF_UNIX, _socket.SOCK_DGRAM)
            try:
                s.settimeout(SEND_TIMEOUT)  # a syslog that stopped reading never holds a guest start
                s.connect(self.path)
                s.send(line.encode("utf-8", "replace"))
            finally:
                s.close()
        except OSError:
            if fallback:
                sys.stderr.write(f"virtxml-cpu: {message}\n")
