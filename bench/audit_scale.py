#!/usr/bin/env python3
"""Audit time per domain on one libvirt connection, against a baseline measured in the same run.

Defines N shut-off domains (varied machine types and CPU modes) on the connection, then times
  baseline: listAllDomains + XMLDesc(INACTIVE) of each (what any audit must at least fetch)
  audit:    virtxml-cpu's audit of the same connection (fetch + parse + resolve + decide)
and removes the domains again. Needs a libvirt daemon you may define domains on (default qemu:///system).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from virtxml_cpu.live.audit import AuditOptions, audit  # noqa: E402
from virtxml_cpu.core.config import Config  # noqa: E402

PREFIX = "vxc-bench-"
CPUS = ["", "<cpu mode='host-model'/>", "<cpu mode='host-passthrough'/>",
        "<cpu mode='custom'><model>qemu64</model></cpu>"]
MACHINES = ["pc-q35-7.2", "pc-i440fx-7.2", "pc-i440fx-2.10", "q35", "pc-q35-5.2"]


def main() -> None:
    import libvirt

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-n", type=int, default=500)
    ap.add_argument("--connect", default="qemu:///system")
    args = ap.parse_args()
    conn = libvirt.open(args.connect)
    doms = []
    try:
        for i in range(args.n):
            xml = (f"<domain type='kvm'><name>{PREFIX}{i:04d}</name><memory unit='MiB'>64</memory><vcpu>2</vcpu>"
                   f"<os><type arch='x86_64' machine='{MACHINES[i % len(MACHINES)]}'>hvm</type></os>"
                   f"{CPUS[i % len(CPUS)]}<devices/></domain>")
            doms.append(conn.defineXML(xml))
        names = [d.name() for d in doms]
        t = time.perf_counter()
        for d in conn.listAllDomains():
            if d.name().startswith(PREFIX):
                d.XMLDesc(libvirt.VIR_DOMAIN_XML_INACTIVE)
        base = time.perf_counter() - t
        t = time.perf_counter()
        audit([args.connect], AuditOptions(Config(), names=tuple(names[:1])))
        one = time.perf_counter() - t  # connection + host facts + one domain
        t = time.perf_counter()
        result = audit([args.connect], AuditOptions(Config(), names=tuple(names)))
        total = time.perf_counter() - t
        rows = result[0].rows
        assert len(rows) == args.n and not result[0].error, result[0].error
        need = sum(r.needs_fix for r in rows)
        per = (total - one) / (args.n - 1)
        print(f"domains: {args.n} ({need} need kvm-pv-unhalt)")
        print(f"baseline (list + XMLDesc):  {base:.3f} s = {base / args.n * 1000:.2f} ms per domain")
        print(f"audit, whole run:           {total:.3f} s = {total / args.n * 1000:.2f} ms per domain "
              f"(one-off connection + host facts: {one * 1000:.0f} ms)")
        print(f"audit, per extra domain:    {per * 1000:.2f} ms")
        print(f"audit / baseline per domain = {per / (base / args.n):.2f}x")
    finally:
        for d in doms:
            d.undefine()
        conn.close()


if __name__ == "__main__":
    main()
