"""Opening what root reads and writes so that no other user can steer it: no links followed where a link
could be planted, no blocking on a FIFO or device, bounded reads, trusted owners (temporary files:
fs/temps.py)."""

from __future__ import annotations

import errno
import os
import stat

_NOFOLLOW = os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
MAX_LINKS = 40  # as the kernel's own limit on links in one lookup


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


def resolve_trusted(path: str, owners: tuple[int, ...] = (0,), missing_ok: bool = False,
                    sticky_ok: bool = True) -> tuple[str, str | None]:
    """Resolve `path` as the kernel does, one name at a time, and say why someone not in `owners` could
    change what it names: every directory a name is looked up in must be theirs and writable by no one
    else (a root-owned sticky directory such as /tmp excepted: others cannot rename what is ours there),
    and every symbolic link followed must be theirs. Returns (the resolved path, None) or (where, why).
    A missing last name is fine (a file about to be created); a missing directory is not, unless
    `missing_ok` (nobody else can create it where every directory looked in is checked). Not `sticky_ok`: a
    sticky directory excuses nothing either, for what root runs by name long after (its name in /tmp is
    anyone's again once a reboot or a cleaner removes it)."""
    todo = [c for c in os.path.abspath(path).split("/") if c][::-1]  # a stack: the next name last
    here, links, checked = "/", 0, set()
    while todo:
        name = todo.pop()
        if name == ".":
            continue
        if name == "..":
            here = os.path.dirname(here)
            continue
        if here not in checked:
            why = _dir_problem(here, owners, sticky_ok=sticky_ok)
            if why:
                return here, why
            checked.add(here)
        there = os.path.join(here, name)
        try:
            st = os.lstat(there)
        except FileNotFoundError:
            return (there, None) if not todo or missing_ok else (there, f"{there}: No such file or directory")
        except OSError as e:
            return there, f"{there}: {e.strerror or e}"
        if stat.S_ISLNK(st.st_mode):
            if st.st_uid not in owners:
                return there, f"{there} is a symbolic link owned by uid {st.st_uid}"
            links += 1
            if links > MAX_LINKS:
                return there, f"{there}: more than {MAX_LINKS} symbolic links"
            try:
                target = os.readlink(there)
            except OSError as e:
                return there, f"{there}: {e.strerror or e}"
            if target.startswith("/"):
                here = "/"
            todo.extend([c for c in target.split("/") if c][::-1])
        elif todo and not stat.S_ISDIR(st.st_mode):
            return there, f"{there}: Not a directory"
        else:
            here = there
    return here, None


def _dir_problem(directory: str, owners: tuple[int, ...], st: os.stat_result | None = None,
                 sticky_ok: bool = True) -> str | None:
    try:
        st = st or os.lstat(directory)
    except OSError as e:
        return f"{directory}: {e.strerror or e}"
    if st.st_uid not in owners:
        return f"{directory} above it is owned by uid {st.st_uid}"
    if st.st_mode & (stat.S_IWGRP | stat.S_IWOTH) and not (sticky_ok and st.st_mode & stat.S_ISVTX and st.st_uid == 0):
        return f"{directory} above it is writable by group or others"
    return None


def check_ancestors(path: str, owners: tuple[int, ...] = (0,), sticky_ok: bool = True) -> str | None:
    """Why a directory above `path` could be changed by someone not in `owners`, or None: every directory
    a name of `path` is looked up in (from / down, through every symbolic link on the way, the last name's
    too) must be theirs and writable by no one else, except a root-owned sticky directory (/tmp), and
    every link followed must be theirs (resolve_trusted; `sticky_ok` as there). As sshd's StrictModes."""
    return resolve_trusted(path, owners, sticky_ok=sticky_ok)[1]


def check_dir(path: str, owners: tuple[int, ...] = (0,)) -> str | None:
    """Why someone not in `owners` could put a name into the directory `path`, or None: the way to it
    (check_ancestors) and the directory itself, where a sticky bit excuses nothing (anyone may add a name
    to /tmp). The rule the hook's front applies to a directory it imports from (hook/qemu-hook)."""
    why = check_ancestors(os.path.join(path, "x"), owners)
    if why:
        return why
    try:
        problem = check_trusted(os.stat(path), owners)
    except OSError as e:
        return f"{path}: {e.strerror or e}"
    return f"{path} {problem}" if problem else None


