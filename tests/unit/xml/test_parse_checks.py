"""xml.parse.check_raw: the refusals before any parser sees the bytes, each one line."""

from __future__ import annotations

import pytest

from virtxml_cpu.errors import BadInput
from virtxml_cpu.xml.parse import check_raw, parse_domain_lean


@pytest.mark.parametrize("data", [b"", b" ", b"\n\t\r ", b"\x0b\x0c \n"])
def test_empty_or_blank_input_is_empty(data):
    with pytest.raises(BadInput, match="^x is empty$"):
        check_raw(data, "x")


@pytest.mark.parametrize("data, at", [(b"<domain>\xff</domain>", 8), (b"<a>\xc3</a>", 3),
                                      (b"<domain><name>\xe9t\xe9</name></domain>", 14)])
def test_bytes_that_are_not_utf8_are_refused_at_their_offset(data, at):
    with pytest.raises(BadInput, match=rf"^x is not UTF-8 \(byte {at}\)$"):
        check_raw(data, "x")


def test_utf8_beyond_ascii_and_non_ascii_blanks_are_read():
    root = parse_domain_lean("<domain><name>\u00e9t\u00e9\u00a0</name></domain>".encode(), "x")
    assert root.findtext("name") == "\u00e9t\u00e9\u00a0"
    check_raw("\u00a0".encode(), "x")  # NBSP is no XML blank: not "empty" (the parser then refuses it)
    check_raw(b"\x1c", "x")  # nor is a C0 separator
