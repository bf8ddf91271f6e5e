"""Safe parsing of domain XML and byte-preserving edits.

The tree is parsed with a hardened lxml parser. Edits are made on the parsed tree *and* rendered as
insertions into the original text, so quoting, attribute order, comments, namespaces and indentation
survive exactly: the output differs from the input only where an element was added. The rendering is
checked by reparsing it and comparing with the edited tree.
"""

from __future__ import annotations

import io
import re
import threading
from collections import namedtuple

from lxml import etree

from .errors import BadInput

MAX_INPUT_BYTES = 10 * 1024 * 1024  # libvirt itself refuses domain XML over 10 MiB


_PARSERS = threading.local()  # an lxml parser serves one thread at a time; building one per document is slow


def _parser() -> etree.XMLParser:
    parser = getattr(_PARSERS, "parser", None)
    if parser is None:
        parser = _PARSERS.parser = etree.XMLParser(
            resolve_entities=False, no_network=True, load_dtd=False, dtd_validation=False, huge_tree=False,
            remove_blank_text=False, remove_comments=False, remove_pis=False, strip_cdata=False, collect_ids=False)
    return parser


def parse_xml(data: bytes, what: str = "XML") -> etree._ElementTree:
    """Parse untrusted XML: no DTD, no entities, no network, bounded size; one-line errors."""
    _check_raw(data, what)
    try:
        tree = etree.ElementTree(etree.fromstring(data, _parser()))
    except etree.XMLSyntaxError as e:
        msg = str(e).splitlines()[0] if str(e) else "syntax error"
        raise BadInput(f"{what} is not well-formed XML: {msg}") from None
    except ValueError as e:  # e.g. unicode strings with an encoding declaration
        raise BadInput(f"{what} cannot be parsed: {e}") from None
    if tree.docinfo.doctype or tree.docinfo.internalDTD is not None:
        raise BadInput(f"{what} has a DOCTYPE, which domain XML never has")
    return tree


def _check_raw(data: bytes, what: str) -> None:
    """Size, emptiness, encoding and DTDs, before any parser sees the bytes."""
    if len(data) > MAX_INPUT_BYTES:
        raise BadInput(f"{what} is larger than {MAX_INPUT_BYTES // (1024 * 1024)} MiB")
    if not data.strip():
        raise BadInput(f"{what} is empty")
    try:
        data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise BadInput(f"{what} is not UTF-8 (byte {e.start})") from None
    if b"<!" in data and re.search(rb"<!DOCTYPE|<!ENTITY", data, re.IGNORECASE) and _has_dtd(data):
        raise BadInput(f"{what} has a DOCTYPE or entity declarations, which domain XML never has")


def _has_dtd(data: bytes) -> bool:
    """A DOCTYPE/ENTITY outside comments (a comment may mention the words)."""
    without_comments = re.sub(rb"<!--.*?-->", b"", data, flags=re.DOTALL)
    return re.search(rb"<!DOCTYPE|<!ENTITY", without_comments, re.IGNORECASE) is not None


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


def parse_domain_lean(data: bytes, what: str = "input") -> etree._Element:
    """The same checks as parse_domain, but the children of <devices> other than <emulator> are dropped as
    they are parsed: a decision never reads them, and a large domain (thousands of disks, controllers,
    interfaces) then costs little more memory than its bytes. Only for deciding, never for rewriting."""
    if len(data) < LEAN_FROM_BYTES:
        root = parse_xml(data, what).getroot()
        _require_domain(root, what)
        return root
    _check_raw(data, what)
    parser = dict(resolve_entities=False, no_network=True, load_dtd=False, dtd_validation=False, huge_tree=False,
                  remove_blank_text=False, remove_comments=True, remove_pis=True, strip_cdata=False,
                  collect_ids=False)
    depth = 0
    devices = None
    try:
        ctx = etree.iterparse(io.BytesIO(data), events=("start", "end"), **parser)
        for event, el in ctx:
            if event == "start":
                depth += 1
                if depth == 2 and el.tag == "devices":
                    devices = el
                continue
            if depth == 3 and devices is not None and el.getparent() is devices and el.tag not in KEPT_DEVICES:
                el.clear(keep_tail=False)
                devices.remove(el)
            depth -= 1
        root = ctx.root
    except etree.XMLSyntaxError as e:
        msg = str(e).splitlines()[0] if str(e) else "syntax error"
        raise BadInput(f"{what} is not well-formed XML: {msg}") from None
    except ValueError as e:
        raise BadInput(f"{what} cannot be parsed: {e}") from None
    if root is None:
        raise BadInput(f"{what} is not well-formed XML: no root element")
    docinfo = root.getroottree().docinfo
    if docinfo.doctype or docinfo.internalDTD is not None:
        raise BadInput(f"{what} has a DOCTYPE, which domain XML never has")
    _require_domain(root, what)
    return root


