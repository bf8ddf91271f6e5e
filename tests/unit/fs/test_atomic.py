"""One atomic writer (atomic.replace_at) behind the spool's entries, the capabilities digest, the verified
record and `-o`: a process killed at any step leaves the old file or the new one, whole; the next write
completes and leaves no temporary file; the new file is synced before the rename, its directory after."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import types
from pathlib import Path

import pytest

from virtxml_cpu.fs import files
from virtxml_cpu.host import caps_cache as host_caps_cache
from virtxml_cpu.hook import spool
from virtxml_cpu.verify import record

from tests.support import ROOT
from tests.support.qemu import caps_cache

UUID = "0b7e2d1c-6a51-4f0e-8d7b-3c2f9e1a4b66"
EMULATOR = "/usr/bin/qemu-system-x86_64"
OLD_PACKAGE, NEW_PACKAGE = "Debian 1:8.2.2+ds-0ubuntu1.4", "Debian 1:8.2.2+ds-0ubuntu1.5-longer"
AS_ROOT = os.geteuid() == 0


def _json(raw: bytes):
    try:
        return json.loads(raw)
    except ValueError:
        return None


class Writer:
    """One writer: `old(d)` leaves the old file, `new(d)` replaces it; `state(bytes)` says which one a
    file's bytes are ("old", "new") or None for anything else (a part, garbage)."""

    def __init__(self, name, old, new, target, state):
        self.name, self.old, self.new, self.target, self.state = name, old, new, target, state


def _spool_state(raw):
    d = _json(raw)
    return {"old": "old", "new": "new"}.get(d.get("domain")) if isinstance(d, dict) and d.get("uuid") == UUID else None


def _digest_setup(d: Path, package: str) -> None:
    caps_cache(d / "caps", EMULATOR, package)
    facts, why = host_caps_cache.lookup(EMULATOR, str(d / "caps"), str(d / "digests"))  # parses, writes the digest
    assert not why and facts.qemu_build == "ubuntu", why


def _digest_target(d: Path) -> Path:
    (f,) = (d / "digests").glob("*.json")
    return f


def _digest_state(raw):
    d = _json(raw)
    return {OLD_PACKAGE: "old", NEW_PACKAGE: "new"}.get(d.get("package")) if isinstance(d, dict) else None


def _record(d: Path, key: str) -> None:
    o = types.SimpleNamespace(binary=types.SimpleNamespace(key=key), checks=3,
                              host=types.SimpleNamespace(qemu_build="upstream"))
    note = record.write_record(o, str(d / "lib" / "record.json"))
    assert note.startswith("recorded"), note


def _record_state(raw):
    d = _json(raw)
    keys = set(d.get("verified", {})) if isinstance(d, dict) and d.get("format") == 1 else None
    return {frozenset({"a"}): "old", frozenset({"a", "b"}): "new"}.get(frozenset(keys) if keys is not None else None)


OLD_XML, NEW_XML = b"<domain>old</domain>\n" * 50, b"<domain>new</domain>\n" * 80

WRITERS = [
    Writer("spool entry", lambda d: spool.write(str(d / "spool"), UUID, {"domain": "old"}),
           lambda d: spool.write(str(d / "spool"), UUID, {"domain": "new"}),
           lambda d: d / "spool" / f"{UUID}.json", _spool_state),
    Writer("capabilities digest", lambda d: _digest_setup(d, OLD_PACKAGE), lambda d: _digest_setup(d, NEW_PACKAGE),
           _digest_target, _digest_state),
    Writer("-o output", lambda d: files.write_output(str(d / "out.xml"), OLD_XML, []),
           lambda d: files.write_output(str(d / "out.xml"), NEW_XML, []), lambda d: d / "out.xml",
           {OLD_XML: "old", NEW_XML: "new"}.get),
]
if AS_ROOT:  # the record is root's alone
    WRITERS.append(Writer("verified record", lambda d: (d.chmod(0o755), _record(d, "a")), lambda d: _record(d, "b"),
                          lambda d: d / "lib" / "record.json", _record_state))

