"""Two bounds on a document's shape, checked on the raw bytes before any parser sees them, each in time
linear in the size: how many attributes an element carries, and how many namespace declarations are in
scope at an element. libxml2 before 2.12 is quadratic in both; no domain definition comes near either."""

from __future__ import annotations

from itertools import compress, repeat
from operator import ge

from ..tables import lazyre  # module-level patterns compiled where first used (the hook's cold start)

# libvirt's domain schema (src/conf/schemas/domaincommon.rng) gives no element more than a few dozen
# attributes (a disk's <driver>, among the busiest, about twenty), and what applications keep in <metadata>
# (libosinfo, nova, virt-manager) has a handful per element; an element past the bound is refused like any
# other bad input (the hook starts the guest unchecked, with its one line). libxml2 before 2.12 checks
# each attribute of an element against all the ones before it: 43,000 attributes on one element cost about
# 10 s to parse with Debian 11's libxml2 2.9.10, and even 4 MiB of elements at this bound stay well under one.
MAX_ATTRIBUTES = 256
_CROWDED = lazyre.compile(rb"[^\s/>!?]+(?:\s+[^\s=/>]+\s*=\s*(?:\"[^\"]*\"|'[^']*')){%d}" % MAX_ATTRIBUTES)


def has_crowded_element(data: bytes) -> bool:
    """Whether a start tag carries MAX_ATTRIBUTES attributes or more, in time linear in the input. An
    attribute value cannot hold `<`, so each start tag with all its attributes lies within one piece of the
    bytes split at `<`, and each attribute puts one `=` there: only pieces with that many `=` are matched
    against the start tag's grammar: `=` in text or in values is no attribute, but a start tag written out
    inside a comment or CDATA counts as one (no definition holds one of that size either)."""
    if data.count(b"=") < MAX_ATTRIBUTES:
        return False
    pieces = data.split(b"<")
    crowded = compress(pieces, map(ge, map(bytes.count, pieces, repeat(b"=")), repeat(MAX_ATTRIBUTES)))
    return any(_CROWDED.match(piece) for piece in crowded)


# libxml2 before 2.12 (Debian 11's 2.9.10, Debian 12's 2.9.14) looks an element's and each prefixed
# attribute's namespace up through every declaration in scope, one by one: 250 nested elements of 255
# declarations each, then 4 MiB of elements, took 14-24 s to parse there (72-112 s with prefixed
# attributes), a plain 4 MiB definition 0.2-0.3 s. No real definition comes near the bound: libvirt's test
# definitions (9.0's tests/*data, 6,100 files), virt-manager's tests/data (406) and ours have at most 3
# declarations in scope at any element (docs/security.md). At 64, 4 MiB of elements each looking up a
# namespace behind all 64 cost about what a plain 4 MiB definition costs.
MAX_NAMESPACES_IN_SCOPE = 64


