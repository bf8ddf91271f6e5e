"""One config, one meaning: whichever TOML reader a Python has (tomllib, tomli, Debian's toml 0.10, none but
the plain reader), a config gives the settings tomllib's reading gives, or it is refused (a reader missing
for a config not written the plain way is said as such). What tomllib refuses is refused by every reader,
in one line with exit 2 (core/toml_check.py reads the characters first). Checked here on this Python over
generated configs, and on the Debian 11 lab's python3.9 with its python3-toml 0.10.1 over the same corpus."""

from __future__ import annotations

import importlib
import importlib.util
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from virtxml_cpu.core import config

from tests.support import ROOT
from tests.lab.harness import BULLSEYE_LAB

REFERENCE = next((n for n in ("tomllib", "tomli") if importlib.util.find_spec(n)), None)
READERS = [n for n in ("tomllib", "tomli", "toml") if importlib.util.find_spec(n)] + [None]  # None: the plain reader
if REFERENCE is None:
    pytest.skip("SKIPPED LOUDLY: needs tomllib (3.11+) or tomli to say what TOML 1.0 reads", allow_module_level=True)

# Run here (exec) and on the Debian 11 lab's python3.9: each text's outcome under each reader named.
OUTCOMES = r'''
import importlib
from virtxml_cpu.core import config, toml_read
from virtxml_cpu.errors import BadInput, EnvironmentProblem

def outcome(text, reader):
    """The settings config.parse gives (a list), "refused" (exit 2, one line), "no reader" or what else happened."""
    saved = toml_read.toml_reader
    toml_read.toml_reader = (lambda: importlib.import_module(reader)) if reader else (lambda: None)
    try:
        return list(config.parse(text, "c.toml")._values())
    except BadInput as e:
        return "refused" if "\n" not in str(e) else "refused in lines"
    except EnvironmentProblem as e:
        return "no reader" if "has no TOML reader" in str(e) else "environment: " + str(e)
    except BaseException as e:  # a traceback: never right
        return "crash: %s: %s" % (type(e).__name__, str(e)[:200])
    finally:
        toml_read.toml_reader = saved

def outcomes(texts, readers):
    return [[outcome(t, r) for r in readers] for t in texts]
'''
_ns: dict = {}
exec(OUTCOMES, _ns)  # noqa: S102 - the same code the lab's Python runs
outcome = _ns["outcome"]
outcomes = _ns["outcomes"]


def reference_refuses(text: str) -> bool:
    try:
        importlib.import_module(REFERENCE).loads(text)
    except ValueError:
        return True
    return False


def disagreement(text: str, reference, others: dict):
    """None when every reader agrees with the reference (tomllib's settings, or its refusal), else why not."""
    if reference_refuses(text):
        wrong = {r: o for r, o in others.items() if o != "refused"}
        return f"TOML 1.0 refuses {text!r}; {wrong}" if wrong or reference != "refused" else None
    wrong = {r: o for r, o in others.items() if o != reference and not (r is None and o == "no reader")}
    return f"{text!r}: {REFERENCE} gives {reference}; {wrong}" if wrong else None


# --- the corpus: the configs found read two ways, then mutations of valid configs --------------------------

FOUND = [  # accepted by toml 0.10 or the plain reader, refused by tomllib
    '[hook]\nmode = "queue"\x0b\n', '[hook]\nmode = "queue"\x0c\n', '[hook]\nmode = "queue"\u2028\n',
    '[hook]\nmode = "queue"\x85\n', '[hook]\nmode\xa0= "queue"\n', '[hook]\u3000\nmode = "queue"\n',
    '[hook]\nspool = "/var/lib/\rx"\n', "timeout = 1.e1\n", '[hook\nmode = "queue"\n', "timeout = 1" + "0" * 5000 + "\n",
]
VALID = [
    'policy = "numa"  # hosts with NUMA guests\ntimeout = 30\n\n[hook]\nmode = "queue"\n'
    'spool = "/var/lib/virtxml-cpu/pending"\nsyslog_socket = "/dev/log"\n',
    "style = 'cpu-feature'\r\nhost_timeout = 2.5\r\nqemu_version = \"8.2.2\"\r\n[ hook ]\r\nmode = 'enforce'\r\n",
    'hook = { mode = "audit", spool = "/x" }\nqemu_build = "ubuntu"\n',
    'hook.mode = "queue"\n"policy" = "never"  # x\n',
]
ODD = ["\x0b", "\x0c", "\u2028", "\u2029", "\x85", "\xa0", "\u3000", "\r", "\x1b", "\x7f", "\ufeff", "\u200b", "\t",
       " ", "\n", "#", '"', "'", "[", "]", "=", ".", ",", "{", "}", "\\", "_", "0", "e"]
HEADERS = ["[hook", "hook]", "[[hook]", "[hook]]", "[ hook", "[hook.]", "[.hook]", '["hook"]', '["hook]', "[hook] ]",
           "[]", "[hook]x", "[hook]#", "[hook\n]", "[hook.mode]", "[[hook]]"]
NUMBERS = ["1.e1", "1e", "01", "+inf", "-inf", "inf", "nan", "-nan", "1_000", "1__0", "_1", "1_", "0x10", "0o10", "0b10",
           "-0x1", "0x", "1" + "0" * 5000, "1" + "0" * 40, "9" * 32, "1." + "0" * 40, "30.0", "3e1", "3E1", "3e+1",
           "1e400", "-0", "-0.0", "+30", "0.5", ".5", "5.", "00", "0", "1.5e-3", "86400", "86400.0000001", "86401",
           "1e1_0", "1_0.0_1", "3_0", "1979-05-27", "07:32:00", "true", "30 0", "3\u0660", "\uff13\uff10", "0.1e-1"]


def corpus(seed: int = 31, random_lines: int = 3000) -> list[str]:
    texts = list(FOUND)
    for text in VALID:
        texts.append(text)
        for at in range(len(text) + 1):
            texts.extend(text[:at] + c + text[at:] for c in ODD)
    for header in HEADERS:
        texts += [f'{header}\nmode = "queue"\n', f'policy = "never"\n{header}\n', f'{header} # c\nspool = "/x"\n']
    for number in NUMBERS:
        texts += [f"timeout = {number}\n", f"host_timeout = {number} # s\n", f'[hook]\nmode = "audit"\n\ntimeout = {number}',
                  f"hook = {{ mode = 'audit' }}\ntimeout={number}\n"]
    pick = random.Random(seed)
    pieces = ["policy", "timeout", "hook", "mode", "spool", "[hook]", "=", " = ", '"queue"', "'never'", "30", "1.5",
              "{", "}", ",", ".", "#", "\n", "\r\n", " ", "\t", '"', "'", "[", "]"] + ODD + NUMBERS[:40]
    for _ in range(random_lines):
        texts.append("".join(pick.choice(pieces) for _ in range(pick.randint(1, 12))))
    return texts


def test_the_configs_read_two_ways_are_refused_in_one_line_under_every_reader():
    for text in FOUND:
        assert reference_refuses(text) or "0" * 5000 in text, text
        assert [outcome(text, r) for r in READERS] == ["refused"] * len(READERS), text


@pytest.mark.parametrize("reader", READERS, ids=lambda r: r or "plain")
def test_every_config_of_the_corpus_means_one_thing_under_each_reader(reader):
    texts = corpus()
    ref = outcomes(texts, [REFERENCE])
    mine = outcomes(texts, [reader])
    wrong = [why for t, (r,), (m,) in zip(texts, ref, mine) if (why := disagreement(t, r, {reader: m}))]
    assert not wrong, (len(wrong), wrong[:5])
    assert sum(o != "refused" for (o,) in mine) > 500  # the valid configs (each odd blank, comment, quote) kept


LINES = st.one_of(
    st.tuples(st.sampled_from(["", " ", "\t", "\xa0", "\u3000"]),
              st.sampled_from(["policy", "timeout", "hook.mode", '"policy"', "'style'", "hook . spool", "mode", "a"]),
              st.sampled_from([" = ", "=", "\xa0= ", " =\u2028"]),
              st.one_of(st.sampled_from(NUMBERS + ['"compat"', "'queue'", "true", '{ mode = "queue" }', "{}", "[1]",
                                                   '"a\\u00e9"', '"\\e"', '"x\ry"', '"""x"""']),
                        st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=8).map(lambda t: f'"{t}"')),
              st.sampled_from(["", " # c", "#", "\x0b", "\x0c", "\u2028", "\x85", " \t"])).map("".join),
    st.sampled_from(HEADERS + ["[hook]", "", "# c", "\r", "[other]"]),
)


@settings(max_examples=1500, deadline=None)
@given(st.lists(LINES, max_size=6), st.sampled_from(["\n", "\r\n"]))
def test_generated_configs_mean_one_thing_under_every_reader(lines, newline):
    text = newline.join(lines)
    found = outcomes([text], READERS)[0]
    why = disagreement(text, found[0], dict(zip(READERS[1:], found[1:])))
    assert why is None, why


@pytest.mark.parametrize("verb", [("explain", "--no-host-probe", "--qemu-build", "upstream", "-"),
                                  ("hook", "install", "--hooks-dir", "HOOKS")])
def test_a_number_of_5000_digits_is_one_line_and_exit_2(tmp_path, verb):
    conf = tmp_path / "c.toml"
    conf.write_text("timeout = 1" + "0" * 5000 + "\n")
    argv = [a.replace("HOOKS", str(tmp_path / "hooks")) for a in verb]
    r = subprocess.run([sys.executable, "-m", "virtxml_cpu", *argv, "--config", str(conf)],
                       input=(ROOT / "tests" / "fixtures" / "handwritten-no-cpu.xml").read_text(),
                       capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert r.returncode == 2 and r.stderr.count("\n") == 1, r.stderr[-500:]
    assert "a number of more than" in r.stderr and not (tmp_path / "hooks").exists()


# --- the same corpus on the Debian 11 lab's python3.9 with Debian's python3-toml 0.10.1 -----------------------

BULLSEYE = BULLSEYE_LAB.root
ON_LAB = OUTCOMES + r'''
import json, sys
texts = json.load(sys.stdin)
import toml
print(json.dumps({"python": sys.version.split()[0], "toml": toml.__version__, "toml_file": toml.__file__,
                  "outcomes": outcomes(texts, ["toml", None])}))
'''


def _lab_toml(inside: str) -> str:
    """Debian 11's python3-toml, unpacked from its .deb (fetched with the lab's apt into its cache, not
    installed: the lab's package set stays as the other lab tests expect it) into `inside`; its dist-packages."""
    env = ["/usr/bin/env", "-i", "PATH=/usr/sbin:/usr/bin:/sbin:/bin", "LC_ALL=C", "DEBIAN_FRONTEND=noninteractive"]
    if not (BULLSEYE / "usr/lib/python3/dist-packages/toml/__init__.py").exists():
        r = subprocess.run(["chroot", str(BULLSEYE), *env, "apt-get", "install", "--download-only", "-y", "-q",
                            "--no-install-recommends", "python3-toml"], capture_output=True, text=True, timeout=300)
        if r.returncode != 0:
            subprocess.run(["chroot", str(BULLSEYE), *env, "apt-get", "-q", "update"], capture_output=True, timeout=300)
            r = subprocess.run(["chroot", str(BULLSEYE), *env, "apt-get", "install", "--download-only", "-y", "-q",
                                "--no-install-recommends", "python3-toml"], capture_output=True, text=True, timeout=300)
        assert r.returncode == 0, r.stdout[-1000:] + r.stderr[-1000:]
        (deb,) = sorted((BULLSEYE / "var/cache/apt/archives").glob("python3-toml_*_all.deb"))[-1:]
        subprocess.run(["dpkg-deb", "-x", str(deb), inside], check=True, timeout=60)
    return "/usr/lib/python3/dist-packages"


def test_the_corpus_means_one_thing_on_debian_11s_python_with_its_python3_toml():
    if os.geteuid() != 0 or not shutil.which("chroot") or not (BULLSEYE / "usr/bin/python3.9").exists():
        pytest.skip(f"SKIPPED LOUDLY: no Debian 11 lab at {BULLSEYE} (or not root): the corpus under python3.9 "
                    "and toml 0.10.1 is not checked")
    texts = corpus()
    with tempfile.TemporaryDirectory(dir=BULLSEYE / "tmp") as inside:
        shutil.copytree(ROOT / "virtxml_cpu", f"{inside}/virtxml_cpu", ignore=shutil.ignore_patterns("__pycache__"))
        where = inside[len(str(BULLSEYE)):]
        lib = _lab_toml(inside)
        path = f"{where}:{where}{lib}:{lib}"
        r = subprocess.run(["chroot", str(BULLSEYE), "/usr/bin/env", "-i", f"PYTHONPATH={path}", "LC_ALL=C.UTF-8",
                            "/usr/bin/python3", "-B", "-c", ON_LAB], input=json.dumps(texts),
                           capture_output=True, text=True, timeout=600, cwd="/")
    assert r.returncode == 0, r.stderr[-2000:]
    lab = json.loads(r.stdout)
    assert lab["python"].startswith("3.9.") and lab["toml"] == "0.10.1", lab["python"]
    ref = outcomes(texts, [REFERENCE])
    wrong = [why for t, (r0,), (toml_010, plain) in zip(texts, ref, lab["outcomes"])
             if (why := disagreement(t, r0, {"toml": toml_010, None: plain}))]
    assert not wrong, (len(wrong), wrong[:5])
    print(f"\nDebian 11 lab: python {lab['python']}, toml {lab['toml']} ({lab['toml_file']}): {len(texts)} configs agree")
