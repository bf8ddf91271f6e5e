"""Reading inputs and writing files so that a user's file is never lost, half-written or swapped.

- `--in-place` locks the file, reads it, and renames a complete new file over it; a run that waited for the
  lock sees the renamed file, so concurrent runs on one file make exactly one change.
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
from typing import TypeVar

from .errors import BadInput, EnvironmentProblem, VirtxmlCpuError, shown
from .safefs import create_temp, remove_stale_temps
from .xmlio import MAX_INPUT_BYTES

T = TypeVar("T")
MAX_BACKUP_NUMBER = 999


def _env_error(path: str, e: OSError, what: str = "") -> EnvironmentProblem:
    reason = "permission denied" if isinstance(e, PermissionError) else (e.strerror or str(e))
    return EnvironmentProblem(f"{shown(path)}: {reason}{what}")


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


def _require_regular(path: str, what: str) -> os.stat_result:
    try:
        st = os.stat(path)
    except FileNotFoundError:
        raise BadInput(f"{shown(path)}: no such file") from None
    except OSError as e:
        raise _env_error(path, e) from None
    if not stat.S_ISREG(st.st_mode):
        raise BadInput(f"{shown(path)} is not a regular file (a directory, device, FIFO or socket); {what}")
    return st


def update_in_place(path: str, transform: Callable[[bytes], tuple[bytes | None, T]],
                    backup_suffix: str | None = None) -> tuple[bool, T, str | None]:
    """Lock `path`, read it, and replace it with `transform(data)[0]` unless that is None or unchanged.

    Returns (written, transform's second value, backup path). Through a symbolic link, the link's target
    is updated and the link kept."""
    real = os.path.realpath(path)
    _require_regular(real, "--in-place replaces regular files only; nothing was written")
    while True:
        try:
            fd = os.open(real, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK)
        except OSError as e:
            raise _env_error(path, e) from None
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode):
                raise BadInput(f"{shown(path)} is not a regular file; nothing was written")
            fcntl.flock(fd, fcntl.LOCK_EX)
            try:
                now = os.stat(real)
            except FileNotFoundError:
                raise BadInput(f"{shown(path)} was removed while waiting to update it; nothing was written") from None
            if (now.st_dev, now.st_ino) != (st.st_dev, st.st_ino):
                continue  # another run renamed a new file into place while we waited: read that one
            data = _read_fd(fd, path)
            new, result = transform(data)
            if new is None or new == data:
                return False, result, None
            backup = write_backup(real, backup_suffix, data, st) if backup_suffix else None
            _replace(real, new, st, path)
            return True, result, backup
        finally:
            os.close(fd)  # releases the lock


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


def write_backup(real: str, suffix: str, data: bytes, st: os.stat_result) -> str:
    """FILE+SUFFIX holding `data`, created without following links and without replacing anything; when
    it exists, FILE+SUFFIX.1, .2, ... Returns the path written."""
    directory = os.path.dirname(real) or "."
    kept = _existing_backup(real, suffix, data, st)
    if kept:
        return kept
    fd, tmp = _mkstemp(directory, real)
    try:
        try:
            _write_all(fd, data, tmp)
            _keep_attributes(fd, tmp, real, st)
            os.fsync(fd)
        except OSError as e:
            raise _env_error(real + suffix, e, " (writing the backup); nothing was written") from None
        for n in range(MAX_BACKUP_NUMBER + 1):
            dest = real + suffix + (f".{n}" if n else "")
            try:
                os.link(tmp, dest)  # fails on anything already there, a dangling link included
                return dest
            except FileExistsError:
                continue
            except OSError as e:
                if e.errno not in (errno.EPERM, errno.EOPNOTSUPP, errno.EXDEV):
                    raise _env_error(dest, e, "; nothing was written") from None
                if _create_exclusive(dest, data, st):  # a filesystem without hard links
                    return dest
        raise EnvironmentProblem(f"{shown(real + suffix)}: {MAX_BACKUP_NUMBER} backups exist already; "
                                 "nothing was written")
    finally:
        os.close(fd)
        _unlink_quietly(tmp)


def _existing_backup(real: str, suffix: str, data: bytes, st: os.stat_result) -> str | None:
    """The newest existing backup when it holds exactly `data` (a run killed after its backup and before
    its rename left it): reused, so the next run completes without a second backup. Only a regular file
    of ours, never through a link."""
    newest = None
    for n in range(MAX_BACKUP_NUMBER + 1):
        dest = real + suffix + (f".{n}" if n else "")
        if not os.path.lexists(dest):
            break
        newest = dest
    if newest is None:
        return None
    try:
        have = os.lstat(newest)
        if not stat.S_ISREG(have.st_mode) or have.st_size != len(data) or have.st_uid != st.st_uid:
            return None
        fd = os.open(newest, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        return newest if _read_fd(fd, newest) == data else None
    except VirtxmlCpuError:
        return None
    finally:
        os.close(fd)


def _create_exclusive(dest: str, data: bytes, st: os.stat_result) -> bool:
    try:
        fd = os.open(dest, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, st.st_mode & 0o7777)
    except FileExistsError:
        return False
    except OSError as e:
        raise _env_error(dest, e, "; nothing was written") from None
    try:
        _write_all(fd, data, dest)
        os.fsync(fd)
    finally:
        os.close(fd)
    return True


def write_output(path: str, data: bytes, inputs: list[str]) -> None:
    """`-o FILE`: replace a regular file atomically (keeping its owner, mode, xattrs) or create it; refuse a
    device or FIFO unless it is this process's own stdout, and refuse any input file under another name."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        st = None
    except OSError as e:
        raise _env_error(path, e) from None
    if st is not None:
        for name in inputs:
            try:
                if name != "-" and os.path.samefile(name, path):
                    raise BadInput(f"-o {shown(path)} is the input file {shown(name)}; use --in-place")
            except OSError:
                continue
        if not stat.S_ISREG(st.st_mode):
            out = os.fstat(sys.stdout.fileno())
            if (out.st_dev, out.st_ino) == (st.st_dev, st.st_ino):
                sys.stdout.buffer.write(data)
                sys.stdout.flush()
                return
            raise BadInput(f"-o {shown(path)} is not a regular file (a device, FIFO or socket); nothing was written")
    _replace(os.path.realpath(path), data, st, path)


def _replace(real: str, data: bytes, st: os.stat_result | None, shown_as: str) -> None:
    """Temp file in the same directory, attributes copied, fsync, rename, fsync the directory."""
    directory = os.path.dirname(real) or "."
    fd, tmp = _mkstemp(directory, shown_as)
    try:
        _write_all(fd, data, shown_as)
        if st is None:
            umask = os.umask(0)
            os.umask(umask)
            os.fchmod(fd, 0o666 & ~umask)
        else:
            _keep_attributes(fd, tmp, real, st)
        os.fsync(fd)
        os.replace(tmp, real)
    except OSError as e:
        _unlink_quietly(tmp)
        raise _env_error(shown_as, e, "; the original is unchanged") from None
    except BaseException:
        _unlink_quietly(tmp)
        raise
    finally:
        os.close(fd)
    _fsync_dir(directory)


def _keep_attributes(fd: int, tmp: str, real: str, st: os.stat_result) -> None:
    """Owner, group, mode, then extended attributes (ACLs included) of `real` onto the new file; refuse
    with a clear message when they cannot all be kept."""
    if (st.st_uid, st.st_gid) != (os.geteuid(), os.getegid()):
        try:
            os.fchown(fd, st.st_uid if st.st_uid != os.geteuid() else -1, st.st_gid)
        except PermissionError:
            _unlink_quietly(tmp)
            raise EnvironmentProblem(
                f"{shown(real)}: cannot keep its owner/group {st.st_uid}:{st.st_gid} (only root or the owner "
                "may); nothing was written; run as that user or as root") from None
    os.fchmod(fd, stat.S_IMODE(st.st_mode))
    try:
        names = os.listxattr(real)
    except OSError as e:
        if e.errno in (errno.ENOTSUP, errno.EOPNOTSUPP):
            return
        raise
    for name in names:
        try:
            os.setxattr(fd, name, os.getxattr(real, name))
        except OSError as e:
            _unlink_quietly(tmp)
            raise EnvironmentProblem(f"{shown(real)}: cannot keep its extended attribute {name} "
                                     f"({e.strerror}); nothing was written") from None


def _mkstemp(directory: str, shown_as: str) -> tuple[int, str]:
    remove_stale_temps(directory)  # what killed runs left here
    try:
        return create_temp(directory)
    except OSError as e:
        raise _env_error(shown_as, e, "; nothing was written") from None


def _write_all(fd: int, data: bytes, shown_as: str) -> None:
    view = memoryview(data)
    while view:
        n = os.write(fd, view)
        view = view[n:]


def _fsync_dir(directory: str) -> None:
    try:
        dfd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    except OSError:
        return
    try:
        os.fsync(dfd)
    except OSError:
        pass
    finally:
        os.close(dfd)


def _unlink_quietly(path: str) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass
