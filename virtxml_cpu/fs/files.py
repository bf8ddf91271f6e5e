"""Reading inputs and writing files so that a user's file is never lost, half-written or swapped.

- `--in-place` locks the file, reads it, and renames a complete new file over it; a run that waited for the
  lock sees the renamed file, so concurrent runs on one file make exactly one change.
- The directory is opened once and every later step (temporary file, backup, rename, fsync) is relative to
  that fd, after checking the directory holds the very file that was locked: whoever can change the path
  (a user's directory that root works in) cannot steer a write into another directory by swapping a
  parent for a link. When the path no longer names that directory at the end, nothing is written.
- A symbolic link named as the file is followed (its target updated, the link kept) only where
  fs.protected_symlinks would follow it, whatever that sysctl says: outside a world-writable sticky
  directory (/tmp), or when the link belongs to this user or to the directory's owner. Links in the
  directory part are the kernel's to follow; they cannot redirect a write, as the directory is checked.
- Backups hold the bytes that were read, are written to a temporary file and linked into place (never
  through a symbolic link, never over an existing file: FILE.orig is taken, so FILE.orig.1 is used). A
  backup that already holds exactly the bytes read (a run killed between backup and rename) is reused.
- Temporary files are named .virtxml-cpu.PID.RANDOM.tmp; a run removes the ones in its directory whose
  creating process is gone (a killed run), never anything else.
- Only regular files are replaced: a device, FIFO or socket is refused (or, when it is this process's own
  stdout, written as a stream).
- Owner, group, mode and extended attributes (ACLs, SELinux labels) are kept, or nothing is written.
"""

from __future__ import annotations

import errno
import fcntl
import os
import stat
import sys
from collections.abc import Callable
from typing import NamedTuple, TypeVar

from .atomic import replace_at
from ..errors import BadInput, EnvironmentProblem, VirtxmlCpuError, shown
from .trusted import create_temp, remove_stale_temps
from ..xml.text import MAX_INPUT_BYTES

T = TypeVar("T")
MAX_BACKUP_NUMBER = 999
MAX_LINKS = 40  # as the kernel's own limit on links in one lookup
_READ = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC
_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC
_NOT_REGULAR = "is not a regular file (a directory, device, FIFO or socket)"


class Place(NamedTuple):
    """Where a file is: its directory, open (every step after locating is relative to this fd), and its
    name there (no slash; not a link when located). `shown` is the path for messages."""

    dfd: int
    name: str
    shown: str


def _env_error(path: str, e: OSError, what: str = "") -> EnvironmentProblem:
    reason = "permission denied" if isinstance(e, PermissionError) else (e.strerror or str(e))
    return EnvironmentProblem(f"{shown(path)}: {reason}{what}")


def _os_error(path: str, e: OSError, what: str = "") -> VirtxmlCpuError:
    """A missing file or a path through a non-directory is bad input (exit 2), the rest environment (3)."""
    if isinstance(e, FileNotFoundError):
        return BadInput(f"{shown(path)}: no such file{what}")
    if isinstance(e, NotADirectoryError):
        return BadInput(f"{shown(path)}: a part of the path is not a directory{what}")
    return _env_error(path, e, what)


def read_input(path: str) -> bytes:
    """Read a file (or stdin, `-`), at most MAX_INPUT_BYTES + 1 bytes; pipes and /dev/fd/N work too."""
    try:
        if path == "-":
            return _read_fd(sys.stdin.fileno(), "<stdin>")
        with open(path, "rb", buffering=0) as fh:
            return _read_fd(fh.fileno(), path)
    except FileNotFoundError:
        raise BadInput(f"{shown(path)}: no such file") from None
    except IsADirectoryError:
        raise BadInput(f"{shown(path)}: is a directory") from None
    except OSError as e:
        raise _env_error(path, e) from None


