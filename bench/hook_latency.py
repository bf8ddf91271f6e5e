#!/usr/bin/env python3
"""Latency of the libvirt hook as whole processes, against floors measured in the same run.

fast path (an ignored op, e.g. `started begin`)  vs  python3 -S -c pass
prepare path (`prepare begin`, full evaluation, the QEMU build read from libvirt's capabilities cache when
the host has one for /usr/bin/qemu-system-x86_64)  vs  python3 -c 'import lxml.etree'

The hook is installed into a temporary hooks directory exactly as `virtxml-cpu hook install` does and
executed through its shebang, as libvirt runs it. Runs are interleaved; medians are reported.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from virtxml_cpu import hookinstall  # noqa: E402

# With the emulator libvirt lists, so the prepare path reads libvirt's capabilities cache as on a real host.
XML = (ROOT / "tests" / "fixtures" / "handwritten-no-cpu.xml").read_bytes().replace(
    b"</devices>", b"<emulator>/usr/bin/qemu-system-x86_64</emulator></devices>")
ENV = {"LC_ALL": "C", "PATH": "/usr/bin:/bin", "HOME": "/root"}  # what libvirt gives a hook


def timed(cmd: list[str], stdin: bytes) -> float:
    t = time.perf_counter()
    subprocess.run(cmd, input=stdin, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=ENV, check=False)
    return time.perf_counter() - t


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-n", "--runs", type=int, default=40)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        cfg = Path(tmp) / "config.toml"
        cfg.write_text(f'[hook]\nmode = "audit"\nsyslog_socket = "{tmp}/log.sock"\n')
        hookinstall.install(f"{tmp}/hooks", "audit", str(cfg), legacy=False)
        hook = f"{tmp}/hooks/qemu.d/virtxml-cpu"
        cases = {
            "floor: python3 -S -c pass": ([sys.executable, "-S", "-c", "pass"], b""),
            "hook fast path (started begin)": ([hook, "vm", "started", "begin", "-"], XML),
            "floor: python3 -c 'import lxml.etree'": ([sys.executable, "-c", "import lxml.etree"], b""),
            "hook prepare path (prepare begin)": ([hook, "vm", "prepare", "begin", "-"], XML),
        }
        for cmd, stdin in cases.values():  # warm the page cache
            timed(cmd, stdin)
        samples: dict[str, list[float]] = {k: [] for k in cases}
        for _ in range(args.runs):
            for name, (cmd, stdin) in cases.items():
                samples[name].append(timed(cmd, stdin))
    med = {k: statistics.median(v) * 1000 for k, v in samples.items()}
    print(f"interpreter {sys.executable} (the floor with site counts every .pth file of its environment)")
    for k, v in med.items():
        print(f"{k:<40} {v:7.1f} ms (median of {args.runs})")
    fast = med["hook fast path (started begin)"] / med["floor: python3 -S -c pass"]
    prep = med["hook prepare path (prepare begin)"] / med["floor: python3 -c 'import lxml.etree'"]
    print(f"fast path / floor    = {fast:.2f}x (target <= 1.1x)")
    print(f"prepare path / floor = {prep:.2f}x (target <= 1.5x)")


if __name__ == "__main__":
    main()
