"""toml_read.plain_toml, the hook's way around tomllib: wherever it answers, tomllib answers the same; the
rest it leaves to tomllib."""

from __future__ import annotations


from hypothesis import given, settings
from hypothesis import strategies as st

from virtxml_cpu.core import toml_read

KEYS = st.sampled_from(["policy", "style", "mode", "spool", "timeout", "hook", "a-b", "x_1", "a b", "\"q\"", "k.j"])
VALUES = st.one_of(
    st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=12).map(lambda t: f'"{t}"'),
    st.sampled_from(['"compat"', '"/var/lib/x"', "12", "-3", "+4", "0", "00", "01", "1.5", "0.25", "01.5", "1.",
                     ".5", "1e3", "1_000", "true", "false", "True", "'lit'", '"a\\"b"', '"x" "y"', "[1]", "nan",
                     '"unterminated', "5#c", '"v"#c', "inf", "-0", "+0.0"]),
)
SPACE = st.sampled_from(["", " ", "\t", "  "])
COMMENT = st.sampled_from(["", " # note", "#", " # é", "\t#x"])
LINE = st.one_of(
    st.tuples(SPACE, KEYS, SPACE, st.sampled_from(["=", "==", ""]), SPACE, VALUES, COMMENT).map("".join),
    st.sampled_from(["", "# comment", "[hook]", "[ hook ]", "[[hook]]", "[hook] # x", "[other]", "\r", "   ",
                     "policy = \"compat\"\r", "\x0b", "a = \"\x01\"", "\ufeffpolicy = \"compat\"", "key"]),
)


@settings(max_examples=3000, deadline=None)
@given(st.lists(LINE, max_size=8).map("\n".join))
def test_plain_toml_answers_as_tomllib_or_not_at_all(text):
    plain = toml_read.plain_toml(text)
    if plain is None:
        return
    assert toml_read.toml_reader().loads(text) == plain


def test_the_usual_configs_need_no_tomllib():
    for text in ('[hook]\nmode = "enforce"\n', 'policy = "numa"  # hosts with NUMA guests\ntimeout = 30\n'
                 '\n[hook]\nmode = "queue"\nspool = "/var/lib/virtxml-cpu/pending"\nsyslog_socket = "/dev/log"\n',
                 'host_timeout = 2.5\r\nqemu_version = "8.2.2"\r\n'):
        assert toml_read.plain_toml(text) == toml_read.toml_reader().loads(text) != {}
