"""What `-overcommit` in <qemu:commandline> does to cpu-pm, read as QEMU reads it (pure).

QemuOpts' grammar and how a release combines several -overcommit options are rows of rules.py (OVERCOMMIT,
GRAMMAR); this module only interprets them. With cpu-pm on, KVM strips PV_UNHALT (properties.KVM_STRIPS).
"""

from __future__ import annotations

from . import rules

Version = tuple[int, ...]


def opts_params(arg: str) -> list[tuple[str, str]]:
    """QemuOpts parameters in order (get_opt_name_value): `name=value` (`,,` is a comma inside the value),
    a bare `name` is name=on and `noname` name=off."""
    out: list[tuple[str, str]] = []
    i, n = 0, len(arg)
    while i < n:
        end = i
        while end < n and arg[end] not in "=,":
            end += 1
        if end == n or arg[end] == ",":
            name = arg[i:end]
            if name.startswith(rules.OPTS_FLAG_OFF_PREFIX) and name not in rules.OPTS_HELP:
                out.append((name[len(rules.OPTS_FLAG_OFF_PREFIX):], "off"))
            else:
                out.append((name, "on"))
            i = end + 1
            continue
        name, i, value = arg[i:end], end + 1, []
        while i < n:
            if arg[i] == ",":
                if arg[i + 1:i + 2] != ",":
                    break
                i += 1
            value.append(arg[i])
            i += 1
        out.append((name, "".join(value)))
        i += 1
    return out


def read(args: tuple[str, ...], release: Version | None) -> tuple[bool, str | None]:
    """(cpu-pm on after every -overcommit, QEMU's error for the first one it refuses or None), as QEMU
    `release` reads them (rules.overcommit_rule; an unknown release reads as current)."""
    rule, grammar = rules.overcommit_rule(release), rules.grammar(release)
    on = False
    for arg in args:
        said = None
        for name, value in opts_params(arg):
            if name in rules.OPTS_HELP:
                return on, f"-overcommit {arg}: QEMU prints the option's help and exits"
            if name not in rule.names:
                return on, rule.unknown.format(arg=arg, name=name)
            if name == rules.OVERCOMMIT_CPU_PM:
                said = True if value in grammar.true else False if value in grammar.false else None
                if said is None:
                    return on, rule.refused.format(arg=arg, value=value)
        on = said if said is not None else (on if rule.keeps else False)
    return on, None
