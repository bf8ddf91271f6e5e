"""Temporary files that name their creator, so that a later run can clear the ones a killed run left behind:
.virtxml-cpu.PID.RANDOM.tmp, created O_EXCL without following a link (fs/atomic.py writes through them)."""

from __future__ import annotations

import errno
import os
import stat

TEMP_PREFIX = ".virtxml-cpu."
TEMP_NAME = r"\.virtxml-cpu\.([0-9]{1,10})\.[0-9a-z]{8}\.tmp\Z"  # .virtxml-cpu.PID.RANDOM.tmp (compiled where used)
_CREATE = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC


def temp_name(directory: str) -> str:
    """A fresh temporary file name in `directory` that names this process: .virtxml-cpu.PID.RANDOM.tmp."""
    return os.path.join(directory, f"{TEMP_PREFIX}{os.getpid()}.{os.urandom(4).hex()}.tmp")


def create_temp(directory: str | int, mode: int = 0o600) -> tuple[int, str]:
    """A new temporary file, O_CREAT|O_EXCL|O_NOFOLLOW: never an existing file, never through a link.
    `directory` is a path, or an open directory's fd (then the name returned is relative to it, so the
    file lands in that directory whatever its path names by now)."""
    at = directory if isinstance(directory, int) else None
    for _ in range(100):
        path = temp_name("" if at is not None else directory)
        try:
            return os.open(path, _CREATE, mode, dir_fd=at), path
        except FileExistsError:
            continue
    raise FileExistsError(errno.EEXIST, "no free temporary file name", str(directory))


def remove_stale_temps(directory: str | int) -> list[str]:
    """Remove temporary files a killed run of ours left in `directory` (a path or an open directory's fd):
    only names of our own pattern, regular files owned by the effective uid, whose creating process is
    gone. Returns the names removed."""
    removed = []
    at = directory if isinstance(directory, int) else None
    try:
        names = [n for n in os.listdir(directory) if n.startswith(TEMP_PREFIX)]
    except OSError:
        return removed
    if names:
        import re  # here: the hook's repeat starts never list a directory with leftovers

        pattern = re.compile(TEMP_NAME)
    for name in names:
        m = pattern.match(name)
        if not m or _alive(int(m.group(1))):
            continue
        path = name if at is not None else os.path.join(directory, name)
        try:
            st = os.lstat(path, dir_fd=at)
            if stat.S_ISREG(st.st_mode) and st.st_uid == os.geteuid():
                os.unlink(path, dir_fd=at)
                removed.append(name)
        except OSError:
            continue
    return removed


def _alive(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError):
        return True
    return True