def locate(path: str) -> Place:
    """Open the directory holding `path`'s file and name the file in it, following a final symbolic link
    only by fs.protected_symlinks' rule (see the module docstring); the caller closes `dfd`. The file
    itself may be missing."""
    dfd, walk, where = None, path, path  # walk: relative to dfd (or absolute); where: for messages
    try:
        for _ in range(MAX_LINKS + 1):
            parent, name = os.path.split(walk)
            if name in ("", ".", ".."):
                raise BadInput(f"{shown(path)} {_NOT_REGULAR}; nothing was written")
            try:
                new = (_open_dir_as_root(parent or ".", dfd, path) if os.geteuid() == 0 else
                       os.open(parent or ".", _DIR, dir_fd=dfd))
            except OSError as e:
                raise _os_error(path, e, "; nothing was written") from None
            if dfd is not None:
                os.close(dfd)
            dfd = new
            try:
                st = os.stat(name, dir_fd=dfd, follow_symlinks=False)
            except FileNotFoundError:
                st = None
            except OSError as e:
                raise _os_error(path, e, "; nothing was written") from None
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
    (fresh_file): whoever can change the directory can put anything under any name at any time."""
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
        raise _os_error(path, e, "; nothing was written") from None
    if (again.st_ino, again.st_uid) != (link.st_ino, link.st_uid):
        raise EnvironmentProblem(f"{shown(where)}: the symbolic link changed while it was read; "
                                 "nothing was written")
    return target


def _still_named(place: Place, path: str, locked: os.stat_result | None) -> None:
    """Refuse unless `path` still names the directory we hold and (when `locked`) its name there is still
    the file we locked: someone moved the directory, or replaced the file despite the lock."""
    problem = None
    try:
        now = locate(path)
    except VirtxmlCpuError:
        problem = "its directory was moved or removed"
    else:
        try:
            was, there = os.fstat(place.dfd), os.fstat(now.dfd)
            if (was.st_dev, was.st_ino, place.name) != (there.st_dev, there.st_ino, now.name):
                problem = "its directory was moved or replaced"
        finally:
            os.close(now.dfd)
    if problem is None and locked is not None:
        try:
            st = os.stat(place.name, dir_fd=place.dfd, follow_symlinks=False)
            same = (st.st_dev, st.st_ino) == (locked.st_dev, locked.st_ino)
        except OSError:
            same = False
        if not same:
            problem = "it was replaced by another program despite the lock"
    if problem:
        raise EnvironmentProblem(f"{shown(path)}: {problem} while it was being updated; nothing was written")


def update_in_place(path: str, transform: Callable[[bytes], tuple[bytes | None, T]],
                    backup_suffix: str | None = None) -> tuple[bool, T, str | None]:
    """Lock `path`, read it, and replace it with `transform(data)[0]` unless that is None or unchanged.

    Returns (written, transform's second value, backup path). Through a symbolic link, the link's target
    is updated and the link kept, where fs.protected_symlinks would follow that link: another user's link
    in /tmp is refused even when the sysctl is off (resolving with `realpath` would follow any link)."""
    while True:
        place = locate(path)
        fd = None
        try:
            try:
                st = os.stat(place.name, dir_fd=place.dfd, follow_symlinks=False)
                if not stat.S_ISREG(st.st_mode):  # checked before opening: opening a device can act
                    raise BadInput(f"{shown(path)} {_NOT_REGULAR}; --in-place replaces regular files only; "
                                   "nothing was written")
                fd = os.open(place.name, _READ, dir_fd=place.dfd)
            except FileNotFoundError:
                raise BadInput(f"{shown(path)}: no such file") from None
            except OSError as e:
                if e.errno == errno.ELOOP:
                    continue  # became a link since it was located: locate it again
                raise _env_error(path, e) from None
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode):
                raise BadInput(f"{shown(path)} {_NOT_REGULAR}; nothing was written")
            why = root_may_not_replace(place.dfd, st)
            if why:
                raise EnvironmentProblem(f"{shown(path)}: as root, --in-place replaces nothing another user can "
                                         f"change ({why}); nothing was written; run it as that user")
            fcntl.flock(fd, fcntl.LOCK_EX)
            try:
                now = os.stat(place.name, dir_fd=place.dfd, follow_symlinks=False)
            except FileNotFoundError:
                raise BadInput(f"{shown(path)} was removed while waiting to update it; nothing was written") from None
            if (now.st_dev, now.st_ino) != (st.st_dev, st.st_ino):
                continue  # another run renamed a new file into place while we waited: read that one
            data = _read_fd(fd, path)
            new, result = transform(data)
            if new is None or new == data:
                return False, result, None
            _still_named(place, path, st)
            backup = write_backup(place, backup_suffix, data, fd) if backup_suffix else None
            _replace(place, new, fd, path, st)
            return True, result, backup
        finally:
            if fd is not None:
                os.close(fd)  # releases the lock
            os.close(place.dfd)


def _read_fd(fd: int, path: str) -> bytes:
    """At most MAX_INPUT_BYTES + 1 bytes, in reads sized to the file (a 10 MiB buffer for every small file
    would cost more than parsing it)."""
    chunks, size = [], 0
    try:
        st = os.fstat(fd)
        step = min(st.st_size + 1, MAX_INPUT_BYTES + 1) if stat.S_ISREG(st.st_mode) else 1 << 16
        while size <= MAX_INPUT_BYTES:
            chunk = os.read(fd, min(step, MAX_INPUT_BYTES + 1 - size))
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
    except OSError as e:
        raise _env_error(path, e) from None
    return b"".join(chunks)


def write_backup(place: Place, suffix: str, data: bytes, src_fd: int) -> str:
    """NAME+SUFFIX in the directory `place` holds, with `data` and the owner, mode and xattrs of the open
    file `src_fd`; created without following links and without replacing anything: when it exists,
    NAME+SUFFIX.1, .2, ... Returns the path written (for messages)."""
    if "/" in suffix or not suffix:
        raise BadInput(f"backup suffix {shown(suffix)} must be a non-empty file name suffix")
    shown_as = place.shown + suffix
    kept = _existing_backup(place, suffix, data, os.fstat(src_fd))
    if kept:
        return kept
    fd, tmp = _mkstemp(place, shown_as)
    try:
        try:
            _write_all(fd, data, tmp)
            _keep_attributes(fd, src_fd, place.shown)
            os.fsync(fd)
        except OSError as e:
            raise _env_error(shown_as, e, " (writing the backup); nothing was written") from None
        for n in range(MAX_BACKUP_NUMBER + 1):
            tail = suffix + (f".{n}" if n else "")
            try:  # fails on anything already there, a dangling link included
                os.link(tmp, place.name + tail, src_dir_fd=place.dfd, dst_dir_fd=place.dfd, follow_symlinks=False)
                return place.shown + tail
            except FileExistsError:
                continue
            except OSError as e:
                if e.errno not in (errno.EPERM, errno.EOPNOTSUPP, errno.EXDEV):
                    raise _env_error(place.shown + tail, e, "; nothing was written") from None
                if _create_exclusive(place, place.name + tail, data, os.fstat(src_fd)):  # no hard links here
                    return place.shown + tail
        raise EnvironmentProblem(f"{shown(shown_as)}: {MAX_BACKUP_NUMBER} backups exist already; "
                                 "nothing was written")
    finally:
        os.close(fd)
        _unlink_quietly(place, tmp)


def _existing_backup(place: Place, suffix: str, data: bytes, st: os.stat_result) -> str | None:
    """The newest existing backup when it holds exactly `data` (a run killed after its backup and before
    its rename left it): reused, so the next run completes without a second backup. Only a regular file
    of ours, never through a link."""
    newest = None
    for n in range(MAX_BACKUP_NUMBER + 1):
        tail = suffix + (f".{n}" if n else "")
        try:
            have = os.stat(place.name + tail, dir_fd=place.dfd, follow_symlinks=False)
        except OSError:
            break
        newest = tail
    if newest is None:
        return None
    if not stat.S_ISREG(have.st_mode) or have.st_size != len(data) or have.st_uid != st.st_uid:
        return None
    try:
        fd = os.open(place.name + newest, _READ, dir_fd=place.dfd)
    except OSError:
        return None
    try:
        return place.shown + newest if _read_fd(fd, place.shown + newest) == data else None
    except VirtxmlCpuError:
        return None
    finally:
        os.close(fd)


def _create_exclusive(place: Place, name: str, data: bytes, st: os.stat_result) -> bool:
    shown_as = os.path.join(os.path.dirname(place.shown), name)
    try:
        fd = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, st.st_mode & 0o7777,
                     dir_fd=place.dfd)
    except FileExistsError:
        return False
    except OSError as e:
        raise _env_error(shown_as, e, "; nothing was written") from None
    try:
        _write_all(fd, data, shown_as)
        os.fsync(fd)
    finally:
        os.close(fd)
    return True


def write_output(path: str, data: bytes, inputs: list[str]) -> None:
    """`-o FILE`: replace a regular file atomically (keeping its owner, mode, xattrs) or create it; refuse a
    device or FIFO unless it is this process's own stdout, and refuse any input file under another name.
    A final symbolic link is followed as `update_in_place` does."""
    try:
        st = os.stat(path)  # /dev/stdout and /dev/fd/1 are links the kernel resolves
    except FileNotFoundError:
        st = None
    except OSError as e:
        raise _os_error(path, e) from None
    if st is not None and not stat.S_ISREG(st.st_mode):
        out = os.fstat(sys.stdout.fileno())
        if (out.st_dev, out.st_ino) == (st.st_dev, st.st_ino):
            sys.stdout.buffer.write(data)
            sys.stdout.flush()
            return
    place = locate(path)
    fd = None
    try:
        try:
            st = os.stat(place.name, dir_fd=place.dfd, follow_symlinks=False)
        except FileNotFoundError:
            st = None
        except OSError as e:
            raise _env_error(path, e) from None
        if st is not None:
            if not stat.S_ISREG(st.st_mode):
                raise BadInput(f"-o {shown(path)} is not a regular file (a device, FIFO or socket); "
                               "nothing was written")
            try:
                fd = os.open(place.name, _READ, dir_fd=place.dfd)
            except OSError as e:
                raise _env_error(path, e, "; nothing was written") from None
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode):
                raise BadInput(f"-o {shown(path)} is not a regular file; nothing was written")
            for name in inputs:
                try:
                    other = os.stat(name) if name != "-" else None
                except OSError:
                    continue
                if other is not None and (other.st_dev, other.st_ino) == (st.st_dev, st.st_ino):
                    raise BadInput(f"-o {shown(path)} is the input file {shown(name)}; use --in-place")
        why = root_may_not_replace(place.dfd, st)
        if why and st is not None:
            raise EnvironmentProblem(f"-o {shown(path)}: as root, nothing another user can change is replaced "
                                     f"({why}); nothing was written; name a new file, or run as that user")
        if why:
            fresh_file(place, data, path)
            return
        _replace(place, data, fd, path, None)
    finally:
        if fd is not None:
            os.close(fd)
        os.close(place.dfd)


def _replace(place: Place, data: bytes, src_fd: int | None, shown_as: str, locked: os.stat_result | None) -> None:
    """atomic.replace_at in the directory `place` holds: attributes copied from `src_fd` (or a new file's
    defaults), and right before the rename, the check that the path still names that directory (and file)."""
    def attributes(fd: int) -> None:
        if src_fd is None:
            umask = os.umask(0)
            os.umask(umask)
            os.fchmod(fd, 0o666 & ~umask)
        else:
            _keep_attributes(fd, src_fd, shown_as)

    try:
        replace_at(place.dfd, place.name, data, prepare=attributes,
                   before_rename=lambda: _still_named(place, shown_as, locked))
    except OSError as e:
        raise _env_error(shown_as, e, "; the original is unchanged") from None


def fresh_file(place: Place, data: bytes, shown_as: str) -> None:
    """A new file `place.name` holding `data`, created where none is (a temporary file linked into place,
    or O_CREAT|O_EXCL|O_NOFOLLOW where there are no hard links): never over an existing name, never
    through a link. Root's only way to write into a directory another user can change."""
    fd, tmp = _mkstemp(place, shown_as)
    try:
        try:
            _write_all(fd, data, shown_as)
            umask = os.umask(0)
            os.umask(umask)
            os.fchmod(fd, 0o666 & ~umask)
            os.fsync(fd)
        except OSError as e:
            raise _env_error(shown_as, e, "; nothing was written") from None
        try:
            os.link(tmp, place.name, src_dir_fd=place.dfd, dst_dir_fd=place.dfd, follow_symlinks=False)
        except FileExistsError:
            raise EnvironmentProblem(f"{shown(shown_as)}: appeared while it was being written; nothing was "
                                     "written") from None
        except OSError as e:
            if e.errno not in (errno.EPERM, errno.EOPNOTSUPP, errno.EXDEV):
                raise _env_error(shown_as, e, "; nothing was written") from None
            if not _create_exclusive(place, place.name, data, os.fstat(fd)):
                raise EnvironmentProblem(f"{shown(shown_as)}: appeared while it was being written; nothing "
                                         "was written") from None
    finally:
        os.close(fd)
        _unlink_quietly(place, tmp)
    try:
        os.fsync(place.dfd)
    except OSError:
        pass


def _keep_attributes(fd: int, src_fd: int, shown_as: str) -> None:
    """Owner, group, mode, then extended attributes (ACLs included) of the open file `src_fd` onto the new
    file `fd`; refuse with a clear message when they cannot all be kept (the caller removes the new file)."""
    st = os.fstat(src_fd)
    if (st.st_uid, st.st_gid) != (os.geteuid(), os.getegid()):
        try:
            os.fchown(fd, st.st_uid if st.st_uid != os.geteuid() else -1, st.st_gid)
        except PermissionError:
            raise EnvironmentProblem(
                f"{shown(shown_as)}: cannot keep its owner/group {st.st_uid}:{st.st_gid} (only root or the "
                "owner may); nothing was written; run as that user or as root") from None
    os.fchmod(fd, stat.S_IMODE(st.st_mode))
    try:
        names = os.listxattr(src_fd)
    except OSError as e:
        if e.errno in (errno.ENOTSUP, errno.EOPNOTSUPP):
            return
        raise
    for name in names:
        try:
            os.setxattr(fd, name, os.getxattr(src_fd, name))
        except OSError as e:
            raise EnvironmentProblem(f"{shown(shown_as)}: cannot keep its extended attribute {name} "
                                     f"({e.strerror}); nothing was written") from None


def _mkstemp(place: Place, shown_as: str) -> tuple[int, str]:
    remove_stale_temps(place.dfd)  # what killed runs left here
    try:
        return create_temp(place.dfd)
    except OSError as e:
        raise _env_error(shown_as, e, "; nothing was written") from None


def _write_all(fd: int, data: bytes, shown_as: str) -> None:
    view = memoryview(data)
    while view:
        n = os.write(fd, view)
        view = view[n:]


def _unlink_quietly(place: Place, name: str) -> None:
    try:
        os.unlink(name, dir_fd=place.dfd)
    except OSError:
        pass
