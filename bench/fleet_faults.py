#!/usr/bin/env python3
"""A fleet audit with wedged hosts, as whole `virtxml-cpu audit` processes, against the same fleet without
them, in the same run.

Defines D shut-off domains on the libvirt daemon and reaches it as H hosts through its loopback TCP
listener (qemu+tcp://127.0.0.1/system?host=N: one daemon, H connections, H x D domains). Then:
  healthy:  the H hosts
  faults:   the H hosts + R refusing (closed ports) + S silent (listeners that accept and never answer)
with `--timeout T`. A wedged host should cost the run at most its timeout: faults <= healthy + T (+ a
little), with every healthy domain reported. Needs a daemon you may define domains on, listening on
127.0.0.1:16509 without auth (the test lab's).
"""

from __future__ import annotations

import argparse
import json
import socket
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PREFIX = "vxc-fleet-"


def silent_listener() -> tuple[int, socket.socket]:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen(64)
    held = []

    def accept():
        while True:
            try:
                held.append(s.accept()[0])
            except OSError:
                return

    threading.Thread(target=accept, daemon=True).start()
    return s.getsockname()[1], s


def refused_port() -> int:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def run(uris: list[str], timeout: float) -> tuple[float, int, dict]:
    t = time.perf_counter()
    r = subprocess.run([sys.executable, "-m", "virtxml_cpu", "audit", "--format", "json", "--timeout", str(timeout),
                        *[a for u in uris for a in ("--connect", u)]], cwd=ROOT, capture_output=True, text=True)
    took = time.perf_counter() - t
    docs = [json.loads(line) for line in r.stdout.splitlines()]
    rows = sum(1 for d in docs if d["record"] == "domain" and d["error"] is None)
    return took, rows, docs[-1]


def main() -> None:
    import libvirt

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--hosts", type=int, default=50)
    ap.add_argument("--domains", type=int, default=200)
    ap.add_argument("--refusing", type=int, default=5)
    ap.add_argument("--silent", type=int, default=5)
    ap.add_argument("--timeout", type=float, default=5.0)
    ap.add_argument("-r", "--runs", type=int, default=3)
    args = ap.parse_args()
    conn = libvirt.open("qemu:///system")
    doms = []
    listeners = []
    try:
        for i in range(args.domains):
            doms.append(conn.defineXML(
                f"<domain type='kvm'><name>{PREFIX}{i:04d}</name><memory unit='MiB'>64</memory><vcpu>2</vcpu>"
                f"<os><type arch='x86_64' machine='pc-q35-7.2'>hvm</type></os><cpu mode='host-model'/>"
                f"<devices/></domain>"))
        others = len(conn.listAllDomains()) - args.domains
        healthy = [f"qemu+tcp://127.0.0.1/system?host={n}" for n in range(args.hosts)]
        wedged = [f"qemu+tcp://127.0.0.1:{refused_port()}/system" for _ in range(args.refusing)]
        for _ in range(args.silent):
            port, sock = silent_listener()
            listeners.append(sock)
            wedged.append(f"qemu+tcp://127.0.0.1:{port}/system")
        expect = args.hosts * (args.domains + others)
        times = {"healthy": [], "faults": []}
        for _ in range(args.runs):
            for kind, uris in (("healthy", healthy), ("faults", healthy + wedged)):
                took, rows, summary = run(uris, args.timeout)
                assert rows == expect, (kind, rows, expect, summary)
                if kind == "faults":
                    assert len(summary["timed_out"]) == args.silent and len(summary["unreachable"]) == args.refusing
                times[kind].append(took)
        h, f = statistics.median(times["healthy"]), statistics.median(times["faults"])
        print(f"{args.hosts} hosts x {args.domains + others} domains = {expect} domains, every one reported "
              f"(medians of {args.runs})")
        print(f"healthy fleet:                                {h:6.2f} s")
        print(f"+ {args.refusing} refusing + {args.silent} silent hosts (timeout {args.timeout:g} s):  {f:6.2f} s "
              f"= healthy + {f - h:.2f} s (bound: healthy + timeout = {h + args.timeout:.2f} s)")
    finally:
        for s in listeners:
            s.close()
        for d in doms:
            d.undefine()
        conn.close()


if __name__ == "__main__":
    main()
