#!/usr/bin/env python3
"""Per-document cost of `rewrite --check` and `explain --format json` on files, against a floor measured
in the same run: an lxml parse + serialize of the same documents.

Marginal cost: each command runs over N documents (clones of the T bundled fixtures and examples, each
with its own name and uuid), over the first T of them (one of each template) and over 1 document, as whole
processes. The cost per document is (time over N - time over T) / (N - T), in wall time and in the child's
CPU time (user + system: what other work on a shared machine moves least): start-up excluded, and the
work a run does once per template (its first document resolved and decided, the patterns it matches
compiled, the modules it needs imported) reported apart as the cost per template, (time over T - time
over 1) / (T - 1). Measured against one document alone, that once-per-template work was spread over the N
documents: about 5-9 us a document at N = 2000, 30 at N = 300, and the "per document" figure depended on
N. Runs are interleaved; medians are reported, the ratios paired per round.
Also the peak memory (ru_maxrss of the child) of both verbs on one 10 MiB document of small elements,
against its size.
"""

from __future__ import annotations

import argparse
import os
import re
import resource
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SOURCES = sorted(p for d in (ROOT / "tests" / "fixtures", ROOT / "examples") for p in d.glob("*.xml"))
FLOOR = ("import sys\nfrom lxml import etree\n"
         "p = etree.XMLParser(resolve_entities=False, no_network=True, load_dtd=False)\n"
         "for f in sys.argv[1:]:\n"
         "    with open(f, 'rb') as fh: etree.tostring(etree.fromstring(fh.read(), p))\n")

TARGETS = {"rewrite --check": 1.3, "explain --format json": 2.0}  # per document, against the floor


def timed(cmd: list[str]) -> tuple[float, float]:
    """Wall time and CPU time (user + system) of one child process."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.perf_counter()
    subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
    wall = time.perf_counter() - t
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)


def big_document(path: Path, size: int) -> None:
    """A domain of `size` bytes at most (the largest input the tool takes is 10 MiB), most of it small
    device elements."""
    head = (ROOT / "examples" / "fedora-host-model.xml").read_text()
    filler = "    <controller type='pci' index='1' model='pcie-root-port'/>\n"
    body = filler * ((size - len(head) - 64) // len(filler))
    path.write_text(head.replace("<devices>", "<devices>\n" + body, 1))
    assert path.stat().st_size <= size


def peak_kib(cmd: list[str]) -> int:
    r = subprocess.run(["/usr/bin/time", "-f", "%M"] + cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                       text=True, check=False)
    return int(r.stderr.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-n", "--docs", type=int, default=2000, help="documents per run (copies of the fixtures)")
    ap.add_argument("-r", "--runs", type=int, default=5)
    ap.add_argument("--against", type=Path, help="another checkout: its commands too, interleaved in the same run")
    args = ap.parse_args()
    if args.docs < 2 * len(SOURCES):
        ap.error(f"--docs must be at least {2 * len(SOURCES)} (twice the {len(SOURCES)} templates)")
    py = sys.executable
    with tempfile.TemporaryDirectory() as tmp:
        files = []
        for i in range(args.docs):  # clones: each copy gets its own name and uuid, as a fleet's VMs do
            dst = Path(tmp) / f"d{i:05d}.xml"
            text = SOURCES[i % len(SOURCES)].read_bytes()
            text = re.sub(rb"<name>([^<]*)</name>", lambda m: b"<name>%s-%d</name>" % (m.group(1), i), text, 1)
            text = re.sub(rb"<uuid>[^<]*</uuid>", b"<uuid>%s</uuid>" % str(uuid.UUID(int=i)).encode(), text, 1)
            dst.write_bytes(text)
            files.append(str(dst))
        cases = {
            "floor: lxml parse + serialize": [py, "-c", FLOOR],
            "rewrite --check": [py, "-m", "virtxml_cpu", "rewrite", "--check", "-q", "--no-host-probe",
                                "--qemu-build", "upstream"],
            "explain --format json": [py, "-m", "virtxml_cpu", "explain", "--format", "json", "--no-host-probe",
                                      "--qemu-build", "upstream"],
        }
        cwd = dict.fromkeys(cases, ROOT)  # `-m virtxml_cpu` runs the package of the directory it starts in
        if args.against:
            for name in [k for k in cases if not k.startswith("floor")]:
                cases[f"{name} [{args.against.name}]"] = cases[name]
                cwd[f"{name} [{args.against.name}]"] = args.against.resolve()
        env_cwd = os.getcwd()
        os.chdir(ROOT)
        per_doc: dict[str, list[float]] = {k: [] for k in cases}
        cpu_doc: dict[str, list[float]] = {k: [] for k in cases}
        cpu_template: dict[str, list[float]] = {k: [] for k in cases}
        templates = len(SOURCES)  # files[:templates]: each template once (file i is a clone of SOURCES[i % T])
        for _ in range(args.runs):
            for name, cmd in cases.items():
                os.chdir(cwd[name])
                many, many_cpu = timed(cmd + files)
                each, each_cpu = timed(cmd + files[:templates])
                one, one_cpu = timed(cmd + files[:1])
                per_doc[name].append((many - each) / (len(files) - templates))
                cpu_doc[name].append((many_cpu - each_cpu) / (len(files) - templates))
                cpu_template[name].append((each_cpu - one_cpu) / (templates - 1))
        os.chdir(ROOT)
        # Wall time is what a user waits for; CPU time is what the process itself spent, much less moved by
        # other work on a shared machine (a busy neighbour stretches wall time, rarely CPU time).
        for title, table in (("wall", per_doc), ("CPU", cpu_doc)):
            floors = table["floor: lxml parse + serialize"]
            for k, v in table.items():
                ratio = ""
                if not k.startswith("floor"):  # paired: each round's ratio against that round's floor
                    ratios = sorted(a / f for a, f in zip(v, floors))
                    target = TARGETS[k.split(" [")[0]]
                    ratio = (f"  {statistics.median(ratios):.2f}x the floor (rounds {ratios[0]:.2f}-{ratios[-1]:.2f}; "
                             f"target <= {target}x)")
                print(f"{title + ', ' + k:<45} {statistics.median(v) * 1e6:8.1f} us per document "
                      f"(median of {args.runs}, {args.docs} documents){ratio}")
        for k, v in cpu_template.items():  # what a template's first document costs beyond a clone's
            print(f"{'CPU, ' + k:<45} {statistics.median(v) * 1e6:8.1f} us per template "
                  f"(median of {args.runs}, {templates} templates, each once)")
        big = Path(tmp) / "big.xml"
        big_document(big, 10 * 1024 * 1024)  # virtxml_cpu.constants.MAX_DEFINITION_BYTES
        size_kib = big.stat().st_size // 1024
        for name in ("rewrite --check", "explain --format json"):
            r = subprocess.run(cases[name] + [str(big)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
            assert r.returncode in (0, 1), r.stderr  # the document is accepted, not rejected
            kib = peak_kib(cases[name] + [str(big)])
            print(f"peak memory, {name}, {size_kib} KiB document: {kib} KiB = {kib / size_kib:.1f}x its size "
                  "(target <= 10x)")
        os.chdir(env_cwd)


if __name__ == "__main__":
    main()
