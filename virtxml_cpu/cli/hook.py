"""`virtxml-cpu hook install|uninstall|status`: the libvirt qemu hook (hook/install.py, hook/status.py)."""

from __future__ import annotations

import json

from ..constants import DEFAULT_URI, DIGEST_DIR
from ..core.config import HOOK_MODES
from ..errors import EXIT_OK, EXIT_WORK_FOUND
from ..hook.install import DEFAULT_HOOKS_DIR
from .live import unverified_note
from .options import EPILOG, config_option


def arguments(sub):
    p = sub.add_parser("hook", help="install, remove or inspect the libvirt qemu hook", epilog=EPILOG)
    p.add_argument("action", choices=("install", "uninstall", "status"))
    p.add_argument("--hooks-dir", default=DEFAULT_HOOKS_DIR, help=f"default {DEFAULT_HOOKS_DIR}")
    p.add_argument("--mode", choices=HOOK_MODES, help="audit (log), enforce (refuse the start), queue "
                                                     "(log and queue the fix for `apply --pending`)")
    config_option(p, "config file the hook reads")
    p.add_argument("--format", choices=("table", "json"), default="table",
                   help="status: json gives the hook, libvirt and the local QEMU build with its last verify pass")
    p.add_argument("--digest-dir", default=DIGEST_DIR, metavar="DIR",
                   help=f"where the hook keeps its decisions for repeat starts, a directory only root can change "
                        f"(default {DIGEST_DIR}; '' keeps none)")
    place = p.add_mutually_exclusive_group()
    place.add_argument("--legacy", action="store_true", default=None,
                       help="install as DIR/qemu (libvirt < 6.5); default: decided from libvirtd --version")
    place.add_argument("--qemu-d", dest="legacy", action="store_false", help="install into DIR/qemu.d/")
    return p


def main(args) -> int:
    from ..hook import install, status

    if args.action == "install":
        lines = install.install(args.hooks_dir, args.mode, args.config, args.legacy, args.digest_dir)
        unverified_note([DEFAULT_URI])
    elif args.action == "uninstall":
        lines = install.uninstall(args.hooks_dir)
    elif args.format == "json":
        rec = status.status_json(args.hooks_dir)
        print(json.dumps(rec))
        return EXIT_OK if rec["trusted"] else EXIT_WORK_FOUND
    else:
        installed, lines = status.status(args.hooks_dir)
        print("\n".join(lines))
        return EXIT_OK if installed else EXIT_WORK_FOUND
    print("\n".join(lines))
    return EXIT_OK
