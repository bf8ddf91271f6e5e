"""Safe parsing of untrusted XML: domain definitions, capabilities, libvirt's capabilities cache.

Every check on the raw bytes runs before a parser sees them, each linear in the size (size, emptiness,
encoding, a prolog DOCTYPE, and limits.py's bounds on an element's attributes and namespaces); the parser
is a hardened lxml one that never loads or opens anything a document names. Bad input is one line (BadInput). parse_domain_lean is
the same parse for deciding alone: the <devices> children no decision reads are dropped as they arrive.
Editing what was parsed, byte for byte, is edit.py's.
"""

from __future__ import annotations

from _thread import _local  # threading.local itself, without importing threading (the hook's cold start)

from lxml import etree

from ..constants import MAX_DEFINITION_BYTES  # libvirt itself refuses domain XML over 10 MiB
from ..tables import lazyre  # module-level patterns compiled where first used (the hook's cold start)
from ..errors import BadInput, shown
from .limits import MAX_ATTRIBUTES, MAX_NAMESPACES_IN_SCOPE, has_crowded_element, namespaces_in_scope



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
    if len(data) > MAX_DEFINITION_BYTES:
        raise BadInput(f"{what} is larger than {MAX_DEFINITION_BYTES // (1024 * 1024)} MiB")
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
