"""libvirt's cpuset syntax, read as libvirt reads it (pure).

A mirror of virBitmapParseInternal (libvirt src/util/virbitmap.c, 9.0.0 and later; virBitmapParse before
that, same grammar): comma-separated fields read left to right, each `N` (set N), `N-M` (set N..M, M >= N)
or `^N` (clear N from what the fields before it set; `^N-M` is an error). Blanks are skipped around numbers
and after commas, a trailing comma is accepted, numbers are C ints read by strtol (so the end of a range may
carry a sign: `0-+3`), and every number must be below VIR_DOMAIN_CPUMASK_LEN (16384, src/conf/domain_conf.h)
because the domain parser calls virBitmapParse with that size. An empty result is valid here; the element
parsers refuse it with their own message (see libvirt_xml.PLACEMENT).

A set is kept as an int bitmask (bit N: CPU N) while it is read, so each field costs one operation on at
most 16384 bits whatever its range: a 4 MiB cpuset of `0-16383,` fields is read in linear time, not
16384 set insertions per field.
"""

from __future__ import annotations

from collections import Counter
from functools import lru_cache
from itertools import accumulate, chain, compress
from operator import gt, not_

from ..tables import lazyre  # compiled where first used (the hook's cold start)

CPUMASK_LEN = 16384  # VIR_DOMAIN_CPUMASK_LEN
_INT_MAX = 2**31 - 1


class CpusetError(ValueError):
    """libvirt's own message for a cpuset it refuses."""


_B = r"[ \t\n\v\f\r]"  # g_ascii_isspace / C isspace: what virSkipSpaces and strtol skip
_FIELDS = lazyre.compile(rf"(,{_B}*(\^?)([0-9]+){_B}*(?:-{_B}*([+-]?[0-9]+){_B}*)?)")  # a comma and one field
_LONG = lazyre.compile(r"[0-9]{10}")
_ODD = lazyre.compile(r"[^0-9,-]|--|[0-9]{10}")  # a blank, `^`, a sign or a long number: read field by field
_MISPLACED = lazyre.compile(r",,|,-|-,|-[0-9]*-|[,-]\Z")  # with _ODD: a field that is not `N` or `N-M`
_STARTS = lazyre.compile(r",([0-9]+)")  # each field's first number
_ENDS = lazyre.compile(r"([0-9]+)(?=,|\Z)")  # each field's last number (its first, when it has one)
_BLANK = " \t\n\v\f\r"  # the same, for str.strip
_MANY = 256  # ranges merged by counting rather than one mask operation each (about the same cost here)


def _number(digits: str) -> int | None:
    """virStrToLong_i on what the grammar has matched: an int that fits a C int, else None (strtol's
    ERANGE); int() is never given more than 11 digits (it refuses more than 4300)."""
    sign = -1 if digits[:1] == "-" else 1
    digits = digits.lstrip("+-").lstrip("0") or "0"
    if len(digits) > 10:
        return None
    value = sign * int(digits)
    return value if -_INT_MAX - 1 <= value <= _INT_MAX else None


def parse(text: str) -> frozenset[int]:
    """The set of CPU numbers `text` names; CpusetError with libvirt's message when libvirt refuses it."""
    return frozenset(members(mask(text)))


@lru_cache(maxsize=4)  # one parse per text: a document's <vcpupin>s often repeat one cpuset (16384 of them)
def mask(text: str) -> int:
    """parse() as a bitmask (bit N set: CPU N), in time linear in len(text).

    A CPU ends up set when a range names it after the last `^N` that clears it. So only the last
    occurrence of each distinct field matters, and reading those from the end, a range adds its CPUs but
    the ones a later `^N` cleared: 524,000 `0-16383` fields are one range, and the ranges between two new
    `^N` are merged at once. Every field is still checked as libvirt checks it."""
    def bad() -> CpusetError:
        return CpusetError(f"Failed to parse bitmap '{text}'")

    plain = _plain_mask(text)
    if plain is not None:
        return plain
    fields = text.split(",")
    if len(fields) > 1 and not fields[-1].strip(_BLANK):
        fields.pop()  # libvirt accepts a trailing comma (and blanks after it)
    unique = dict.fromkeys(reversed(fields))  # each field once, at its last occurrence
    distinct = "," + ",".join(unique)
    if not _ODD.search(distinct) and not _MISPLACED.search(distinct):  # `N` and `N-M` alone (9 digits at most): in C
        starts, ends = list(map(int, _STARTS.findall(distinct))), list(map(int, _ENDS.findall(distinct)))
        if any(map(gt, starts, ends)) or max(ends) >= CPUMASK_LEN:
            raise bad()
        return _cover(starts, ends)
    found = _FIELDS.findall(distinct)
    if len(found) != len(unique) or sum(len(f[0]) for f in found) != len(distinct):
        raise bad()  # a field that is not all of one match (each match holds one comma, at its start)
    number = _number if _LONG.search(distinct) else int  # up to 9 digits fit a C int
    cpus, cleared, ranges = 0, 0, []
    for _whole, neg, first, last in found:
        start = number(first)
        if start is None:
            raise bad()
        if neg:
            if last or start >= CPUMASK_LEN:  # `^N-M`, or past the mask
                raise bad()
            if not cleared >> start & 1:
                cpus |= _union(ranges) & ~cleared
                cleared |= 1 << start
                ranges = []
            continue
        end = number(last) if last else start
        if end is None or end < start or end >= CPUMASK_LEN:
            raise bad()
        ranges.append((start, end))
    return cpus | _union(ranges) & ~cleared


