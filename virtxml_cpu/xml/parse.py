"""Safe parsing of untrusted XML: domain definitions, capabilities, libvirt's capabilities cache.

Every check on the raw bytes runs before a parser sees them, each linear in the size (size, emptiness,
encoding, a prolog DOCTYPE, an element crowded with attributes); the parser is a hardened lxml one that
never loads or opens anything a document names. Bad input is one line (BadInput). parse_domain_lean is
the same parse for deciding alone: the <devices> children no decision reads are dropped as they arrive.
Editing what was parsed, byte for byte, is edit.py's.
"""

from __future__ import annotations

from _thread import _local  # threading.local itself, without importing threading (the hook's cold start)
from itertools import compress, islice, repeat
from operator import ge

from lxml import etree

from ..tables import lazyre  # module-level patterns compiled where first used (the hook's cold start)
from ..errors import BadInput, shown

MAX_INPUT_BYTES = 10 * 1024 * 1024  # libvirt itself refuses domain XML over 10 MiB


# What a parser may be given: every option that could make libxml2 read beyond the bytes is off, the
# encoding is fixed (a declaration cannot switch it), and a resolver refuses whatever libxml2 still asks for
# (with collect_ids=False it asks for a DOCTYPE's external subset, even with load_dtd=False).
PARSER_OPTIONS = dict(resolve_entities=False, no_network=True, load_dtd=False, dtd_validation=False,
                      huge_tree=False, remove_blank_text=False, strip_cdata=True, collect_ids=False,
                      encoding="utf-8")
ENCODINGS = frozenset({"utf-8", "utf8", "us-ascii", "ascii"})  # what a declaration may name (ASCII is UTF-8)


class _RefuseAll(etree.Resolver):
    """Every external resource (DTD, entity, XInclude) is refused: a document never makes us open a path."""

    def resolve(self, url, pubid, context):
        raise BadInput(f"names an external resource ({shown(str(url or pubid))}), which is never loaded")


def safe_parser(cls=etree.XMLParser, **options) -> etree.XMLParser:
    parser = cls(**PARSER_OPTIONS, **options)
    parser.resolvers.add(_RefuseAll())
    return parser


_PARSERS = _local()  # an lxml parser serves one thread at a time; building one per document is slow


def _parser() -> etree.XMLParser:
    parser = getattr(_PARSERS, "parser", None)
    if parser is None:
        parser = _PARSERS.parser = safe_parser(remove_comments=False, remove_pis=False)
    return parser


def parse_xml(data: bytes, what: str = "XML") -> etree._ElementTree:
    """Parse untrusted XML: no DTD, no entities, nothing external, UTF-8 only, bounded size; one-line errors."""
    check_raw(data, what)
    try:
        tree = etree.ElementTree(etree.fromstring(data, _parser()))
    except _PARSE_ERRORS as e:
        raise _refusal(e, what) from None
    docinfo = tree.docinfo  # a new object on each read
    if docinfo.doctype or docinfo.internalDTD is not None:
        raise BadInput(f"{what} has a DOCTYPE, which domain XML never has")
    return tree


_PARSE_ERRORS = (etree.XMLSyntaxError, BadInput, ValueError)  # what a parse raises: each made one line


def _refusal(e: Exception, what: str) -> BadInput:
    """A parse's error as the one line a user sees: not well-formed, refused by the resolver, or not
    parsed at all (e.g. unicode strings with an encoding declaration)."""
    if isinstance(e, etree.XMLSyntaxError):
        msg = str(e).splitlines()[0] if str(e) else "syntax error"
        return BadInput(f"{what} is not well-formed XML: {msg}")
    if isinstance(e, BadInput):  # the resolver's refusal
        return BadInput(f"{what} {e}")
    return BadInput(f"{what} cannot be parsed: {e}")