def _scope_token_pattern() -> bytes:
    """The regular expression namespaces_in_scope steps with. What changes no namespace scope is skipped in
    the pattern itself: text, comments, CDATA sections, PIs and elements of up to ITEM_LEVELS levels that declare
    nothing. Then the next token that may change it: a run of start tags (up) or of end tags (down), each
    with what lies between them that changes no depth, written without `>` in text or values (so the run's
    depth change is counted from its `<`, `</` and `/>`); any other start tag (tag); any other `<`
    (other); or the end. Every repetition is written unrolled (`normal* (special normal*)*`, the specials
    starting with characters the normal ones exclude) and markup atomically: a failed match gives
    characters back one at a time and never re-splits a run, so no match costs more than a pass over what
    it covers."""
    name = rb"[^\s!?/<>\"']"
    groups = iter(range(1, 100))

    def markup() -> bytes:
        """A comment, CDATA section or PI, matched atomically (a lookahead, then its capture): a failure
        later never stretches it to a later end."""
        g = next(groups)
        return rb"(?=(?P<m%d>%s))(?P=m%d)" % (g, _MARKUP, g)

    def attributes(gt: bool) -> bytes:
        """Attributes that declare nothing (`xmlns` only in values); `>` in values only if `gt`."""
        v = b"" if gt else b">"
        return rb"[^<>\"'x]*(?:(?:x(?!mlns)|\"[^\"<%s]*\"|'[^'<%s]*')[^<>\"'x]*)*" % (v, v)

    def item(levels: int, gt: bool) -> bytes:
        """An element of at most `levels` levels that declares nothing (`>` allowed in it only if `gt`)."""
        text = rb"[^<]*" if gt else rb"[^<>]*"
        element = rb"<%s%s/>" % (name, attributes(gt))
        for _ in range(levels):
            special = rb"%s|%s" % (markup(), element) if gt else element
            element = rb"<%s%s(?:/>|(?<!/)>%s(?:(?:%s)%s)*</[^<>]*>)" % (name, attributes(gt), text, special, text)
        return element

    simple_empty = rb"<[^!?/<>\s\"'x][^<>\"'x]*/>"  # no quote, no x: the usual tiny element, tried first
    simple_parent = rb"<[^!?/<>\s\"'x][^<>\"'x/]*>[^<]*(?:%s[^<]*)*</[^<>]*>" % simple_empty
    skip = rb"[^<]*(?:(?:%s|%s|%s|%s)[^<]*)*" % (simple_empty, simple_parent, markup(), item(ITEM_LEVELS, gt=True))
    up = rb"(?:<%s%s>[^<>]*)+" % (name, attributes(gt=False))
    down = rb"(?:(?:</[^<>]*>|%s)[^<>]*)+" % item(ITEM_LEVELS, gt=False)
    return (rb"%s(?:(?P<up>%s)|(?P<down>%s)|<(?P<tag>%s[^<>\"']*(?:(?:\"[^\"<]*\"|'[^'<]*')[^<>\"']*)*)>"
            rb"|(?P<other><)|\Z)" % (skip, up, down, name))


ITEM_LEVELS = 3
_MARKUP = rb"<!--.*?-->|<!\[CDATA\[.*?\]\]>|<\?.*?\?>"
_QUOTED = rb"\"[^\"]*\"|'[^']*'"
_DECLARATION = rb"(?<![^\s])xmlns(?::[^\s=]*)?\s*="
_PATTERNS: list = []  # the compiled token pattern, once used


def namespaces_in_scope(data: bytes, above: int | None = None) -> int:
    """The most namespace declarations (xmlns and xmlns:P attributes) in scope at any element, in one pass
    over the bytes: comments, CDATA sections and PIs are skipped whole, `xmlns` in a value or in text is no
    declaration, quotes may hold `>`; a Python step only for a token of _scope_token_pattern (a run of start
    or end tags, a declaring start tag), never for each element. Stops once past `above`, and at any `<`
    that starts no well-formed markup (libxml2 stops there too: what follows is never parsed)."""
    import re  # compiled here, once: the hook's cold start compiles nothing it never uses

    if not _PATTERNS:
        _PATTERNS.extend((re.compile(_scope_token_pattern(), re.DOTALL), re.compile(_QUOTED).sub,
                          re.compile(_DECLARATION).findall))
    tokens, quoted, declarations = _PATTERNS
    most = in_scope = depth = 0
    declared = []  # (depth it opened at, its declarations) of each open element that declares
    for token in tokens.finditer(data):
        run = token.group("up") or token.group("down")
        if run:
            depth += run.count(b"<") - 2 * run.count(b"</") - run.count(b"/>")
            while declared and depth <= declared[-1][0]:
                in_scope -= declared.pop()[1]
            continue
        tag = token.group("tag")
        if tag is None:
            return most  # the end, or markup libxml2 stops at
        n = len(declarations(quoted(b" ", tag))) if b"xmlns" in tag else 0
        if in_scope + n > most:
            most = in_scope + n
            if above is not None and most > above:
                return most
        if not tag.endswith(b"/"):
            if n:
                declared.append((depth, n))
                in_scope += n
            depth += 1
    return most
