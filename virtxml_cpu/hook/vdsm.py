"""VDSM's before_vm_start hook: add kvm-pv-unhalt to the domain XML VDSM is about to define and start.

The contract, as VDSM's source defines it (oVirt/vdsm fd4b0df20b9b; docs/xml-hooks.md has the detail):
- lib/vdsm/common/hooks.py `_runHooksDir`: every executable file in P_VDSM_HOOKS/before_vm_start/
  (/usr/libexec/vdsm/hooks/, configure.ac `vdsmhooksdir`) is run in sorted name order, with no
  arguments (through taskset: lib/vdsm/common/commands.py `start`, reset_cpu_affinity), in VDSM's working
  directory, stdout and stderr captured, no timeout (`communicate()`). The domain XML is in a file VDSM
  made with tempfile.mkstemp(); env `_hook_domxml` names it. The file as the last hook leaves it, read
  back from that same path, is the XML VDSM goes on with: edit it in place.
- The environment: VDSM's own, plus the VM's custom properties, `vmId`, and PYTHONPATH extended with
  VDSM's hook module (vdsm.hook.hooking); VDSM runs as the user vdsm (static/.../vdsmd.service.in
  `User=@VDSMUSER@`, configure.ac VDSMUSER=vdsm).
- Exit status: lib/vdsm/hook/hooking.py says 0 ok, 1 failed (other hooks still run), 2 failed (no
  further hook runs), >2 reserved (logged as unexpected). For before_vm_start every non-zero status is an
  error: hooks.py `before_vm_start` raises HookError once the hooks ran, and lib/vdsm/virt/vm.py
  `_startUnderlyingVm` turns that into a failed start (setDownStatus(ERROR, ...)). stderr is logged
  (`'%s: rc=%s err=%s'`) whatever the status.

So this hook always exits 0; whatever it cannot do leaves the file as VDSM wrote it, and its one line on
stderr says why. It reads and writes only the file VDSM named (a regular file, locked and replaced whole
under the same name, as `rewrite --in-place` does: fs/files.py `update_in_place`); nothing in the XML or
the environment names another path, and no custom property steers it.
"""

from __future__ import annotations

import os
import sys

from .xmlhook import PASSED_THROUGH, Edit, edit, one_line

DOMXML_VARIABLE = "_hook_domxml"  # lib/vdsm/common/hooks.py: scriptenv['_hook_domxml'] = data_filename
PREFIX = "virtxml-cpu vdsm hook: "


def main(environ=None, config_path: str | None = None) -> int:
    """Edit the file `_hook_domxml` names; one line on stderr; always 0 (VDSM fails the start otherwise).
    `config_path` None: the libvirt hook's default, constants.CONFIG_PATH."""
    environ = os.environ if environ is None else environ
    try:
        line = run(environ, config_path)
    except Exception as e:  # noqa: BLE001 - never fail a VM start for our own error
        line = one_line(f"{type(e).__name__}: {e}; {PASSED_THROUGH}")
    sys.stderr.write(PREFIX + line + "\n")
    return 0


def run(environ, config_path: str | None) -> str:
    """The line to log: what was done to the file `_hook_domxml` names, or why nothing was."""
    from ..errors import VirtxmlCpuError
    from ..fs.files import update_in_place

    path = environ.get(DOMXML_VARIABLE, "")
    label = f"vm {environ.get('vmId') or '-'}"
    if not path or not os.path.isabs(path) or "\0" in path:
        return one_line(f"{label}: ${DOMXML_VARIABLE} is {'not set' if not path else 'not an absolute path'}; "
                        "nothing to edit")

    def transform(data: bytes) -> tuple[bytes | None, Edit]:
        result = edit(data, label, config_path)
        return (result.output if result.changed else None), result

    try:
        _, result, _ = update_in_place(path, transform)
    except VirtxmlCpuError as e:  # the file could not be read or replaced: VDSM still has it as it wrote it
        return one_line(f"{label}: {e}; {PASSED_THROUGH}")
    return result.line


if __name__ == "__main__":
    sys.exit(main())
