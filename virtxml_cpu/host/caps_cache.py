"""What libvirt already knows about a QEMU binary: its capabilities cache.

libvirtd probes every emulator once and keeps the answer as root-owned XML in
/var/cache/libvirt/qemu/capabilities/<sha256 of the emulator path>.xml: `<emulator>`, `<version>` (7002022
is 7.2.22), `<package>` (the build: "Debian 1:7.2+dfsg-7+deb12u18+b3", Ubuntu's says "ubuntu") and every
`<machine name alias default>`. The hook learns the QEMU build from here instead of running anything a
domain definition names. The parser is pure; the reader trusts only root-owned files nobody else can write.
"""

from __future__ import annotations

import os
import stat
from collections import namedtuple

from ..core.hostfacts import HostFacts, decode_libvirt_version, release_facts
from ..fs.atomic import replace_at
from ..fs.trusted import Untrusted, check_private_dir, check_trusted, open_private_dir, read_regular
from ..xml.parse import parse_xml

try:  # the builtin SHA-256: hashlib would load OpenSSL, ~7 ms on the hook's prepare path
    from _sha256 import sha256
except ImportError:  # Python 3.12+
    try:
        from _sha2 import sha256
    except ImportError:
        from hashlib import sha256

CACHE_DIR = "/var/cache/libvirt/qemu/capabilities"
MAX_CACHE_BYTES = 8 * 1024 * 1024  # about 220 KiB today (every CPU model); a runaway file is refused
DIGEST_BYTES = 256 * 1024
DIGEST_FORMAT = 1


class Machine(namedtuple("Machine", "name alias default")):

    __slots__ = ()  # a plain named tuple: its fields, annotated below for readers
    name: str
    alias: str | None
    default: bool


class QemuCaps(namedtuple("QemuCaps", "emulator version package machines")):

    __slots__ = ()  # a plain named tuple: its fields, annotated below for readers
    emulator: str
    version: tuple[int, int, int] | None
    package: str
    machines: tuple[Machine, ...]

    def host_facts(self, what: str) -> HostFacts:
        """The machine list and aliases, the release, and the build its package string names."""
        aliases = {m.alias: m.name for m in self.machines if m.alias}
        default = next((m.name for m in self.machines if m.default), None)
        if default:
            aliases[""] = default
        names = frozenset(m.name for m in self.machines) | (frozenset(aliases) - {""})
        said = release_facts(self.version, self.package, what) if self.version else HostFacts(sources=(what,))
        return said._replace(aliases=aliases, machines=names)


def parse(data: bytes) -> QemuCaps:
    """A capabilities cache file -> emulator, version, package, KVM machine types (BadInput or ValueError
    when it is not one)."""
    root = parse_xml(data, "QEMU capabilities cache").getroot()
    if root.tag != "qemuCaps":
        raise ValueError("not a libvirt QEMU capabilities cache (<qemuCaps>)")
    version = decode_libvirt_version(root.findtext("version") or "")
    machines = [m for m in root.iterfind("machine") if m.get("type", "kvm") == "kvm"] or list(root.iterfind("machine"))
    return QemuCaps(
        emulator=(root.findtext("emulator") or "").strip(),
        version=version,
        package=(root.findtext("package") or "").strip(),
        machines=tuple(Machine(m.get("name", ""), m.get("alias"), m.get("default") == "yes")
                       for m in machines if m.get("name")),
    )


def cache_file(emulator: str, directory: str = CACHE_DIR) -> str:
    """libvirt names each cache file by the SHA-256 of the emulator path (virFileCacheGetFileName)."""
    return os.path.join(directory, sha256(emulator.encode()).hexdigest() + ".xml")


def lookup(emulator: str | None, directory: str = CACHE_DIR, digest_dir: str | None = None) -> tuple[HostFacts, str]:
    """The facts libvirt cached for `emulator` (the domain's devices/emulator), and why they are missing
    when they are: (HostFacts(), reason). Only a root-owned directory and file nobody else can write count,
    and the file must say it describes exactly this emulator. Owned by root, or by the user we are (who
    could write it anyway): as root, root's alone.

    With `digest_dir`, what was parsed is kept there (a few KiB of JSON per emulator, keyed by the cache
    file's device, inode, size and mtime), so a guest start does not parse ~220 KiB of XML each time."""
    if not emulator or not os.path.isabs(emulator) or "\0" in emulator:
        return HostFacts(), "the domain names no absolute emulator path"
    path = cache_file(emulator, directory)
    owners = (0, os.geteuid())
    try:
        why = check_trusted(os.stat(directory), owners)
        if why:
            return HostFacts(), f"{directory} {why}"
        st = os.lstat(path)
        if not stat.S_ISREG(st.st_mode):
            return HostFacts(), f"{path} is not a regular file"
        why = check_trusted(st, owners)
        if why:
            return HostFacts(), f"{path} {why}"
        key = [st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns]
        caps = _load_digest(digest_dir, path, key) if digest_dir else None
        if caps is None:
            data, st = read_regular(path, MAX_CACHE_BYTES)
            why = check_trusted(st, owners)
            if why:
                return HostFacts(), f"{path} {why}"
            caps = parse(data)
            if digest_dir and key == [st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns]:
                _save_digest(digest_dir, path, key, caps)
    except FileNotFoundError:
        return HostFacts(), f"libvirt has no capabilities cached for {emulator}"
    except (OSError, Untrusted) as e:
        return HostFacts(), f"{path}: {e.strerror or e}"
    except Exception as e:  # noqa: BLE001 - a malformed cache file is only a missing fact
        return HostFacts(), f"{path}: {e}"
    if caps.emulator != emulator:
        return HostFacts(), f"{path} describes {caps.emulator}, not {emulator}"
    return caps.host_facts(f"libvirt's capabilities cache for {emulator}"), ""