def check_raw(data: bytes, what: str) -> None:
    """Size, emptiness, encoding and DTDs, before any parser sees the bytes; each check linear in the size."""
    if len(data) > MAX_INPUT_BYTES:
        raise BadInput(f"{what} is larger than {MAX_INPUT_BYTES // (1024 * 1024)} MiB")
    if not data or data.isspace():  # not data.strip(): the same bytes (ASCII whitespace), without a copy
        raise BadInput(f"{what} is empty")
    if data.startswith(_BOM_PREFIXES):  # one test for the usual case, then which one
        name = next(name for bom, name in _BOMS if data.startswith(bom))
        raise BadInput(f"{what} is {name} (byte-order mark); only UTF-8 is read")
    nul = data.find(b"\0")
    if nul >= 0:
        raise BadInput(f"{what} has a NUL byte (offset {nul}): UTF-16/UTF-32 or not text; only UTF-8 is read")
    try:
        data.isascii() or data.decode("utf-8")  # ASCII is UTF-8: no str built for the usual document
    except UnicodeDecodeError as e:
        raise BadInput(f"{what} is not UTF-8 (byte {e.start})") from None
    declared = declared_encoding(data)
    if declared is not None and declared.lower() not in ENCODINGS:
        raise BadInput(f"{what} declares encoding {shown(declared)!r}; only UTF-8 is read")
    if prolog_declares(data):
        raise BadInput(f"{what} has a DOCTYPE or entity declarations, which domain XML never has")
    if has_crowded_element(data):
        raise BadInput(f"{what} has an element with {MAX_ATTRIBUTES} or more attributes, which domain XML never has")
    if data.count(b"xmlns") > MAX_NAMESPACES_IN_SCOPE and namespaces_in_scope(data, MAX_NAMESPACES_IN_SCOPE) > \
            MAX_NAMESPACES_IN_SCOPE:
        raise BadInput(f"{what} has an element with more than {MAX_NAMESPACES_IN_SCOPE} namespace declarations in "
                       "scope, which domain XML never has")


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


_BOMS = ((b"\x00\x00\xfe\xff", "UTF-32"), (b"\xff\xfe\x00\x00", "UTF-32"), (b"\xfe\xff", "UTF-16"),
         (b"\xff\xfe", "UTF-16"))
_BOM_PREFIXES = tuple(bom for bom, _name in _BOMS)
_UTF8_BOM = b"\xef\xbb\xbf"
_SPACE = lazyre.compile(rb"[ \t\r\n]*")  # XML's S
_S = (b" ", b"\t", b"\r", b"\n")
_ENCODING = lazyre.compile(rb"[ \t\r\n]encoding[ \t\r\n]*=[ \t\r\n]*(?:'([^']*)'|\"([^\"]*)\")")


def declared_encoding(data: bytes) -> str | None:
    """The encoding an XML declaration names (it can only stand at the very start), else None."""
    start = len(_UTF8_BOM) if data.startswith(_UTF8_BOM) else 0
    if not (data.startswith(b"<?xml", start) and data[start + 5:start + 6] in (b" ", b"\t", b"\r", b"\n")):
        return None
    end = data.find(b"?>", start)
    m = _ENCODING.search(data, start, end if end >= 0 else len(data))
    return None if m is None else (m.group(1) or m.group(2) or b"").decode("utf-8", "replace")


def prolog_declares(data: bytes) -> bool:
    """Whether `<!` markup other than a comment stands before the root element: the prolog is the only place
    XML allows a DOCTYPE, and entity declarations only live inside one. Whitespace, comments and PIs are
    skipped with one search each and the scan stops at the first element, so the time is linear in the input
    and a CDATA section or comment in <metadata> that mentions <!DOCTYPE is no declaration."""
    i = len(_UTF8_BOM) if data.startswith(_UTF8_BOM) else 0
    while True:
        if data[i:i + 1] in _S:  # whitespace before the next markup (usually none)
            i = _SPACE.match(data, i).end()
        if data.startswith(b"<!--", i):
            close, skip = b"-->", 4
        elif data.startswith(b"<?", i):
            close, skip = b"?>", 2
        else:
            return data.startswith(b"<!", i)
        end = data.find(close, i + skip)
        if end < 0:
            return False  # an unterminated comment or PI: the parser says so
        i = end + len(close)


