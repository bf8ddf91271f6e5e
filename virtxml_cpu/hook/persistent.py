"""Whether the domain the hook was called for has a persistent definition, told without calling libvirt.

libvirt's qemu driver keeps each persistent definition as `<config dir>/NAME.xml` (virDomainConfigFile:
`/etc/libvirt/qemu/NAME.xml` for the system daemon) from `virsh define` until `virsh undefine`; a domain
started with `virsh create` (createXML: OpenNebula's deploy, CloudStack's agent) has none. At `prepare begin`
of `virsh start` the file is there, at that of `virsh create` it is not (seen on libvirt 9.0 and 11.3).

The directory is the config's `[hook] libvirt_config_dir` (default above; "" turns the check off). Root
reads here a name that comes from the hook's argv, so: the name must be one libvirt could have written
(not empty, no `/`, no NUL, not `.` or `..`, short enough for a file name), the directory is opened with
O_DIRECTORY|O_NOFOLLOW and the file looked at relative to that descriptor with fstatat(AT_SYMLINK_NOFOLLOW):
no link is followed and nothing is opened or read. Only a regular file counts; anything else, or a name or
directory that cannot be checked, is "cannot tell" (None), and the hook then acts as it always did.
"""

from __future__ import annotations

import os
import stat

from ..constants import LIBVIRT_CONFIG_DIR

MAX_NAME_BYTES = 255 - len(".xml")


def has_definition(name: str, config_dir: str = LIBVIRT_CONFIG_DIR) -> bool | None:
    """True when libvirt keeps a persistent definition for `name` in `config_dir`, False when it keeps none,
    None when that cannot be told (no directory configured or there, a bad name, a link, not a file)."""
    if not config_dir or not name or name in (".", "..") or "/" in name or "\0" in name:
        return None
    try:
        file_name = name.encode("utf-8", "surrogateescape") + b".xml"
    except UnicodeError:
        return None
    if len(file_name) > MAX_NAME_BYTES + len(b".xml"):
        return None
    flags = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)
    try:
        dfd = os.open(config_dir, flags)
    except OSError:
        return None
    try:
        st = os.stat(file_name, dir_fd=dfd, follow_symlinks=False)
    except FileNotFoundError:
        return False
    except OSError:
        return None
    finally:
        os.close(dfd)
    return True if stat.S_ISREG(st.st_mode) else None
