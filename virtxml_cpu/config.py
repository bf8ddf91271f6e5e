"""Host-wide settings from a TOML file (default /etc/virtxml-cpu/config.toml).

    policy = "compat"        # compat | never | always | numa
    style = "pvspinlock"     # pvspinlock | cpu-feature
    qemu_flavour = "ubuntu"  # upstream | ubuntu | rhel (default: detected)
    qemu_version = "8.2.2"   # the QEMU release (default: detected)
    [hook]
    mode = "audit"           # audit | enforce | queue
    spool = "/var/lib/virtxml-cpu/pending"
    syslog_socket = "/dev/log"
"""

from __future__ import annotations

import os
from typing import NamedTuple

from .errors import BadInput, EnvironmentProblem, shown
from .flavours import NAMES as FLAVOURS
from .policy import POLICIES, STYLES
from .safefs import Untrusted, check_trusted, read_regular, resolve_trusted

DEFAULT_PATH = "/etc/virtxml-cpu/config.toml"
HOOK_MODES = ("audit", "enforce", "queue")
DEFAULT_SPOOL = "/var/lib/virtxml-cpu/pending"


class Config(NamedTuple):
    policy: str | None = None
    style: str = "pvspinlock"
    hook_mode: str | None = None  # None: the mode `hook install` baked in, else audit
    spool: str = DEFAULT_SPOOL
    syslog_socket: str | None = None
    path: str | None = None
    qemu_flavour: str | None = None
    timeout: float | None = None  # seconds a libvirt host may stay silent (connecting, any call)
    host_timeout: float | None = None  # seconds for a whole host (default: 10 x timeout)
    qemu_version: str | None = None  # the QEMU release the guests run on, X.Y[.Z] (default: detected)


MAX_CONFIG_BYTES = 64 * 1024  # a config is a few lines; /dev/zero or a log file by mistake is not
KEYS = {"policy": str, "style": str, "qemu_flavour": str, "hook": dict, "timeout": (int, float),
        "host_timeout": (int, float), "qemu_version": str}
HOOK_KEYS = {"mode": str, "spool": str, "syslog_socket": str}


def parse(text: str, path: str = "<config>") -> Config:
    if all(not line.strip() or line.lstrip().startswith("#") for line in text.splitlines()):
        return Config(path=path)  # comments only (the packaged config): nothing to parse
    import tomllib  # here, not at the top: a host without settings (the hook's usual case) never pays for it

    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise BadInput(f"config {path}: {str(e).splitlines()[0]}") from None
    except RecursionError:
        raise BadInput(f"config {path}: nested too deeply") from None
    hook = data.get("hook", {})
    for table, keys, prefix in ((data, KEYS, ""), (hook if isinstance(hook, dict) else {}, HOOK_KEYS, "hook.")):
        unknown = sorted(set(table) - set(keys))
        if unknown:
            raise BadInput(f"config {path}: unknown setting(s) {', '.join(prefix + k for k in unknown)}")
        for key, want in keys.items():
            if key in table and (not isinstance(table[key], want) or isinstance(table[key], bool)):
                kind = {dict: "a table", str: "a string"}.get(want, "a number of seconds")
                raise BadInput(f"config {path}: {prefix}{key} must be {kind}, not {type(table[key]).__name__}")
    for key in ("spool", "syslog_socket"):
        if key in hook and (not hook[key] or "\0" in hook[key]):
            raise BadInput(f"config {path}: hook.{key} must be a path")
    for key in ("timeout", "host_timeout"):
        if key in data and not 0 < data[key] <= 86400:
            raise BadInput(f"config {path}: {key} must be above 0 and at most 86400 seconds")
    cfg = Config(data.get("policy"), data.get("style", "pvspinlock"), hook.get("mode"),
                 hook.get("spool", DEFAULT_SPOOL), hook.get("syslog_socket"), path, data.get("qemu_flavour"),
                 data.get("timeout"), data.get("host_timeout"), data.get("qemu_version"))
    if cfg.qemu_version is not None and not is_release(cfg.qemu_version):
        raise BadInput(f"config {path}: qemu_version = {cfg.qemu_version!r} is not a QEMU release X.Y[.Z]")
    for key, value, allowed in (("policy", cfg.policy, POLICIES + (None,)), ("style", cfg.style, STYLES),
                                ("qemu_flavour", cfg.qemu_flavour, FLAVOURS + (None,)),
                                ("hook.mode", cfg.hook_mode, HOOK_MODES + (None,))):
        if value not in allowed:
            raise BadInput(f"config {path}: {key} = {value!r} is not one of {', '.join(a for a in allowed if a)}")
    return cfg


def is_release(text: str) -> bool:
    """X.Y or X.Y.Z, ASCII digits."""
    parts = text.split(".")
    return 2 <= len(parts) <= 3 and all(p.isascii() and p.isdigit() for p in parts)


def trust_problem(path: str) -> str | None:
    """Why a config at `path` could be changed by someone but root (and this user): the file, a link to
    it, or a directory it is looked up in owned by another user or writable by group or others (a
    root-owned sticky directory excepted). A missing file is judged by the directories it would be in:
    nobody else may create it there either. None when only root (and this user) can change it."""
    owners = tuple(sorted({0, os.geteuid()}))
    real, why = resolve_trusted(path, owners, missing_ok=True)
    if why:
        return why
    try:
        st = os.stat(real)
    except FileNotFoundError:
        return None
    except OSError as e:
        return e.strerror or str(e)
    why = check_trusted(st, owners)
    return f"{why} (only root's config steers root)" if why else None


def read_trusted(path: str) -> bytes:
    """The bytes of a config only root (and this user) can change: checked by trust_problem, then read
    from the path it resolved to, without following links (nothing on the way can change)."""
    owners = tuple(sorted({0, os.geteuid()}))
    real, why = resolve_trusted(path, owners, missing_ok=True)
    if why:
        raise Untrusted(f"could be changed by another user: {why} (only root's config steers root)")
    raw, st = read_regular(real, MAX_CONFIG_BYTES)
    why = check_trusted(st, owners)
    if why:
        raise Untrusted(f"{why} (only root's config steers root)")
    return raw


def load(path: str | None) -> Config:
    """Read the config; an explicitly named file must exist, the default one may be absent.

    Errors map as for input files: missing or not a regular file (a directory, FIFO or device: opened
    without blocking, never waited on) is bad usage (2), unreadable is the environment (3)."""
    explicit = path is not None or "VIRTXML_CPU_CONFIG" in os.environ
    path = path or os.environ.get("VIRTXML_CPU_CONFIG", DEFAULT_PATH)
    try:
        raw = read_trusted(path)
    except FileNotFoundError:
        if explicit:
            raise BadInput(f"config {shown(path)} does not exist") from None
        return Config()
    except Untrusted as e:  # another user's, a directory, FIFO, device (never waited on), an oversized file
        what = f"is larger than {MAX_CONFIG_BYTES // 1024} KiB" if "larger" in str(e) else str(e)
        raise BadInput(f"config {shown(path)} {what}") from None
    except OSError as e:
        reason = "permission denied" if isinstance(e, PermissionError) else e.strerror
        raise EnvironmentProblem(f"config {shown(path)}: {reason}") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise BadInput(f"config {shown(path)} is not UTF-8 (byte {e.start})") from None
    return parse(text, shown(path))
