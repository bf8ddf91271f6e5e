"""Byte-preserving edits of domain XML: new elements become insertions into the original text.

Why a tokenizer of our own: lxml gives no byte offsets of a node (only its line), and serializing the edited
tree would rewrite what libvirt or a person wrote: quoting, the spacing inside tags, character references,
the XML declaration, line endings. The edit must keep every other byte, so the output differs from the
input only where an element was added. node_spans scans the text with one regular expression for the
markup lxml turns into nodes (elements, comments and processing instructions inside the root) and skips
what it does not (CDATA, read as text; a DOCTYPE); apply_insertions pairs the spans with lxml's iter() by
position, in document order.

What guarantees the pairing: apply_insertions refuses (BadInput, nothing changed) when the scan finds a
different number of nodes than lxml, and its caller (insert.py's render) reparses the new text and
compares it with the edited tree (same_tree), refusing the same way: a pairing that went wrong without
changing the count, or any other slip, never writes a text that is not the intended tree. The text is
always one parse.py accepted first.
"""

from __future__ import annotations

import re
from collections import namedtuple

from lxml import etree

from ..tables import lazyre  # module-level patterns compiled where first used
from ..errors import BadInput

# One token per piece of markup: what lxml makes a node of, and what it skips (CDATA, a DOCTYPE).
_NAME = r"[^\s/>=]+"
_ATTRS = r"(?:\s+[^\s=/>]+\s*=\s*(?:\"[^\"]*\"|'[^']*'))*"
_TOKEN = lazyre.compile(
    r"<!--.*?-->|<\?.*?\?>|<!\[CDATA\[.*?\]\]>|<!DOCTYPE[^>]*>"
    rf"|<({_NAME}){_ATTRS}\s*(/?)>|</({_NAME})\s*>",
    lazyre.DOTALL,
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
    m = re.search(r"<[^\s!?/<>]+\s+[^\s=/<>]+\s*=\s*(['\"])", text)  # no "<" in a name: linear
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
    return _same_shape(a, b) and _attributes(a) == _attributes(b)


def _same_shape(a: etree._Element, b: etree._Element) -> bool:
    if a.tag != b.tag:
        return False
    ka, kb = list(a), list(b)
    if len(ka) != len(kb) or _chars(a) != _chars(b):
        return False
    return all(_same_shape(x, y) for x, y in zip(ka, kb))


def _attributes(root: etree._Element) -> list[tuple[int, str, str]]:
    """Every attribute as (its element's position, name, value), in one XPath pass: lxml's attrib and
    items() look each value up by name, quadratic in an element's attributes (a crafted <metadata>)."""
    index = {el: i for i, el in enumerate(root.iter())}
    return sorted((index[r.getparent()], r.attrname, str(r)) for r in root.xpath("descendant-or-self::*/@*"))


def _chars(el: etree._Element) -> str:
    return "".join("".join(t.split()) for t in [el.text or ""] + [c.tail or "" for c in el])
