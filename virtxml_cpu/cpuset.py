"""libvirt's cpuset syntax, read as libvirt reads it (pure).

A mirror of virBitmapParseInternal (libvirt src/util/virbitmap.c, 9.0.0 and later; virBitmapParse before
that, same grammar): comma-separated fields read left to right, each `N` (set N), `N-M` (set N..M, M >= N)
or `^N` (clear N from what the fields before it set; `^N-M` is an error). Blanks are skipped around numbers
and after commas, a trailing comma is accepted, numbers are C ints read by strtol (so the end of a range may
carry a sign: `0-+3`), and every number must be below VIR_DOMAIN_CPUMASK_LEN (16384, src/conf/domain_conf.h)
because the domain parser calls virBitmapParse with that size. An empty result is valid here; the element
parsers refuse it with their own message (see libvirt_xml.PLACEMENT).
"""

from __future__ import annotations

CPUMASK_LEN = 16384  # VIR_DOMAIN_CPUMASK_LEN
_BLANK = " \t\n\v\f\r"  # g_ascii_isspace / C isspace: what virSkipSpaces and strtol skip
_DIGITS = "0123456789"
_INT_MAX = 2**31 - 1


class CpusetError(ValueError):
    """libvirt's own message for a cpuset it refuses."""


def _skip(s: str, i: int) -> int:
    while i < len(s) and s[i] in _BLANK:
        i += 1
    return i


def _strtol(s: str, i: int) -> tuple[int | None, int]:
    """virStrToLong_i: strtol base 10 (blanks, an optional sign, digits) that must fit a C int."""
    j = _skip(s, i)
    sign = 1
    if j < len(s) and s[j] in "+-":
        sign = -1 if s[j] == "-" else 1
        j += 1
    k = j
    while k < len(s) and s[k] in _DIGITS:
        k += 1
    if k == j:
        return None, i
    value = sign * int(s[j:k])
    return (value if -_INT_MAX - 1 <= value <= _INT_MAX else None), k


def parse(text: str) -> frozenset[int]:
    """The set of CPU numbers `text` names; CpusetError with libvirt's message when libvirt refuses it."""
    def bad() -> CpusetError:
        return CpusetError(f"Failed to parse bitmap '{text}'")

    s = text
    i = _skip(s, 0)
    if i == len(s):
        raise bad()
    cpus: set[int] = set()
    neg = False
    while i < len(s):
        if s[i] == "^":
            i += 1
            neg = True
        if i == len(s) or s[i] not in _DIGITS:
            raise bad()
        start, i = _strtol(s, i)
        if start is None:
            raise bad()
        i = _skip(s, i)
        if i == len(s) or s[i] == ",":
            if start >= CPUMASK_LEN:
                raise bad()
            (cpus.discard if neg else cpus.add)(start)
        elif s[i] == "-":
            if neg:
                raise bad()
            last, i = _strtol(s, _skip(s, i + 1))
            if last is None or last < start or last >= CPUMASK_LEN:
                raise bad()
            cpus.update(range(start, last + 1))
            i = _skip(s, i)
        if i < len(s) and s[i] == ",":
            i = _skip(s, i + 1)
            neg = False
        elif i < len(s):
            raise bad()
    return frozenset(cpus)


def format(cpus) -> str:  # noqa: A001 - the counterpart of virBitmapFormat, named as libvirt names it
    """virBitmapFormat: ascending, runs as `N-M`, e.g. `0-3,5`; '' for no CPU."""
    out: list[str] = []
    run: list[int] = []
    for c in sorted(cpus):
        if run and c == run[-1] + 1:
            run.append(c)
            continue
        if run:
            out.append(str(run[0]) if len(run) == 1 else f"{run[0]}-{run[-1]}")
        run = [c]
    if run:
        out.append(str(run[0]) if len(run) == 1 else f"{run[0]}-{run[-1]}")
    return ",".join(out)
