"""What `-overcommit` in <qemu:commandline> does to cpu-pm, read as QEMU reads it (pure).

QemuOpts' grammar and how a release combines several -overcommit options are rows of tables/qemu.py (OVERCOMMIT,
GRAMMAR); this module only interprets them. With cpu-pm on, KVM strips PV_UNHALT (properties.KVM_STRIPS).
"""

from __future__ import annotations

from ..tables import lazyre, qemu
from ..tables.version import Version

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing costs the hook's cold start (see core/memo.py)
    from typing import Iterator


# one QemuOpts parameter (get_opt_name_value): a name up to `=` or `,`; after `=` a value in which `,,` is a
# comma (get_opt_value); then `,` or the end
_PARAM = lazyre.compile(r"([^=,]*)(?:=((?:[^,]|,,)*))?(?:,|\Z)")


def opts_params(arg: str) -> Iterator[tuple[str, str]]:
    """QemuOpts parameters in order: `name=value`, a bare `name` is name=on and `noname` name=off. A
    generator, so a reader that stops at QEMU's first refusal reads no further."""
    n = len(arg)
    for m in _PARAM.finditer(arg):
        if m.start() == n:  # the empty match at the end (after a trailing comma, or of an empty argument)
            return
        name, value = m.group(1, 2)
        if value is not None:
            yield name, value.replace(",,", ",")
        elif name.startswith(qemu.OPTS_FLAG_OFF_PREFIX) and name not in qemu.OPTS_HELP:
            yield name[len(qemu.OPTS_FLAG_OFF_PREFIX):], "off"
        else:
            yield name, "on"


def read(args: tuple[str, ...], release: Version | None) -> tuple[bool, str | None]:
    """(cpu-pm on after every -overcommit, QEMU's error for the first one it refuses or None), as QEMU
    `release` reads them (qemu.overcommit_rule; an unknown release reads as current)."""
    rule, grammar = qemu.overcommit_rule(release), qemu.grammar(release)
    on = False
    for arg in args:
        said = None
        for name, value in opts_params(arg):
            if name in qemu.OPTS_HELP:
                return on, f"-overcommit {arg}: QEMU prints the option's help and exits"
            if name not in rule.names:
                return on, rule.unknown.format(arg=arg, name=name)
            if name == qemu.OVERCOMMIT_CPU_PM:
                said = True if value in grammar.true else False if value in grammar.false else None
                if said is None:
                    return on, rule.refused.format(arg=arg, value=value)
        on = said if said is not None else (on if rule.keeps else False)
    return on, None
