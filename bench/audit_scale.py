#!/usr/bin/env python3
"""Audit time per domain on one libvirt connection, against a baseline measured in the same run.

Defines N shut-off domains (varied machine types and CPU modes) on the connection, then times, in
interleaved rounds,
  baseline: listAllDomains + XMLDesc(INACTIVE) of each (what any audit must at least fetch), timed in a
            process of its own with a plain connection
  fetch on audit's connection: the same, on a connection opened as audit opens it (open_for_reading:
            libvirt's event loop in a thread and keepalive, what bounds a call to a wedged host)
  audit:    virtxml-cpu's audit of the same domains by name (fetch + parse + resolve + decide), over N
            domains and over 1 (the connection and host facts): the difference over N-1 is per domain
and removes the domains again. Each round starts the audit with an empty memo, as a new process does.
Medians of the rounds; the ratio is paired per round. Needs a libvirt daemon you may define domains on
(default qemu:///system); `test:///default` measures in-process without a daemon (its XMLDesc is a
function call, not a round trip, so the baseline is tiny). `--code DIR` audits with another checkout's
package (the same bench, before against after).
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path

PREFIX = "vxc-bench-"
CPUS = ["", "<cpu mode='host-model'/>", "<cpu mode='host-passthrough'/>",
        "<cpu mode='custom'><model>qemu64</model></cpu>"]
MACHINES = ["pc-q35-7.2", "pc-i440fx-7.2", "pc-i440fx-2.10", "q35", "pc-q35-5.2"]


BARE = """
import sys, time, libvirt
conn = libvirt.open(sys.argv[1])
t = time.perf_counter()
n = 0
for d in conn.listAllDomains():
    if d.name().startswith(sys.argv[2]):
        d.XMLDesc(libvirt.VIR_DOMAIN_XML_INACTIVE)
        n += 1
print((time.perf_counter() - t) / n)
"""


def bare_fetch(uri: str) -> float:
    """The baseline per domain, in a process of its own: libvirt's event loop, once audit has started it in
    this one, slows every connection here (its thread wakes on each reply)."""
    out = subprocess.run([sys.executable, "-c", BARE, uri, PREFIX], capture_output=True, text=True, check=True)
    return float(out.stdout)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-n", type=int, default=500)
    ap.add_argument("-r", "--rounds", type=int, default=5)
    ap.add_argument("--connect", default="qemu:///system")
    ap.add_argument("--code", type=Path, default=Path(__file__).resolve().parent.parent,
                    help="the checkout whose virtxml_cpu is audited (default: this one)")
    args = ap.parse_args()
    sys.path.insert(0, str(args.code.resolve()))
    import libvirt

    from virtxml_cpu.core import pipeline
    from virtxml_cpu.core.config import Config
    from virtxml_cpu.host.connection import open_for_reading
    from virtxml_cpu.live.audit import AuditOptions, audit

    conn = libvirt.open(args.connect)
    doms = []
    audits_conn = None
    try:
        for i in range(args.n):
            xml = (f"<domain type='kvm'><name>{PREFIX}{i:04d}</name><memory unit='MiB'>64</memory><vcpu>2</vcpu>"
                   f"<os><type arch='x86_64' machine='{MACHINES[i % len(MACHINES)]}'>hvm</type></os>"
                   f"{CPUS[i % len(CPUS)]}<devices/></domain>")
            doms.append(conn.defineXML(xml))
        names = [d.name() for d in doms]
        bases, kept, pers, ones, totals = [], [], [], [], []

        def fetch_all(c) -> float:
            t = time.perf_counter()
            for d in c.listAllDomains():
                if d.name().startswith(PREFIX):
                    d.XMLDesc(libvirt.VIR_DOMAIN_XML_INACTIVE)
            return (time.perf_counter() - t) / args.n

        need = 0
        for _ in range(args.rounds):
            bases.append(bare_fetch(args.connect))
            if audits_conn is not None:
                kept.append(fetch_all(audits_conn))
            pipeline.MEMO = pipeline.Memo()  # a new process's memo: each round resolves its templates afresh
            t = time.perf_counter()
            audit([args.connect], AuditOptions(Config(), names=tuple(names[:1])))
            one = time.perf_counter() - t  # connection + host facts + one domain
            t = time.perf_counter()
            result = audit([args.connect], AuditOptions(Config(), names=tuple(names)))
            total = time.perf_counter() - t
            rows = result[0].rows
            assert len(rows) == args.n and not result[0].error, result[0].error
            need = sum(r.needs_fix for r in rows)
            ones.append(one)
            totals.append(total)
            pers.append((total - one) / (args.n - 1))
            if audits_conn is None:  # opened after the first audit, as audit's (the event loop now runs)
                audits_conn = open_for_reading(args.connect)
        ratios = sorted(p / b for p, b in zip(pers, bases))
        med = statistics.median
        print(f"domains: {args.n} ({need} need kvm-pv-unhalt), {args.rounds} rounds, code: {args.code}")
        print(f"baseline (list + XMLDesc):  {med(bases) * 1000:.3f} ms per domain")
        if kept:
            print(f"fetch on audit's connection: {med(kept) * 1000:.3f} ms per domain (event loop + keepalive; "
                  f"rounds 2-{args.rounds})")
        print(f"audit, whole run:           {med(totals):.3f} s = {med(totals) / args.n * 1000:.3f} ms per domain "
              f"(one-off connection + host facts: {med(ones) * 1000:.0f} ms)")
        print(f"audit, per extra domain:    {med(pers) * 1000:.3f} ms")
        print(f"audit / baseline per domain = {med(ratios):.2f}x (rounds {ratios[0]:.2f}-{ratios[-1]:.2f})")
        if kept:
            same = sorted(p / k for p, k in zip(pers[1:], kept))
            print(f"audit / fetch on audit's connection = {med(same):.2f}x (rounds {same[0]:.2f}-{same[-1]:.2f})")
    finally:
        for d in doms:
            d.undefine()
        if audits_conn is not None:
            audits_conn.close()
        conn.close()


if __name__ == "__main__":
    main()