def _plain_mask(text: str) -> int | None:
    """mask() of `text` when it is only `N` and `N-M` fields (and a trailing comma), the form libvirt
    writes; None for anything else (blanks, `^`, signs, empty fields, `N-M-K`, a number of 10 digits or
    more), which mask() reads field by field.

    Without `^` the fields' order and repeats do not matter, so each step is one pass of C over the text
    or its numbers: the fields are counted by their strings and only the distinct strings are read as
    numbers (at most a few per CPU once every number is below 16384). A 4 MiB cpuset of 400,000 distinct
    ranges costs about two splits of the text, where reading each field costs several times that."""
    if not text.isascii():
        return None
    raw = text.encode("ascii")
    if raw[-1:] == b",":
        raw = raw[:-1]  # libvirt accepts one trailing comma
    shape = raw.translate(None, _DIGITS)  # what separates the numbers: `,` and `-` alone if plain
    if (not raw or shape.strip(b",-") or raw[:1] in b",-" or raw[-1:] in b",-" or b",," in raw or b"--" in shape
            or b",-" in raw or b"-," in raw or _LONG_RUN in raw.translate(_ZEROS)):
        return None
    dashes = shape.count(b"-")
    if dashes == shape.count(b",") + 1:  # every field a range
        numbers, singles = raw.replace(b"-", b",").split(b","), []
    elif not dashes:
        numbers, singles = [], raw.split(b",")
    else:
        fields, kinds = raw.split(b","), shape.split(b",")  # kinds: b"-" for a range, b"" for one number
        numbers = b",".join(compress(fields, kinds)).replace(b"-", b",").split(b",")
        singles = list(compress(fields, map(not_, kinds)))
    starts, ends, lone = numbers[0::2], numbers[1::2], Counter(singles)
    first, last = Counter(starts), Counter(ends)
    value = {k: int(k) for k in first.keys() | last.keys() | lone.keys()}
    if max(value.values()) >= CPUMASK_LEN or any(map(gt, map(value.__getitem__, starts), map(value.__getitem__, ends))):
        raise CpusetError(f"Failed to parse bitmap '{text}'")
    if len(starts) + len(singles) <= _MANY:  # the usual few fields: one mask operation each, not 16384 depths
        return _cover([value[k] for k in chain(starts, singles)], [value[k] for k in chain(ends, singles)])
    first.update(lone)
    last.update(lone)
    return _cover_counted(_by_value(first, value), _by_value(last, value))


def _by_value(counted: Counter, value: dict) -> Counter:
    """Counts of number strings as counts of the numbers they read as (`01` and `1` are one CPU)."""
    out: Counter = Counter()
    for k, n in counted.items():
        out[value[k]] += n
    return out


_DIGITS = b"0123456789"
_ZEROS = bytes.maketrans(b"123456789", b"000000000")
_LONG_RUN = b"0" * 10  # ten digits in a row: past what a C int surely holds, left to strtol's range check


def _union(ranges: list) -> int:
    """Every CPU of `ranges` (start, end)."""
    return _cover([start for start, _end in ranges], [end for _start, end in ranges])


def _cover(starts: list, ends: list) -> int:
    """Every CPU of the ranges starts[i]..ends[i]: one mask operation per range when they are few, else by
    counting where ranges start and end (in C)."""
    if len(starts) <= _MANY:
        cpus = 0
        for start, end in zip(starts, ends):
            cpus |= ((1 << (end + 1 - start)) - 1) << start
        return cpus
    return _cover_counted(Counter(starts), Counter(ends))


def _cover_counted(starts: Counter, ends: Counter) -> int:
    """Every CPU of ranges given as how many start and how many end at each CPU."""
    depth = [0] * (CPUMASK_LEN + 1)
    for cpu, n in starts.items():
        depth[cpu] += n
    for cpu, n in ends.items():
        depth[cpu + 1] -= n
    covered = bytes(map(bool, accumulate(depth[:CPUMASK_LEN])))  # 1 where some range covers the CPU
    return int(covered[::-1].translate(_DIGIT), 2)


_DIGIT = bytes.maketrans(b"\x00\x01", b"01")


def members(cpus: int):
    """The CPU numbers of a bitmask, ascending."""
    bits = bin(cpus)[:1:-1]  # bit 0 first
    return (i for i, b in enumerate(bits) if b == "1")


def format(cpus) -> str:  # noqa: A001 - the counterpart of virBitmapFormat, named as libvirt names it
    """virBitmapFormat: ascending, runs as `N-M`, e.g. `0-3,5`; '' for no CPU. `cpus`: CPU numbers or a mask."""
    if isinstance(cpus, int):
        cpus = members(cpus)
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
