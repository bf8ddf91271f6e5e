"""The hook's queue of pending fixes: one JSON file per domain, <spool>/<uuid>.json.

The hook writes entries (queue mode); `apply --pending` and `watch` read them. An entry that cannot be
applied now (a transient domain, an unconfirmed or refused define) is postponed with a growing delay and
its reason recorded, instead of being retried at every pass.

Root writes here, so nobody else may steer it: the spool is a 0700 directory of the effective user (a
link, a non-directory or one others can write is refused), entries are written through
O_CREAT|O_EXCL|O_NOFOLLOW temporary files and renamed, read only when they are regular files of bounded
size (never through a link, never blocking on a FIFO), and every field is checked. One bad entry is
reported and skipped; it never stops the others.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass

from .domain import canonical_uuid
from .safefs import check_private_dir, create_temp, make_private_dir, read_regular, remove_stale_temps

MAX_EPOCH = 1e11  # seconds: about the year 5138, far past any real retry time
FIRST_DELAY = 60.0  # seconds before the first retry of a postponed entry
MAX_DELAY = 6 * 3600.0
MAX_ATTEMPTS = 10**6  # a counter past this is not ours
MAX_ENTRY_BYTES = 64 * 1024


class Refused(Exception):
    """The spool or an entry is not safe or not valid; the message says why (one line)."""


@dataclass(frozen=True)
class Entry:
    path: str
    uuid: str
    name: str | None
    attempts: int = 0
    next_try: float = 0.0  # epoch seconds
    last_error: str | None = None

    def due(self, now: float) -> bool:
        return self.next_try <= now


def write(spool: str, uuid: str, fields: dict) -> str:
    """Record a pending fix atomically (a new entry replaces an older one for the same domain)."""
    uuid = _checked_uuid(uuid)
    why = make_private_dir(spool)
    if why:
        raise Refused(f"spool {spool} {why}; refusing to write there")
    remove_stale_temps(spool)
    path = os.path.join(spool, f"{uuid}.json")
    _write_json(spool, path, dict(fields, uuid=uuid))
    return path


def entries(spool: str, warn=None) -> list[Entry]:
    """Every valid entry, oldest name first; anything else is reported through `warn` and skipped."""
    warn = warn or (lambda _m: None)
    if not os.path.lexists(spool):
        return []
    why = check_private_dir(spool)
    if why:
        warn(f"not reading the spool {spool}: it {why}")
        return []
    try:
        names = sorted(n for n in os.listdir(spool) if n.endswith(".json"))
    except OSError as e:
        warn(f"cannot read the spool {spool}: {e.strerror}")
        return []
    out = []
    for n in names:
        path = os.path.join(spool, n)
        try:
            out.append(parse_entry(path, read_regular(path, MAX_ENTRY_BYTES)[0]))
        except (OSError, ValueError, RecursionError, Refused) as e:
            warn(f"skipping spool entry {path}: {getattr(e, 'strerror', None) or e}")
    return out


def parse_entry(path: str, raw: bytes) -> Entry:
    """One entry's fields, each checked: a uuid by libvirt's grammar matching the file name, attempts a
    small non-negative integer, next_try a finite number, name and last_error strings."""
    data = json.loads(raw.decode("utf-8"))
    if not isinstance(data, dict):
        raise Refused("not a JSON object")
    uuid = _checked_uuid(data.get("uuid"))
    if os.path.basename(path) != f"{uuid}.json":
        raise Refused(f"its uuid {uuid} does not match its file name")
    attempts, next_try = data.get("attempts", 0), data.get("next_try", 0.0)
    if isinstance(attempts, bool) or not isinstance(attempts, int) or not 0 <= attempts <= MAX_ATTEMPTS:
        raise Refused(f"attempts must be an integer from 0 to {MAX_ATTEMPTS}")
    # a comparison, not math.isfinite(): a 400-digit JSON integer overflows a float; NaN compares false
    if isinstance(next_try, bool) or not isinstance(next_try, (int, float)) or not 0 <= next_try <= MAX_EPOCH:
        raise Refused("next_try must be a number of seconds since 1970")
    name, last_error = data.get("name"), data.get("last_error")
    if not isinstance(name, (str, type(None))) or not isinstance(last_error, (str, type(None))):
        raise Refused("name and last_error must be strings")
    return Entry(path, uuid, name, attempts, float(next_try), last_error)


def drop(entry: Entry | None) -> None:
    if entry is not None:
        try:
            os.unlink(entry.path)
        except FileNotFoundError:
            pass


def postpone(entry: Entry, reason: str, now: float | None = None) -> Entry:
    """Keep the entry, try again later: 1, 2, 4 ... minutes, at most six hours."""
    now = time.time() if now is None else now
    attempts = min(entry.attempts + 1, MAX_ATTEMPTS)
    wait = delay(attempts)
    try:
        data = json.loads(read_regular(entry.path, MAX_ENTRY_BYTES)[0].decode("utf-8"))
        data = data if isinstance(data, dict) else {}
    except (OSError, ValueError, RecursionError):
        data = {}
    data.update(uuid=entry.uuid, name=entry.name, attempts=attempts, next_try=now + wait, last_error=reason)
    try:
        _write_json(os.path.dirname(entry.path), entry.path, data)
    except OSError:
        pass
    return Entry(entry.path, entry.uuid, entry.name, attempts, now + wait, reason)


def delay(attempts: int) -> float:
    """Seconds to wait after the n-th failed attempt (the exponent is capped: no overflow, ever)."""
    n = min(max(attempts, 1) - 1, 32)
    return min(FIRST_DELAY * 2.0**n, MAX_DELAY)


def _checked_uuid(value) -> str:
    uuid = canonical_uuid(value) if isinstance(value, str) else None
    if uuid is None:
        raise Refused(f"uuid {value!r} is not a uuid")
    return uuid


def _write_json(spool: str, path: str, data: dict) -> None:
    fd, tmp = create_temp(spool)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            json.dump(data, fh)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
