"""How a config's TOML is read: checked against TOML 1.0 (toml_check), then read the plain way (plain_toml)
or, for anything else, by the first TOML reader this Python has (toml_reader), and the two readings compared.
Imported only where a config is parsed: the hook's repeat starts read the file's bytes, never parse them."""

from __future__ import annotations

from ..errors import BadInput, EnvironmentProblem
from . import toml_check


def read(text: str, path: str) -> dict:
    """The tables and values of a config's `text`, read against TOML 1.0's grammar first (toml_check): what
    tomllib refuses is refused whichever reader this Python has, and a reader that reads it otherwise is
    refused. BadInput, one line, naming `path`."""
    try:
        checked = toml_check.read(text)
    except toml_check.NotToml as e:
        raise BadInput(f"config {path}: {e}") from None
    if not checked:
        return checked  # comments only (the packaged config): nothing for a reader to read
    data = plain_toml(text)
    if data is None:
        data = _toml(text, path)
    if data != checked:
        name = getattr(toml_reader(), "__name__", "the TOML reader")
        raise BadInput(f"config {path}: {name} (this Python's TOML reader) reads it otherwise than TOML 1.0 "
                       "does: write it the plain way (docs/configuration.md)")
    return data


def _toml(text: str, path: str) -> dict:
    reader = toml_reader()
    if reader is None:
        raise EnvironmentProblem(f"config {path} is not written the plain way (docs/install.md) and this Python "
                                 "has no TOML reader: install python3-tomli or python3-toml, or pip install tomli")
    try:
        return reader.loads(text)
    except ValueError as e:  # tomllib's and tomli's TOMLDecodeError, toml's TomlDecodeError: each a ValueError
        raise BadInput(f"config {path}: {str(e).splitlines()[0]}") from None
    except RecursionError:
        raise BadInput(f"config {path}: nested too deeply") from None
    except (AttributeError, LookupError, TypeError) as e:  # toml 0.10 on some invalid files (`[[hook]]` after `[hook]`)
        raise BadInput(f"config {path}: not valid TOML ({reader.__name__}: {type(e).__name__})") from None


def toml_reader():
    """The first TOML reader this Python has (a module with `loads`), or None: tomllib (3.11+), tomli
    (tomllib as a package: pip's dependency below 3.11, Ubuntu 22.04's python3-tomli), toml 0.10 (Debian
    11's python3-toml, its only one; why in docs/install.md). Imported here, not at the top: tomllib and
    the typing it imports cost the hook ~3 ms."""
    try:
        import tomllib  # novermin - 3.11+, the readers below otherwise

        return tomllib
    except ImportError:
        pass
    try:
        import tomli

        return tomli
    except ImportError:
        pass
    try:
        import toml

        return toml
    except ImportError:
        return None


_DIGITS = frozenset("0123456789")


def plain_toml(text: str) -> dict | None:
    """What tomllib.loads makes of a config written the plain way (comments, `[hook]` once, `key = "text"`,
    `key = 12`, `key = 1.5`, `key = true`), or None for anything else, which tomllib then reads (and
    refuses, with its message). Same result as tomllib wherever it answers (tests/unit/core/test_config_plain.py)."""
    data: dict = {}
    table = data
    lines = text.split("\n")
    for n, line in enumerate(lines):
        line = line[:-1] if line.endswith("\r") and n < len(lines) - 1 else line  # CRLF, never a bare CR
        if any(c < " " and c != "\t" or c == "\x7f" for c in line):
            return None  # control characters: tomllib's to judge
        line = line.strip(" \t")
        if not line or line.startswith("#"):
            continue
        if line.startswith("["):
            head, _, rest = line.partition("]")
            if head != "[hook" or "hook" in data or not _comment(rest):
                return None
            table = data["hook"] = {}
            continue
        key, eq, rest = line.partition("=")
        key, rest = key.strip(" \t"), rest.strip(" \t")
        if not eq or not key or not set(key) <= toml_check.BARE_KEY or key in table or (table is data and key == "hook"):
            return None
        value, rest = _plain_value(rest)
        if value is None or not _comment(rest):
            return None
        table[key] = value
    return data


def _comment(rest: str) -> bool:
    rest = rest.strip(" \t")
    return not rest or rest.startswith("#")


def _plain_value(text: str):
    """A basic string without escapes, a decimal integer or float, or a boolean; (None, "") else."""
    if text.startswith('"'):
        end = text.find('"', 1)
        body = text[1:end]
        if end < 0 or "\\" in body:
            return None, ""
        return body, text[end + 1:]
    token, _, rest = text.replace("\t", " ").partition(" ")
    if token.startswith("#"):
        return None, ""
    if "#" in token:
        token, rest = token[:token.index("#")], token[token.index("#"):] + " " + rest
    if token in ("true", "false"):
        return token == "true", rest
    sign, digits = (token[0], token[1:]) if token[:1] in ("-", "+") else ("", token)
    whole, dot, frac = digits.partition(".")
    if not whole or not set(whole) <= _DIGITS or (len(whole) > 1 and whole[0] == "0"):
        return None, ""
    if len(digits) > toml_check.MAX_NUMBER:
        return None, ""  # toml_check refuses it before any conversion
    if dot:
        if not frac or not set(frac) <= _DIGITS:
            return None, ""
        return float(sign + digits), rest
    return int(sign + digits), rest
