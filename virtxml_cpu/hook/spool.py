"""The hook's queue of pending fixes: one JSON file per domain, <spool>/<uuid>.json.

The hook writes entries (queue mode); `apply --pending` and `watch` read them. An entry that cannot be
applied now (a transient domain, an unconfirmed or refused define) is postponed with a growing delay and
its outcome recorded (`last_outcome`: the ApplyOutcome's host, domain, kind and reason), instead of being
retried at every pass. The domain's name is `domain`, as in every record (`name`, as the hook queues it,
is read too).

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

from ..core.domain import canonical_uuid
from ..live.records import ApplyOutcome
from ..fs.atomic import replace_at
from ..fs.trusted import check_private_dir, open_private_dir, read_regular

MAX_EPOCH = 1e11  # seconds: about the year 5138, far past any real retry time
FIRST_DELAY = 60.0  # seconds before the first retry of a postponed entry
MAX_DELAY = 6 * 3600.0
MAX_ATTEMPTS = 10**6  # a counter past this is not ours
MAX_ENTRY_BYTES = 64 * 1024


class Refused(Exception):
    """The spool or an entry is not safe or not valid; the message says why (one line)."""


OUTCOME_FIELDS = ("host", "domain", "kind", "reason")  # what an entry keeps of its last ApplyOutcome


@dataclass(frozen=True)
class Entry:
    """One queued fix, as read (fields spelled as in virtxml_cpu.live.records)."""

    path: str
    uuid: str
    domain: str | None
    attempts: int = 0
    next_try: float = 0.0  # epoch seconds
    last_outcome: ApplyOutcome | None = None  # why the last try did not settle it

    def due(self, now: float) -> bool:
        return self.next_try <= now


def write(spool: str, uuid: str, fields: dict) -> str:
    """Record a pending fix atomically (a new entry replaces an older one for the same domain)."""
    uuid = _checked_uuid(uuid)
    try:  # the directories above checked first, then created and opened without following links
        fd = open_private_dir(spool)
    except OSError as e:
        raise Refused(f"spool {spool} {e.strerror or e}; refusing to write there") from None
    try:
        _write_json(fd, f"{uuid}.json", dict(fields, uuid=uuid))
    finally:
        os.close(fd)
    return os.path.join(spool, f"{uuid}.json")


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
    small non-negative integer, next_try a finite number, domain a string, last_outcome an outcome's fields."""
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
    domain = data.get("domain", data.get("name"))
    if not isinstance(domain, (str, type(None))):
        raise Refused("domain must be a string")
    return Entry(path, uuid, domain, attempts, float(next_try), _outcome(data.get("last_outcome")))


def _outcome(value) -> ApplyOutcome | None:
    if value is None:
        return None
    if not isinstance(value, dict) or not all(isinstance(value.get(k), str) for k in OUTCOME_FIELDS):
        raise Refused(f"last_outcome must be an object of strings {', '.join(OUTCOME_FIELDS)}")
    return ApplyOutcome(*(value[k] for k in OUTCOME_FIELDS))  # an unknown kind is a ValueError


def drop(entry: Entry | None) -> None:
    if entry is not None:
        try:
            os.unlink(entry.path)
        except FileNotFoundError:
            pass


def postpone(entry: Entry, outcome: ApplyOutcome, now: float | None = None) -> Entry:
    """Keep the entry with the outcome of this try, try again later: 1, 2, 4 ... minutes, at most six
    hours."""
    now = time.time() if now is None else now
    attempts = min(entry.attempts + 1, MAX_ATTEMPTS)
    wait = delay(attempts)
    try:
        data = json.loads(read_regular(entry.path, MAX_ENTRY_BYTES)[0].decode("utf-8"))
        data = data if isinstance(data, dict) else {}
    except (OSError, ValueError, RecursionError):
        data = {}
    for older in ("name", "last_error"):  # spelled so before the records' names: replaced below
        data.pop(older, None)
    data.update(uuid=entry.uuid, domain=entry.domain, attempts=attempts, next_try=now + wait,
                last_outcome={k: getattr(outcome, k) for k in OUTCOME_FIELDS})
    try:  # the spool checked and opened again, as write() does
        at = open_private_dir(os.path.dirname(entry.path), create=False)
        try:
            _write_json(at, os.path.basename(entry.path), data)
        finally:
            os.close(at)
    except OSError:
        pass
    return Entry(entry.path, entry.uuid, entry.domain, attempts, now + wait, outcome)


def delay(attempts: int) -> float:
    """Seconds to wait after the n-th failed attempt (the exponent is capped: no overflow, ever)."""
    n = min(max(attempts, 1) - 1, 32)
    return min(FIRST_DELAY * 2.0**n, MAX_DELAY)


def _checked_uuid(value) -> str:
    uuid = canonical_uuid(value) if isinstance(value, str) else None
    if uuid is None:
        raise Refused(f"uuid {value!r} is not a uuid")
    return uuid


def _write_json(at: int, name: str, data: dict) -> None:
    """`name` in the open spool directory `at` replaced whole (atomic.replace_at: file and directory synced)."""
    replace_at(at, name, json.dumps(data).encode())
