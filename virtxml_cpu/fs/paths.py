"""Where a file root or a user is about to write really is: the walk to its directory, then every step
relative to that directory's open fd, so that whoever can change the path cannot steer a write.

- The directory is opened once and every later step (temporary file, backup, rename, fsync) is relative to
  that fd; right before the write, `moved` says whether the path still names that directory. When it no
  longer does, nothing is written.
- A symbolic link named as the file is followed (its target updated, the link kept) only where
  fs.protected_symlinks would follow it, whatever that sysctl says: outside a world-writable sticky
  directory (/tmp), or when the link belongs to this user or to the directory's owner. Links in the
  directory part are the kernel's to follow; they cannot redirect a write, as the directory is checked.
- As root, only root's symbolic links are followed, in the directory part too, and nothing is replaced in
  a directory another user can change (`root_may_not_replace`): there only a fresh file is created.
The writes themselves are fs/atomic.py's; what is kept of a user's file, fs/files.py's.
"""

from __future__ import annotations

import errno
import os
import stat
from typing import NamedTuple

from ..errors import BadInput, EnvironmentProblem, VirtxmlCpuError, shown
from .trusted import MAX_LINKS

NOT_REGULAR = "is not a regular file (a directory, device, FIFO or socket)"
_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC


class Place(NamedTuple):
    """Where a file is: its directory, open (every step after locating is relative to this fd), and its
    name there (no slash; not a link when located). `shown` is the path for messages."""

    dfd: int
    name: str
    shown: str


def env_error(path: str, e: OSError, what: str = "") -> EnvironmentProblem:
    """An OSError on `path` as a one-line environment problem (exit 3)."""
    reason = "permission denied" if isinstance(e, PermissionError) else (e.strerror or str(e))
    return EnvironmentProblem(f"{shown(path)}: {reason}{what}")


def os_error(path: str, e: OSError, what: str = "") -> VirtxmlCpuError:
    """A missing file or a path through a non-directory is bad input (exit 2), the rest environment (3)."""
    if isinstance(e, FileNotFoundError):
        return BadInput(f"{shown(path)}: no such file{what}")
    if isinstance(e, NotADirectoryError):
        return BadInput(f"{shown(path)}: a part of the path is not a directory{what}")
    return env_error(path, e, what)


def locate(path: str) -> Place:
    """Open the directory holding `path`'s file and name the file in it, following a final symbolic link
    only by fs.protected_symlinks' rule (see the module docstring); the caller closes `dfd`. The file
    itself may be missing."""
    dfd, walk, where = None, path, path  # walk: relative to dfd (or absolute); where: for messages
    try:
        for _ in range(MAX_LINKS + 1):
            parent, name = os.path.split(walk)
            if name in ("", ".", ".."):
                raise BadInput(f"{shown(path)} {NOT_REGULAR}; nothing was written")
            try:
                new = (_open_dir_as_root(parent or ".", dfd, path) if os.geteuid() == 0 else
                       os.open(parent or ".", _DIR, dir_fd=dfd))
            except OSError as e:
                raise os_error(path, e, "; nothing was written") from None
            if dfd is not None:
                os.close(dfd)
            dfd = new
            try:
                st = os.stat(name, dir_fd=dfd, follow_symlinks=False)
            except FileNotFoundError:
                st = None
            except OSError as e:
                raise os_error(path, e, "; nothing was written") from None
            if st is None or not stat.S_ISLNK(st.st_mode):
                place, dfd = Place(dfd, name, where), None
                return place
            walk = _follow(dfd, name, st, where, path)
            where = os.path.join(os.path.dirname(where), walk)  # an absolute target replaces the rest
        raise EnvironmentProblem(f"{shown(path)}: more than {MAX_LINKS} symbolic links; nothing was written")
    finally:
        if dfd is not None:
            os.close(dfd)


