"""Host-wide settings from a TOML file (default /etc/virtxml-cpu/config.toml).

    policy = "compat"        # compat | never | always | numa
    style = "pvspinlock"     # pvspinlock | cpu-feature
    qemu_flavour = "ubuntu"  # upstream | ubuntu | rhel (default: detected)
    [hook]
    mode = "audit"           # audit | enforce | queue
    spool = "/var/lib/virtxml-cpu/pending"
    syslog_socket = "/dev/log"
"""

from __future__ import annotations

import os
import tomllib
from dataclasses import dataclass

from .errors import BadInput
from .flavours import NAMES as FLAVOURS
from .policy import POLICIES, STYLES

DEFAULT_PATH = "/etc/virtxml-cpu/config.toml"
HOOK_MODES = ("audit", "enforce", "queue")
DEFAULT_SPOOL = "/var/lib/virtxml-cpu/pending"


@dataclass(frozen=True)
class Config:
    policy: str | None = None
    style: str = "pvspinlock"
    hook_mode: str | None = None  # None: the mode `hook install` baked in, else audit
    spool: str = DEFAULT_SPOOL
    syslog_socket: str | None = None
    path: str | None = None
    qemu_flavour: str | None = None


def parse(text: str, path: str = "<config>") -> Config:
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise BadInput(f"config {path}: {e}") from None
    hook = data.get("hook", {})
    if not isinstance(hook, dict):
        raise BadInput(f"config {path}: [hook] must be a table")
    cfg = Config(data.get("policy"), data.get("style", "pvspinlock"), hook.get("mode"),
                 hook.get("spool", DEFAULT_SPOOL), hook.get("syslog_socket"), path, data.get("qemu_flavour"))
    for key, value, allowed in (("policy", cfg.policy, POLICIES + (None,)), ("style", cfg.style, STYLES),
                                ("qemu_flavour", cfg.qemu_flavour, FLAVOURS + (None,)),
                                ("hook.mode", cfg.hook_mode, HOOK_MODES + (None,))):
        if value not in allowed:
            raise BadInput(f"config {path}: {key} = {value!r} is not one of {', '.join(a for a in allowed if a)}")
    unknown = set(data) - {"policy", "style", "hook", "qemu_flavour"} | set(hook) - {"mode", "spool", "syslog_socket"}
    if unknown:
        raise BadInput(f"config {path}: unknown setting(s) {', '.join(sorted(unknown))}")
    return cfg


def load(path: str | None) -> Config:
    """Read the config; an explicitly named file must exist, the default one may be absent."""
    explicit = path is not None or "VIRTXML_CPU_CONFIG" in os.environ
    path = path or os.environ.get("VIRTXML_CPU_CONFIG", DEFAULT_PATH)
    try:
        with open(path, encoding="utf-8") as fh:
            return parse(fh.read(), path)
    except FileNotFoundError:
        if explicit:
            raise BadInput(f"config {path} does not exist") from None
        return Config()
    except (OSError, UnicodeDecodeError) as e:
        raise BadInput(f"config {path}: {e}") from None
