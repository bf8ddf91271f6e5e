"""Opening what root reads and writes so that no other user can steer it: no links followed where a link
could be planted, no blocking on a FIFO or device, bounded reads, trusted owners, and temporary files
that name their creator so a later run can clear the ones a killed run left behind."""

from __future__ import annotations

import errno
import os
import stat

TEMP_PREFIX = ".virtxml-cpu."
TEMP_NAME = r"\.virtxml-cpu\.([0-9]{1,10})\.[0-9a-z]{8}\.tmp\Z"  # .virtxml-cpu.PID.RANDOM.tmp (compiled where used)
_NOFOLLOW = os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC


class Untrusted(OSError):
    """A file or directory that is not what it must be (a link, a FIFO, writable by others, too big)."""


def read_regular(path: str, limit: int, follow: bool = False, dir_fd: int | None = None) -> tuple[bytes, os.stat_result]:
    """The bytes of a regular file of at most `limit` bytes, opened without blocking (a FIFO, device or
    /proc/kmsg never stalls the reader) and, unless `follow`, without following a final symbolic link."""
    flags = os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | (0 if follow else os.O_NOFOLLOW)
    try:
        fd = os.open(path, flags, dir_fd=dir_fd)
    except OSError as e:
        if e.errno == errno.ELOOP:  # the final component is a symbolic link
            raise Untrusted("is a symbolic link") from None
        raise
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise Untrusted(f"is not a regular file ({_kind(st.st_mode)})")
        if st.st_size > limit:
            raise Untrusted(f"is larger than {limit} bytes")
        chunks, size = [], 0
        while size <= limit:
            try:
                chunk = os.read(fd, limit + 1 - size)
            except BlockingIOError:  # /proc/kmsg and the like: a regular file that would wait
                raise Untrusted("would block (not an ordinary file)") from None
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
        if size > limit:
            raise Untrusted(f"is larger than {limit} bytes")
        return b"".join(chunks), st
    finally:
        os.close(fd)


def check_trusted(st: os.stat_result, owners: tuple[int, ...] = (0,)) -> str | None:
    """Why a file or directory is not trustworthy (owned by someone else, writable by group or others),
    or None when it is."""
    if st.st_uid not in owners:
        return f"is owned by uid {st.st_uid}"
    if st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        return "is writable by group or others"
    return None


def check_private_dir(path: str, owner: int | None = None) -> str | None:
    """Why `path` is no directory only `owner` (default: the effective uid) can change: a symbolic link,
    not a directory, another owner, writable by group or others, or below a directory someone else could
    change (who could then swap it for a link between our check and our write). None when it is fine."""
    owner = os.geteuid() if owner is None else owner
    try:
        st = os.lstat(path)
    except OSError as e:
        return e.strerror or str(e)
    if stat.S_ISLNK(st.st_mode):
        return "is a symbolic link"
    if not stat.S_ISDIR(st.st_mode):
        return f"is not a directory ({_kind(st.st_mode)})"
    return check_trusted(st, (owner,)) or check_ancestors(path, (0, owner))


def check_ancestors(path: str, owners: tuple[int, ...] = (0,)) -> str | None:
    """Why a directory above `path` could be changed by someone not in `owners`, or None. Every directory
    from / down must be owned by one of them and writable by no one else, except a root-owned sticky
    directory (/tmp), where others cannot rename what is ours; a symbolic link on the way must be owned
    by one of them too (and where it leads is checked the same way). As sshd's StrictModes."""
    path = os.path.abspath(path)
    for literal in _parents(path):
        try:
            st = os.lstat(literal)
        except OSError as e:
            return f"{literal}: {e.strerror or e}"
        if stat.S_ISLNK(st.st_mode) and st.st_uid not in owners:
            return f"{literal} is a symbolic link owned by uid {st.st_uid}"
    for real in _parents(os.path.realpath(path)):
        try:
            st = os.stat(real)
        except OSError as e:
            return f"{real}: {e.strerror or e}"
        if st.st_uid not in owners:
            return f"{real} above it is owned by uid {st.st_uid}"
        if st.st_mode & (stat.S_IWGRP | stat.S_IWOTH) and not (st.st_mode & stat.S_ISVTX and st.st_uid == 0):
            return f"{real} above it is writable by group or others"
    return None


def check_tree(top: str, owners: tuple[int, ...] = (0,)) -> str | None:
    """Why code under `top` (and the directories above it) could be changed by someone not in `owners`,
    or None: what root will import must be root's alone."""
    why = check_ancestors(os.path.join(top, "x"), owners)
    if why:
        return why
    for directory, dirs, files in os.walk(top):
        for name in [directory] + [os.path.join(directory, f) for f in files]:
            try:
                st = os.lstat(name)
            except OSError as e:
                return f"{name}: {e.strerror or e}"
            problem = check_trusted(st, owners)
            if problem:
                return f"{name} {problem}"
    return None


def _parents(path: str) -> list[str]:
    """/a/b/c -> ["/", "/a", "/a/b"] (the directories above `path`, outermost first)."""
    out, head = [], os.path.dirname(path)
    while True:
        out.append(head)
        if head == os.path.dirname(head):
            break
        head = os.path.dirname(head)
    return out[::-1]


def make_private_dir(path: str) -> str | None:
    """Create `path` 0700 for the effective user when missing; then say why it is unusable, or None."""
    try:
        os.makedirs(os.path.dirname(path.rstrip("/")) or ".", mode=0o755, exist_ok=True)
        os.mkdir(path, 0o700)
    except FileExistsError:
        pass
    except OSError as e:
        return e.strerror or str(e)
    return check_private_dir(path)


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
            return os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW, mode, dir_fd=at), path
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


def _kind(mode: int) -> str:
    for test, name in ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a device"),
                       (stat.S_ISBLK, "a device"), (stat.S_ISSOCK, "a socket"), (stat.S_ISLNK, "a symbolic link")):
        if test(mode):
            return name
    return "not a regular file"