def _open_dir_as_root(parent: str, dfd: int | None, path: str) -> int:
    """Open the directory `parent` (relative to `dfd`, or absolute) one name at a time, following only
    root's symbolic links: as root, another user's link anywhere on the way is refused, not followed."""
    todo = [c for c in parent.split("/") if c][::-1]
    fd = os.open("/", _DIR) if parent.startswith("/") else os.open(".", _DIR, dir_fd=dfd)
    links = 0
    try:
        while todo:
            name = todo.pop()
            if name == ".":
                continue
            try:
                new = os.open(name, _DIR | os.O_NOFOLLOW, dir_fd=fd)
            except OSError as e:
                if e.errno not in (errno.ELOOP, errno.ENOTDIR):
                    raise
                st = os.stat(name, dir_fd=fd, follow_symlinks=False)
                if not stat.S_ISLNK(st.st_mode):
                    raise
                if st.st_uid != 0:
                    raise EnvironmentProblem(
                        f"{shown(path)}: {shown(name)} on the way is a symbolic link of uid {st.st_uid}; as root, "
                        "only root's links are followed; nothing was written; name the real directory") from None
                links += 1
                if links > MAX_LINKS:
                    raise EnvironmentProblem(f"{shown(path)}: more than {MAX_LINKS} symbolic links; "
                                             "nothing was written") from None
                target = os.readlink(name, dir_fd=fd)
                todo.extend([c for c in target.split("/") if c][::-1])
                if not target.startswith("/"):
                    continue
                new = os.open("/", _DIR)
            os.close(fd)
            fd = new
        out, fd = fd, None
        return out
    finally:
        if fd is not None:
            os.close(fd)


def root_may_not_replace(dfd: int, existing: os.stat_result | None) -> str | None:
    """As root, why nothing may be replaced in the directory `dfd` (None: it may; always None for other
    users): its owner is not root, or others may write it (a root-owned sticky directory such as /tmp
    aside, where only an existing file of root's may be replaced). There only a fresh file is created
    (files.fresh_file): whoever can change the directory can put anything under any name at any time."""
    if os.geteuid() != 0:
        return None
    d = os.fstat(dfd)
    if d.st_uid != 0:
        return f"its directory belongs to uid {d.st_uid}"
    if d.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        if not d.st_mode & stat.S_ISVTX:
            return "its directory is writable by group or others"
        if existing is not None and existing.st_uid != 0:
            return f"it belongs to uid {existing.st_uid}, in a sticky directory others can write"
    return None


def _follow(dfd: int, name: str, link: os.stat_result, where: str, path: str) -> str:
    """The target of the link `name` in `dfd` (relative to `dfd`, or absolute), when fs.protected_symlinks'
    rule lets this user follow it: outside a world-writable sticky directory, or a link of this user or of
    the directory's owner."""
    if os.geteuid() == 0 and link.st_uid != 0:
        raise EnvironmentProblem(
            f"{shown(where)}: a symbolic link of uid {link.st_uid}; as root, only root's links are followed; "
            "nothing was written; name the target itself")
    directory = os.fstat(dfd)
    sticky_open = directory.st_mode & (stat.S_ISVTX | stat.S_IWOTH) == stat.S_ISVTX | stat.S_IWOTH
    if sticky_open and link.st_uid not in (os.geteuid(), directory.st_uid):
        raise EnvironmentProblem(
            f"{shown(where)}: a symbolic link of uid {link.st_uid} in a world-writable sticky directory is "
            "not followed (as fs.protected_symlinks); nothing was written; name the target itself")
    try:
        target = os.readlink(name, dir_fd=dfd)
        again = os.stat(name, dir_fd=dfd, follow_symlinks=False)
    except OSError as e:
        raise os_error(path, e, "; nothing was written") from None
    if (again.st_ino, again.st_uid) != (link.st_ino, link.st_uid):
        raise EnvironmentProblem(f"{shown(where)}: the symbolic link changed while it was read; "
                                 "nothing was written")
    return target


def moved(place: Place, path: str) -> str | None:
    """Why `path` no longer names the directory `place` holds and the same name in it (moved, removed or
    replaced), or None when it still does: checked right before a write lands."""
    try:
        now = locate(path)
    except VirtxmlCpuError:
        return "its directory was moved or removed"
    try:
        was, there = os.fstat(place.dfd), os.fstat(now.dfd)
        if (was.st_dev, was.st_ino, place.name) != (there.st_dev, there.st_ino, now.name):
            return "its directory was moved or replaced"
    finally:
        os.close(now.dfd)
    return None
