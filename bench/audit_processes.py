#!/usr/bin/env python3
"""Whole-process cost of `virtxml-cpu audit --format json` over N domains of libvirt's test driver (a node
file, no daemon), against a floor measured in the same run: a process that lists the domains with
libvirt-python and reads each definition (XMLDesc INACTIVE), what any audit must at least do.

Runs are interleaved (floor, then each checkout's audit, per round); medians are reported and the
ratios paired per round, in wall time and in the child's CPU time (user + system: what other work on a
shared machine moves least). The children keep their bytecode (in a cache directory of their own, as
an installed package has it compiled) and one untimed round fills it. `--code DIR` (repeatable) audits
with other checkouts' packages, each with the interpreter of its own .venv when it has one: before
against after in one run.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CPUS = ["", "<cpu mode='host-model'/>", "<cpu mode='host-passthrough'/>",
        "<cpu mode='custom'><model>qemu64</model></cpu>"]
MACHINES = ["pc-q35-7.2", "pc-i440fx-7.2", "pc-i440fx-2.10", "q35", "pc-q35-5.2"]
TEST_NS = "http://libvirt.org/schemas/domain/test/1.0"
FLOOR = """
import sys, libvirt
conn = libvirt.openReadOnly(sys.argv[1])
for d in conn.listAllDomains():
    d.XMLDesc(libvirt.VIR_DOMAIN_XML_INACTIVE)
"""
TARGET = 1.3


def node_file(path: Path, n: int) -> None:
    """N shut-off persistent domains of mixed machine types and CPU modes."""
    doms = "".join(
        f"<domain type='kvm' xmlns:test='{TEST_NS}'><name>vxc-bench-{i:04d}</name><memory unit='MiB'>64</memory>"
        f"<vcpu>2</vcpu><os><type arch='x86_64' machine='{MACHINES[i % len(MACHINES)]}'>hvm</type></os>"
        f"{CPUS[i % len(CPUS)]}<devices/><test:runstate>5</test:runstate></domain>\n" for i in range(n))
    path.write_text(f"<node>\n{doms}</node>\n")


def timed(cmd: list[str], env: dict) -> tuple[float, float]:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.perf_counter()
    subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env, check=False)
    wall = time.perf_counter() - t
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)


def environment(tmp: str, code: Path | None = None) -> dict:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPYCACHEPREFIX"] = os.path.join(tmp, "pycache", str(code).strip("/").replace("/", "+"))
    if code is not None:
        env["PYTHONPATH"] = str(code)
    return env


def interpreter(code: Path) -> str:
    venv = code / ".venv" / "bin" / "python"
    return str(venv) if venv.exists() else sys.executable


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-n", type=int, action="append", help="domains (repeatable; default 500 and 2000)")
    ap.add_argument("-r", "--rounds", type=int, default=5)
    ap.add_argument("--code", type=Path, action="append",
                    help="a checkout whose virtxml_cpu is audited (repeatable; default: this one)")
    args = ap.parse_args()
    codes = [c.resolve() for c in args.code or [ROOT]]
    with tempfile.TemporaryDirectory() as tmp:
        for n in args.n or [500, 2000]:
            node = Path(tmp) / f"node-{n}.xml"
            node_file(node, n)
            uri = f"test://{node}"
            floor_cmd = [sys.executable, "-c", FLOOR, uri]
            floors, audits = [], {c: [] for c in codes}
            for r in range(args.rounds + 1):  # round 0 fills the bytecode caches
                floor = timed(floor_cmd, environment(tmp))
                runs = [timed([interpreter(c), "-m", "virtxml_cpu", "audit", "--connect", uri, "--format", "json"],
                              environment(tmp, c)) for c in codes]
                if r:
                    floors.append(floor)
                    for c, run in zip(codes, runs):
                        audits[c].append(run)
            med = statistics.median
            print(f"{n} domains, {args.rounds} rounds: floor {med(w for w, _ in floors):.3f} s wall, "
                  f"{med(c for _, c in floors):.3f} s CPU")
            for c in codes:
                wall = sorted(a[0] / f[0] for a, f in zip(audits[c], floors))
                cpu = sorted(a[1] / f[1] for a, f in zip(audits[c], floors))
                print(f"  {c}: audit {med(a[0] for a in audits[c]):.3f} s wall = {med(wall):.2f}x "
                      f"({wall[0]:.2f}-{wall[-1]:.2f}); CPU {med(cpu):.2f}x ({cpu[0]:.2f}-{cpu[-1]:.2f}); "
                      f"target {TARGET}x")


if __name__ == "__main__":
    main()