# ---------------------------------------------------------------------------------------------------------
# Source positions of every node, so that edits become text insertions.

_NAME = r"[^\s/>=]+"
_ATTRS = r"(?:\s+[^\s=/>]+\s*=\s*(?:\"[^\"]*\"|'[^']*'))*"
_TOKEN = re.compile(
    r"<!--.*?-->|<\?.*?\?>|<!\[CDATA\[.*?\]\]>|<!DOCTYPE[^>]*>"
    rf"|<({_NAME}){_ATTRS}\s*(/?)>|</({_NAME})\s*>",
    re.DOTALL,
)


class Span:
    """Where a node sits in the source text (its end tag is filled in when the scan reaches it)."""

    __slots__ = ("start", "start_end", "empty", "end_start", "end_end")

    def __init__(self, start: int, start_end: int, empty: bool):
        self.start = start  # offset of '<' of the start tag (or comment / PI)
        self.start_end = start_end  # offset just after the start tag
        self.empty = empty  # <x/>
        self.end_start = -1  # offset of '</x>'
        self.end_end = -1


def node_spans(text: str) -> list[Span]:
    """Spans of elements, comments and PIs in document order (what lxml's iter() yields)."""
    spans: list[Span] = []
    stack: list[Span] = []
    for m in _TOKEN.finditer(text):
        tok = m.group(0)
        if tok.startswith("<!DOCTYPE") or tok.startswith("<![CDATA["):
            continue
        if tok.startswith("<!--") or tok.startswith("<?"):
            if stack:  # only nodes inside the root element belong to the tree walk we map onto
                spans.append(Span(m.start(), m.end(), True))
            continue
        if m.group(3):  # end tag
            span = stack.pop()
            span.end_start, span.end_end = m.start(), m.end()
            continue
        span = Span(m.start(), m.end(), bool(m.group(2)))
        spans.append(span)
        if not span.empty:
            stack.append(span)
    return spans


class Style(namedtuple("Style", "quote unit newline")):

    __slots__ = ()  # a plain named tuple: its fields, annotated below for readers
    quote: str
    unit: str
    newline: str


def detect_style(text: str) -> Style:
    m = re.search(r"<[^\s!?/>]+\s+[^\s=/>]+\s*=\s*(['\"])", text)
    quote = m.group(1) if m else "'"
    indents = re.findall(r"\n([ \t]+)<", text)
    unit = min(indents, key=len) if indents else "  "
    return Style(quote, unit, _newline_after(text, 0))


def _newline_after(text: str, pos: int) -> str:
    """The line ending of the line at `pos` (CRLF, CR-only or LF files, and files that mix them)."""
    m = re.compile(r"\r\n|\r|\n").search(text, pos)
    if m is None:
        m = re.compile(r"\r\n|\r|\n").search(text)
    return m.group(0) if m else "\n"


def render_element(el: etree._Element, indent: str, style: Style) -> str:
    """Serialize a new element the way libvirt formats XML, nested children indented."""
    q = style.quote
    attrs = "".join(f" {k}={q}{_escape_attr(v, q)}{q}" for k, v in el.attrib.items())
    children = [c for c in el if isinstance(c.tag, str)]
    if not children:
        return f"<{el.tag}{attrs}/>"
    inner = "".join(style.newline + indent + style.unit + render_element(c, indent + style.unit, style)
                    for c in children)
    return f"<{el.tag}{attrs}>{inner}{style.newline}{indent}</{el.tag}>"