# Where a process can die: in the middle of writing the temporary file (half of it written), before its
# fsync, before the rename, before the directory's fsync.
DEATHS = [("write", 1), ("fsync", 1), ("replace", 1), ("fsync", 2)]


def _die_at(call: str, n: int, action) -> int:
    """Run `action` in a child that dies (os._exit: no cleanup, as SIGKILL) at the n-th os.`call`."""
    pid = os.fork()
    if pid == 0:
        code = 0
        try:
            real, seen = getattr(os, call), [0]

            def dying(*args, **kwargs):
                seen[0] += 1
                if seen[0] == n:
                    if call == "write":
                        real(args[0], bytes(args[1])[: max(1, len(args[1]) // 2)])
                    os._exit(137)
                return real(*args, **kwargs)

            setattr(os, call, dying)
            action()
        except BaseException:  # noqa: BLE001 - the parent looks at the files
            code = 1
        finally:
            os._exit(code)
    return os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])


def crash_matrix(directory: str) -> dict:
    """Each writer killed at each step: the file is old or new and whole, and the next write completes with
    no temporary file left. Runs in a fresh interpreter (a fork of the test process could inherit locks
    held by other threads)."""
    seen: dict[str, list[str]] = {}
    for w in WRITERS:
        for call, n in DEATHS:
            d = Path(directory) / f"{w.name.replace(' ', '-')}-{call}-{n}"
            d.mkdir(mode=0o700)
            w.old(d)
            assert w.state(w.target(d).read_bytes()) == "old"
            code = _die_at(call, n, lambda: w.new(d))
            state = w.state(w.target(d).read_bytes())
            assert code == 137 and state in ("old", "new"), (w.name, call, n, code, state)
            seen.setdefault(w.name, []).append(state)
            w.new(d)  # the next run
            assert w.state(w.target(d).read_bytes()) == "new", (w.name, call, n)
            left = [p for p in d.rglob(".virtxml-cpu.*")]
            assert not left, (w.name, call, n, left)
    return seen


def test_a_writer_killed_at_any_step_leaves_the_old_or_the_new_file_whole(tmp_path):
    r = subprocess.run([sys.executable, "-c", "import json; from tests.unit.fs.test_atomic import crash_matrix; "
                        f"print(json.dumps(crash_matrix({str(tmp_path)!r})))"],
                       capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    seen = json.loads(r.stdout.splitlines()[-1])
    assert set(seen) == {w.name for w in WRITERS}
    for name, states in seen.items():  # a death before the rename keeps the old file, after it the new one
        assert states == ["old", "old", "old", "new"], (name, states)
    if not AS_ROOT:
        pytest.skip("the verified record is root's: its writer was not tried (not root)")


@pytest.mark.parametrize("w", WRITERS, ids=lambda w: w.name)
def test_the_new_file_is_synced_before_its_rename_and_its_directory_after(w, tmp_path, monkeypatch):
    w.old(tmp_path)
    events = []
    fsync, replace = os.fsync, os.replace

    def recording_fsync(fd):
        st = os.fstat(fd)
        events.append(("fsync", "dir" if os.path.stat.S_ISDIR(st.st_mode) else "file", (st.st_dev, st.st_ino)))
        return fsync(fd)

    def recording_replace(src, dst, **kw):
        replace(src, dst, **kw)
        events.append(("replace", dst, None))

    monkeypatch.setattr(os, "fsync", recording_fsync)
    monkeypatch.setattr(os, "replace", recording_replace)
    w.new(tmp_path)
    target = w.target(tmp_path)
    st, dst = target.stat(), os.stat(target.parent)
    renamed = [i for i, e in enumerate(events) if e[0] == "replace" and os.path.basename(e[1]) == target.name]
    assert len(renamed) == 1, events
    (at,) = renamed
    assert ("fsync", "file", (st.st_dev, st.st_ino)) in events[:at], events  # the very file, before
    assert ("fsync", "dir", (dst.st_dev, dst.st_ino)) in events[at:], events  # its directory, after