def emulators(arch: str = "x86_64", directory: str | None = None) -> list[str]:
    """The emulators libvirt has probed for `arch`, as its cache names them (sorted): only from a directory
    and files lookup() would trust, each file named after the emulator it says it describes. Empty when
    the cache cannot be read (not root, no libvirt)."""
    directory = directory or CACHE_DIR
    owners = (0, os.geteuid())
    try:
        if check_trusted(os.stat(directory), owners):
            return []
        names = sorted(n for n in os.listdir(directory) if n.endswith(".xml"))
    except OSError:
        return []
    found = []
    for name in names:
        path = os.path.join(directory, name)
        try:
            data, st = read_regular(path, MAX_CACHE_BYTES)
            root = parse_xml(data, "QEMU capabilities cache").getroot()
        except Exception:  # noqa: BLE001 - an unreadable or malformed file names no emulator
            continue
        emulator = (root.findtext("emulator") or "").strip()
        if (check_trusted(st, owners) is None and (root.findtext("arch") or "").strip() == arch
                and os.path.isabs(emulator) and cache_file(emulator, directory) == path):
            found.append(emulator)
    return found


def _digest_path(digest_dir: str, path: str) -> str:
    return os.path.join(digest_dir, os.path.basename(path)[:-4] + ".json")


def _load_digest(digest_dir: str, path: str, key: list[int]) -> QemuCaps | None:
    """The digest kept for `path` when it was made from exactly this file (same key), in a directory and
    file only the effective user can write; None for anything else (then the cache file is parsed)."""
    try:
        if check_private_dir(digest_dir):
            return None
        raw, st = read_regular(_digest_path(digest_dir, path), DIGEST_BYTES)
        if st.st_uid != os.geteuid() or check_trusted(st, (os.geteuid(),)):
            return None
        d = _json_loads(raw.decode("utf-8"))
        if d.get("key") != key or d.get("format") != DIGEST_FORMAT:
            return None
        version = tuple(d["version"]) if d["version"] is not None else None
        caps = QemuCaps(d["emulator"], version, d["package"],
                        tuple(Machine(n, a, dflt) for n, a, dflt in d["machines"]))
        ok = (isinstance(caps.emulator, str) and isinstance(caps.package, str)
              and (version is None or (len(version) == 3 and all(type(v) is int for v in version)))
              and all(isinstance(m.name, str) and isinstance(m.alias, (str, type(None))) and type(m.default) is bool
                      for m in caps.machines))
        return caps if ok else None
    except (OSError, ValueError, TypeError, KeyError, AttributeError, RecursionError):
        return None


def _json_loads(text: str):
    """json.loads through the C scanner, without importing the json package (the hook's prepare path)."""
    try:
        from _json import make_scanner
    except ImportError:  # pragma: no cover - an interpreter without the C accelerator
        import json

        return json.loads(text)

    class Context:
        strict, object_hook, object_pairs_hook, memo = True, None, None, {}
        parse_float, parse_int = float, int

        @staticmethod
        def parse_constant(name):
            raise ValueError(f"{name} is not a number here")

    start = len(text) - len(text.lstrip(" \t\n\r"))
    try:
        value, end = make_scanner(Context)(text, start)
    except StopIteration:
        raise ValueError("not JSON") from None
    if text[end:].strip(" \t\n\r"):
        raise ValueError("extra data after the JSON value")
    return value


def _save_digest(digest_dir: str, path: str, key: list[int], caps: QemuCaps) -> None:
    """Best effort: a private directory (0700, refused when it is a link or others can write it), the file
    replaced whole (atomic.replace_at)."""
    import json

    try:
        at = open_private_dir(digest_dir)  # ancestors checked, then created without following links
    except OSError:
        return
    try:
        replace_at(at, os.path.basename(_digest_path(digest_dir, path)), json.dumps(
            {"format": DIGEST_FORMAT, "key": key, "emulator": caps.emulator, "version": caps.version,
             "package": caps.package, "machines": caps.machines}).encode())
    except OSError:
        pass
    finally:
        os.close(at)