def _escape_attr(v: str, q: str) -> str:
    v = v.replace("&", "&amp;").replace("<", "&lt;")
    return v.replace("'", "&apos;") if q == "'" else v.replace('"', "&quot;")


def _ws_before(text: str, pos: int) -> str:
    i = pos
    while i > 0 and text[i - 1] in " \t\r\n":
        i -= 1
    return text[i:pos]


def _line_indent(text: str, pos: int) -> str:
    line_start = max(text.rfind("\n", 0, pos), text.rfind("\r", 0, pos)) + 1
    m = re.match(r"[ \t]*", text[line_start:pos])
    return m.group(0) if m else ""


class Insertion(namedtuple("Insertion", "parent new index",
                           defaults=(None,))):
    """Add `new` as a child of `parent` before the node at `index` (None = append)."""

    __slots__ = ()  # a plain named tuple: its fields, annotated below for readers

    parent: etree._Element
    new: etree._Element
    index: int | None


def apply_insertions(text: str, root: etree._Element, insertions: list[Insertion]) -> str:
    """Render insertions into `text` (the source of `root`); return the new text.

    `root` must still be the unedited tree of `text`; the caller edits its own copy.
    """
    nodes = list(root.iter())
    spans = node_spans(text)
    if len(nodes) != len(spans):
        raise BadInput("cannot map the XML source onto its tree (unusual markup); nothing was changed")
    where = {id(n): s for n, s in zip(nodes, spans)}
    base = detect_style(text)
    patches: list[tuple[int, int, str]] = []  # (start, end, replacement)
    for ins in insertions:
        ps = where[id(ins.parent)]
        style = Style(base.quote, base.unit, _newline_after(text, ps.start))
        parent_indent = _line_indent(text, ps.start)
        kids = list(ins.parent)
        if ins.index is not None and ins.index < len(kids):
            ks = where[id(kids[ins.index])]
            ws = _ws_before(text, ks.start)
            lead = ws if _has_newline(ws) else style.newline + parent_indent + style.unit
            indent = _last_line(lead)
            patches.append((ks.start, ks.start, render_element(ins.new, indent, style) + lead))
        elif kids:
            last = where[id(kids[-1])]
            ws = _ws_before(text, last.start)
            lead = ws if _has_newline(ws) else style.newline + parent_indent + style.unit
            indent = _last_line(lead)
            end = last.end_end if last.end_end >= 0 else last.start_end
            patches.append((end, end, lead + render_element(ins.new, indent, style)))
        elif ps.empty:
            indent = parent_indent + style.unit
            tag = text[ps.start:ps.start_end]
            opened = tag[:-2] + ">"  # only the '/' of '/>' goes; every other character stays
            body = style.newline + indent + render_element(ins.new, indent, style) + style.newline + parent_indent
            patches.append((ps.start, ps.start_end, f"{opened}{body}</{ins.parent.tag}>"))
        else:
            indent = parent_indent + style.unit
            ws = _ws_before(text, ps.end_start)
            at = ps.end_start - len(ws)
            closing = ws if _has_newline(ws) else style.newline + parent_indent
            patches.append((at, ps.end_start,
                            style.newline + indent + render_element(ins.new, indent, style) + closing))
    out = text
    for start, end, repl in sorted(patches, key=lambda p: p[0], reverse=True):
        out = out[:start] + repl + out[end:]
    return out


def _has_newline(ws: str) -> bool:
    return "\n" in ws or "\r" in ws


def _last_line(ws: str) -> str:
    return re.split(r"\r\n|\r|\n", ws)[-1]


def same_tree(a: etree._Element, b: etree._Element) -> bool:
    """Same elements, attributes and order, and the same character data in each element (whitespace
    ignored, and where between the children it sits: libvirt ignores text among <features>, so text after
    the last child may end up after the inserted one). The check on every rendering."""
    if a.tag != b.tag or dict(a.attrib) != dict(b.attrib):
        return False
    ka, kb = list(a), list(b)
    if len(ka) != len(kb) or _chars(a) != _chars(b):
        return False
    return all(same_tree(x, y) for x, y in zip(ka, kb))


def _chars(el: etree._Element) -> str:
    return "".join("".join(t.split()) for t in [el.text or ""] + [c.tail or "" for c in el])
