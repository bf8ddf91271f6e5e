"""Host-wide settings from a TOML file (default constants.CONFIG_PATH).

    policy = "compat"        # compat | never | always | numa
    style = "pvspinlock"     # pvspinlock | cpu-feature (default constants.DEFAULT_STYLE)
    qemu_build = "ubuntu"  # upstream | ubuntu | rhel (default: detected)
    qemu_version = "8.2.2"   # the QEMU release (default: detected)
    [hook]
    mode = "audit"           # audit | enforce | queue
    spool = "/srv/pending"   # default constants.SPOOL_DIR
    syslog_socket = "/dev/log"
    libvirt_config_dir = "/srv/qemu"  # where libvirt keeps persistent definitions ("": do not look; default
                                      # constants.LIBVIRT_CONFIG_DIR)
"""

from __future__ import annotations

import os

from ..constants import CONFIG_PATH, LIBVIRT_CONFIG_DIR, MAX_SECONDS, SPOOL_DIR
from ..errors import BadInput, EnvironmentProblem, shown
from ..fs.trusted import Untrusted, check_trusted, read_regular, resolve_trusted

HOOK_MODES = ("audit", "enforce", "queue")


class Config:
    """The settings (a plain class, not a typing.NamedTuple: the hook's repeat starts import this module
    and pay for no typing machinery). Fields as named in __slots__; `_replace` as a named tuple's."""

    __slots__ = ("policy", "style", "hook_mode", "spool", "syslog_socket", "path", "qemu_build", "timeout",
                 "host_timeout", "qemu_version", "libvirt_config_dir")

    def __init__(self, policy: str | None = None, style: str | None = None,  # None: precedence.style's default
                 hook_mode: str | None = None,  # None: not set here (precedence.hook_mode)
                 spool: str = SPOOL_DIR, syslog_socket: str | None = None, path: str | None = None,
                 qemu_build: str | None = None,
                 timeout: float | None = None,  # seconds a libvirt host may stay silent (connecting, any call)
                 host_timeout: float | None = None,  # seconds for a whole host (None: precedence.timeouts)
                 qemu_version: str | None = None,  # the QEMU release the guests run on, X.Y[.Z] (default: detected)
                 libvirt_config_dir: str = LIBVIRT_CONFIG_DIR):  # the hook's transient check ("": none)
        self.policy, self.style, self.hook_mode, self.spool = policy, style, hook_mode, spool
        self.syslog_socket, self.path, self.qemu_build, self.timeout = syslog_socket, path, qemu_build, timeout
        self.host_timeout, self.qemu_version = host_timeout, qemu_version
        self.libvirt_config_dir = libvirt_config_dir

    def _values(self) -> tuple:
        return tuple(getattr(self, f) for f in self.__slots__)

    def _replace(self, **changes) -> "Config":
        return Config(**dict(zip(self.__slots__, self._values()), **changes))

    def __eq__(self, other) -> bool:
        return type(other) is Config and self._values() == other._values()

    def __hash__(self) -> int:
        return hash(self._values())

    def __repr__(self) -> str:
        return "Config(" + ", ".join(f"{f}={getattr(self, f)!r}" for f in self.__slots__) + ")"


MAX_CONFIG_BYTES = 64 * 1024  # a config is a few lines; /dev/zero or a log file by mistake is not
KEYS = {"policy": str, "style": str, "qemu_build": str, "hook": dict, "timeout": (int, float),
        "host_timeout": (int, float), "qemu_version": str}
HOOK_KEYS = {"mode": str, "spool": str, "syslog_socket": str, "libvirt_config_dir": str}


def parse(text: str, path: str = "<config>") -> Config:
    """The settings `text` holds. It is read against TOML 1.0's grammar first (toml_check): what tomllib
    refuses is refused whichever reader this Python has, and a reader that reads it otherwise is refused."""
    from . import toml_read  # here: the hook's repeat starts read the file, never parse it (nor import re)

    data = toml_read.read(text, path)
    if not data:
        return Config(path=path)  # comments only (the packaged config): nothing for a reader to read
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
    where = hook.get("libvirt_config_dir", LIBVIRT_CONFIG_DIR)
    if where and (not where.startswith("/") or "\0" in where):
        raise BadInput(f"config {path}: hook.libvirt_config_dir must be an absolute path, or \"\" to not look")
    for key in ("timeout", "host_timeout"):
        if key in data and not 0 < data[key] <= MAX_SECONDS:
            raise BadInput(f"config {path}: {key} must be above 0 and at most {MAX_SECONDS} seconds")
    from ..tables.builds.known import NAMES as BUILDS  # here: the hook's repeat starts read the file, never parse it
    from ..tables.version import is_release
    from .decision import POLICIES, STYLES

    cfg = Config(data.get("policy"), data.get("style"), hook.get("mode"),
                 hook.get("spool", SPOOL_DIR), hook.get("syslog_socket"), path, data.get("qemu_build"),
                 data.get("timeout"), data.get("host_timeout"), data.get("qemu_version"), where)
    if cfg.qemu_version is not None and not is_release(cfg.qemu_version):
        raise BadInput(f"config {path}: qemu_version = {cfg.qemu_version!r} is not a QEMU release X.Y[.Z]")
    for key, value, allowed in (("policy", cfg.policy, POLICIES + (None,)), ("style", cfg.style, STYLES + (None,)),
                                ("qemu_build", cfg.qemu_build, BUILDS + (None,)),
                                ("hook.mode", cfg.hook_mode, HOOK_MODES + (None,))):
        if value not in allowed:
            raise BadInput(f"config {path}: {key} = {value!r} is not one of {', '.join(a for a in allowed if a)}")
    return cfg


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


def load(path: str | None, environ=os.environ) -> Config:
    """Read the config; an explicitly named file must exist, the default one may be absent.

    Errors map as for input files: missing or not a regular file (a directory, FIFO or device: opened
    without blocking, never waited on) is bad usage (2), unreadable is the environment (3). `environ`
    names the file through VIRTXML_CPU_CONFIG; the hook passes {}: nothing in its environment steers it."""
    return from_raw(read_raw(path, environ), path, environ)


def from_raw(raw: bytes | None, path: str | None, environ=os.environ) -> Config:
    """The config `raw` (read_raw's bytes, None: no file) holds: the hook decides with the very bytes its
    decision digest is keyed on."""
    if raw is None:
        return Config()
    path = path or environ.get("VIRTXML_CPU_CONFIG", CONFIG_PATH)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise BadInput(f"config {shown(path)} is not UTF-8 (byte {e.start})") from None
    return parse(text, shown(path))


def read_raw(path: str | None, environ=os.environ) -> bytes | None:
    """The config file's bytes as `load` reads them (the same checks), None when the default file is
    absent; the hook keys its decision digest on them."""
    explicit = path is not None or "VIRTXML_CPU_CONFIG" in environ
    path = path or environ.get("VIRTXML_CPU_CONFIG", CONFIG_PATH)
    try:
        return read_trusted(path)
    except FileNotFoundError:
        if explicit:
            raise BadInput(f"config {shown(path)} does not exist") from None
        return None
    except Untrusted as e:  # another user's, a directory, FIFO, device (never waited on), an oversized file
        what = f"is larger than {MAX_CONFIG_BYTES // 1024} KiB" if "larger" in str(e) else str(e)
        raise BadInput(f"config {shown(path)} {what}") from None
    except OSError as e:
        reason = "permission denied" if isinstance(e, PermissionError) else e.strerror
        raise EnvironmentProblem(f"config {shown(path)}: {reason}") from None