def parse_domain(data: bytes, what: str = "input") -> etree._ElementTree:
    tree = parse_xml(data, what)
    _require_domain(tree.getroot(), what)
    return tree


def _require_domain(root: etree._Element, what: str) -> None:
    if root.tag != "domain":
        raise BadInput(f"{what} is not a libvirt domain (root element <{etree.QName(root).localname}>)")


# What the decisions read under <devices>; everything else there is dropped by parse_domain_lean.
KEPT_DEVICES = frozenset({"emulator"})
LEAN_FROM_BYTES = 256 * 1024  # below this a plain parse is faster and small anyway
LEAN_CHUNK = 64 * 1024  # fed to the parser at a time; what was parsed is trimmed between chunks


def _lean_parser() -> etree.XMLPullParser:
    """This thread's pull parser for the lean parse, built once. A parser built per document is garbage in a
    cycle with the document it made (the document refers to its parser, the parser's events to elements of
    the document), so each document's whole tree waited for the cyclic collector's oldest generation: a
    long-lived `watch` told of 40 crafted 1 MiB definitions grew to 800 MiB between collections."""
    parser = getattr(_PARSERS, "lean", None)
    if parser is None:
        parser = _PARSERS.lean = safe_parser(etree.XMLPullParser, events=("start",), tag="devices",
                                             remove_comments=True, remove_pis=True)
    return parser


def _reset(parser: etree.XMLPullParser) -> None:
    """Make a parser that stopped in the middle of a document ready for the next one (close() ends the
    document it was fed; what it says of that broken document is of no interest)."""
    try:
        parser.close()
    except _PARSE_ERRORS:
        pass
    for _ in parser.read_events():
        pass


def parse_domain_lean(data: bytes, what: str = "input") -> etree._Element:
    """The same checks as parse_domain, but the children of <devices> other than <emulator> are dropped as
    they are parsed: a decision never reads them, and a large domain (thousands of disks, controllers,
    interfaces) then costs little more memory than its bytes. Only for deciding, never for rewriting."""
    if len(data) < LEAN_FROM_BYTES:
        root = parse_xml(data, what).getroot()
        _require_domain(root, what)
        return root
    check_raw(data, what)
    # Only <devices> is reported (matched in C), not each element: 700,000 children in <metadata> then cost
    # what libxml2's parse costs, with no Python step per element.
    parser = _lean_parser()
    devices = kept = None
    try:
        for at in range(0, len(data), LEAN_CHUNK):
            parser.feed(data[at:at + LEAN_CHUNK])
            for _event, el in parser.read_events():
                parent = el.getparent()
                if parent is not None and parent.getparent() is None:  # the domain's own <devices>
                    if devices is not None:
                        _drop_devices(devices, kept, keep_last=False)
                    devices, kept = el, None
            if devices is not None:
                kept = _drop_devices(devices, kept, keep_last=True)  # the last child may still be parsed
        root = parser.close()
        if devices is not None:
            _drop_devices(devices, kept, keep_last=False)
    except _PARSE_ERRORS as e:
        _reset(parser)
        raise _refusal(e, what) from None
    except BaseException:
        _reset(parser)
        raise
    if root is None:
        raise BadInput(f"{what} is not well-formed XML: no root element")
    docinfo = root.getroottree().docinfo
    if docinfo.doctype or docinfo.internalDTD is not None:
        raise BadInput(f"{what} has a DOCTYPE, which domain XML never has")
    _require_domain(root, what)
    return root


def _drop_devices(devices: etree._Element, kept: etree._Element | None, keep_last: bool) -> etree._Element | None:
    """Drop the children of `devices` after `kept` (the last one kept so far) but KEPT_DEVICES, each once, and
    the last one only with keep_last False; the new last one kept."""
    el = kept.getnext() if kept is not None else (devices[0] if len(devices) else None)
    while el is not None:
        following = el.getnext()
        if following is None and keep_last:
            break
        if el.tag in KEPT_DEVICES:
            kept = el
        else:
            el.clear(keep_tail=False)
            devices.remove(el)
        el = following
    return kept