def check_tree(top: str, owners: tuple[int, ...] = (0,), sticky_ok: bool = True) -> str | None:
    """Why code under `top` (and the directories above it) could be changed by someone not in `owners`,
    or None: what root will import must be root's alone. A symbolic link inside is followed and what it
    leads to checked the same way (the link, every directory on the way, the whole tree it names);
    `sticky_ok` as resolve_trusted's."""
    why = check_ancestors(os.path.join(top, "x"), owners, sticky_ok)
    return why or _check_below(top, owners, set(), sticky_ok)


def _check_below(top: str, owners: tuple[int, ...], seen: set, sticky_ok: bool = True) -> str | None:
    try:
        st = os.stat(top)
        if (st.st_dev, st.st_ino) in seen:
            return None
        seen.add((st.st_dev, st.st_ino))
        problem = check_trusted(st, owners)
        if problem:
            return f"{top} {problem}"
        entries = sorted(os.scandir(top), key=lambda e: e.name)
    except OSError as e:
        return f"{top}: {e.strerror or e}"
    for entry in entries:
        try:
            st = entry.stat(follow_symlinks=False)
        except OSError as e:
            return f"{entry.path}: {e.strerror or e}"
        if stat.S_ISLNK(st.st_mode):
            real, why = resolve_trusted(entry.path, owners, sticky_ok=sticky_ok)  # the link's owner, where it leads
            if why:
                return f"{entry.path}: {why}"
            try:
                st = os.stat(real)
            except OSError as e:
                return f"{entry.path}: {e.strerror or e}"
            if stat.S_ISDIR(st.st_mode):
                why = _check_below(real, owners, seen, sticky_ok)
                if why:
                    return why
                continue
            problem = check_trusted(st, owners)
            if problem:
                return f"{entry.path} (a link to {real}) {problem}"
        elif stat.S_ISDIR(st.st_mode):
            why = _check_below(entry.path, owners, seen, sticky_ok)
            if why:
                return why
        else:
            problem = check_trusted(st, owners)
            if problem:
                return f"{entry.path} {problem}"
    return None


_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


def open_private_dir(path: str, create: bool = True) -> int:
    """An open fd of `path`, a 0700 directory of the effective user that nobody else can change, created
    when missing. The directories above it that exist are checked first (resolve_trusted); the missing
    ones, and `path` itself, are then created and opened one at a time relative to their parent's fd,
    never following a link: whoever plants a link on the way (in /tmp, say) makes root create nothing
    anywhere. Raises Untrusted (why) or OSError."""
    owner = os.geteuid()
    owners = tuple(sorted({0, owner}))
    path = os.path.abspath(path)
    missing, existing = [os.path.basename(path)], os.path.dirname(path)
    while not os.path.lexists(existing):
        missing.append(os.path.basename(existing))
        existing = os.path.dirname(existing)
    real, why = resolve_trusted(os.path.join(existing, "x"), owners)
    if why:
        raise Untrusted(why)
    fd = os.open(os.path.dirname(real), _DIR)
    try:
        for i, name in enumerate(reversed(missing)):
            last = i == len(missing) - 1
            if create:
                try:
                    os.mkdir(name, 0o700 if last else 0o755, dir_fd=fd)
                except FileExistsError:
                    pass
            try:
                new = os.open(name, _DIR, dir_fd=fd)
            except OSError as e:
                if e.errno in (errno.ELOOP, errno.ENOTDIR):
                    st = os.lstat(name, dir_fd=fd)
                    raise Untrusted("is a symbolic link" if stat.S_ISLNK(st.st_mode) else
                                    f"is not a directory ({_kind(st.st_mode)})") from None
                raise
            os.close(fd)
            fd = new
            st = os.fstat(fd)
            why = check_trusted(st, (owner,)) if last else _dir_problem(name, owners, st)
            if why:
                raise Untrusted(why)
        out, fd = fd, None
        return out
    finally:
        if fd is not None:
            os.close(fd)


def make_private_dir(path: str) -> str | None:
    """Create `path` 0700 for the effective user when missing (open_private_dir); then say why it is
    unusable, or None."""
    try:
        os.close(open_private_dir(path))
    except OSError as e:
        return e.strerror or str(e)
    return None


def _kind(mode: int) -> str:
    for test, name in ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a device"),
                       (stat.S_ISBLK, "a device"), (stat.S_ISSOCK, "a socket"), (stat.S_ISLNK, "a symbolic link")):
        if test(mode):
            return name
    return "not a regular file"
