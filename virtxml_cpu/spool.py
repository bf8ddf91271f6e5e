"""The hook's queue of pending fixes: one JSON file per domain, <spool>/<uuid>.json.

The hook writes entries (queue mode); `apply --pending` and `watch` read them. An entry that cannot be
applied now (a transient domain, an unconfirmed or refused define) is postponed with a growing delay and
its reason recorded, instead of being retried at every pass.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass

FIRST_DELAY = 60.0  # seconds before the first retry of a postponed entry
MAX_DELAY = 6 * 3600.0


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
    os.makedirs(spool, mode=0o700, exist_ok=True)
    path = os.path.join(spool, f"{uuid}.json")
    _write_json(path, dict(fields, uuid=uuid))
    return path


def entries(spool: str, warn=None) -> list[Entry]:
    """Every readable entry, oldest name first; unreadable ones are reported through `warn` and skipped."""
    try:
        names = sorted(n for n in os.listdir(spool) if n.endswith(".json"))
    except FileNotFoundError:
        return []
    except OSError as e:
        if warn:
            warn(f"cannot read the spool {spool}: {e.strerror}")
        return []
    out = []
    for n in names:
        path = os.path.join(spool, n)
        try:
            with open(path, encoding="utf-8") as fh:
                data = json.loads(fh.read(65536))
            out.append(Entry(path, str(data["uuid"]), data.get("name"), int(data.get("attempts", 0)),
                             float(data.get("next_try", 0.0)), data.get("last_error")))
        except (OSError, ValueError, KeyError, TypeError) as e:
            if warn:
                warn(f"skipping unreadable spool entry {path}: {e}")
    return out


def drop(entry: Entry | None) -> None:
    if entry is not None:
        try:
            os.unlink(entry.path)
        except FileNotFoundError:
            pass


def postpone(entry: Entry, reason: str, now: float | None = None) -> Entry:
    """Keep the entry, try again later: 1, 2, 4 ... minutes, at most six hours."""
    now = time.time() if now is None else now
    attempts = entry.attempts + 1
    wait = delay(attempts)
    try:
        with open(entry.path, encoding="utf-8") as fh:
            data = json.load(fh)
    except (OSError, ValueError):
        data = {"uuid": entry.uuid, "name": entry.name}
    data.update(attempts=attempts, next_try=now + wait, last_error=reason)
    try:
        _write_json(entry.path, data)
    except OSError:
        pass
    return Entry(entry.path, entry.uuid, entry.name, attempts, now + wait, reason)


def delay(attempts: int) -> float:
    """Seconds to wait after the n-th failed attempt."""
    return min(FIRST_DELAY * 2 ** (max(attempts, 1) - 1), MAX_DELAY)


def _write_json(path: str, data: dict) -> None:
    tmp = f"{path}.{os.getpid()}.tmp"
    with open(tmp, "w", encoding="utf-8") as fh:
        json.dump(data, fh)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)
