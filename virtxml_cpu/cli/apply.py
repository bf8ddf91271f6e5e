"""`virtxml-cpu apply`: fix persistent definitions through libvirt, host by host; a host that cannot be
reached gets the command that finishes its work."""

from __future__ import annotations

import sys

from ..constants import DEFAULT_URI
from ..errors import EXIT_BAD_INPUT, EXIT_ENVIRONMENT, EXIT_OK, EXIT_WORK_FOUND, BadInput
from .live import deciding_options, live_sources, require_libvirt, unverified_note
from .options import include_managed, live_verb
from .output import err, for_stdout


def arguments(sub):
    p = live_verb(sub, "apply", "fix persistent definitions through libvirt",
                  "Rewrite the persistent definitions of libvirt domains (read with INACTIVE|SECURE, so secrets "
                  "survive) and define them again. A running guest is never touched: the change applies at "
                  "its next cold boot. Give the names after --, options before it.")
    which, show = p.add_mutually_exclusive_group(), p.add_mutually_exclusive_group()
    which.add_argument("--all", action="store_true", help="every domain on the connection")
    which.add_argument("--pending", action="store_true", help="the fixes the hook queued (queue mode)")
    show.add_argument("--dry-run", action="store_true", help="say what would change; exit 1 if anything would")
    show.add_argument("--diff", action="store_true", help="show the diffs; change nothing")
    p.add_argument("-y", "--yes", action="store_true", help="do not ask before defining")
    include_managed(p)
    return p


def ask(prompt: str) -> bool:
    return input(prompt).strip().lower() in ("y", "yes")


def main(args) -> int:
    require_libvirt()
    from ..core import config
    from ..core.precedence import timeouts
    from ..live.apply import ApplyOptions, ApplyResult, Selection, apply_with_deadline
    from ..live.records import FAILED, UNKNOWN, WOULD_CHANGE
    from ..render.applylines import summary
    from ..render.commands import apply_fix

    if not (args.domains or args.all or args.pending):
        raise BadInput("name domains, or use --all or --pending")
    confirm = ask if not args.yes and sys.stdin.isatty() else None
    if confirm is None and not (args.yes or args.dry_run or args.diff):
        raise BadInput("not a terminal: pass --yes to define without asking, or --dry-run/--diff")
    cfg = config.load(args.config)
    timeout, host_timeout = (c.value for c in timeouts(args.timeout, cfg))
    opts = ApplyOptions(cfg, args.policy, args.style, args.dry_run, args.diff, args.yes,
                        sources=live_sources(args, cfg), confirm=confirm, timeout=timeout, shown_diff=for_stdout,
                        include_managed=args.include_managed)
    which = Selection(tuple(args.domains), args.all, args.pending)
    total, down = ApplyResult(), []
    for uri in args.connect or [DEFAULT_URI]:
        res, problem = apply_with_deadline(uri, which, opts, host_timeout)
        total.add(res)
        if problem:  # one unreachable or wedged host does not stop the others
            err(problem)
            down.append(uri)
            if res.todo:  # the domains it did not reach, as the command that finishes them
                mode = ["--pending"] if args.pending else []
                mode += ["--dry-run"] if args.dry_run else ["--diff"] if args.diff else ["--yes"] if args.yes else []
                mode += ["--include-managed"] if args.include_managed else []
                print(f"finish with: {apply_fix(uri, [] if args.pending else res.todo, mode + deciding_options(args))}",
                      file=sys.stderr)
    print(summary(total.tally, down), file=sys.stderr)
    unverified_note(args.connect or [DEFAULT_URI])
    if total.tally[FAILED] or down:
        return EXIT_ENVIRONMENT
    if total.tally[UNKNOWN]:
        return EXIT_BAD_INPUT
    return EXIT_WORK_FOUND if total.tally[WOULD_CHANGE] else EXIT_OK
