#!/usr/bin/env python3
"""Worst-case time of the libvirt hook on a crafted definition, against a plain one of the same size.

libvirt waits for the hook with no timeout: whoever may define a domain decides how long a guest start
(and a libvirtd worker) waits. Each shape below is a definition libvirt accepts and keeps, built to make
one part of the evaluation expensive (the DOCTYPE check, the tree, the text the decision reads, the rules'
loops over children). The plain baseline is a domain with as many ordinary disks as fit in the same size.

The hook is installed into a temporary hooks directory exactly as `virtxml-cpu hook install` does and run
through its shebang as libvirt runs it: `NAME prepare begin -`, the definition on stdin. Runs are
interleaved; medians are reported, with each shape's ratio to the plain definition in the same run.
With --rewrite, `virtxml-cpu rewrite` (what `apply` and `watch` do to each definition) is timed too.
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

ENV = {"LC_ALL": "C", "PATH": "/usr/bin:/bin", "HOME": "/root"}  # what libvirt gives a hook
HEAD = (b"<domain type='kvm'><name>big</name><uuid>0b7e2d1c-6a51-4f0e-8d7b-3c2f9e1a4b66</uuid>"
        b"<memory unit='KiB'>1048576</memory><vcpu placement='static'>4</vcpu>"
        b"<os><type arch='x86_64' machine='pc-q35-7.2'>hvm</type></os>")
META = b"<metadata><m:x xmlns:m='urn:x'>"
QEMU_DOMAIN = HEAD.replace(b"<domain ", b"<domain xmlns:qemu='http://libvirt.org/schemas/domain/qemu/1.0' ")
DEVICES = b"<devices><emulator>/usr/bin/qemu-system-x86_64</emulator></devices></domain>"
END_META = b"</m:x></metadata>" + DEVICES
DISK = (b"<disk type='file' device='disk'><driver name='qemu' type='qcow2'/>"
        b"<source file='/var/lib/libvirt/images/d.qcow2'/><target dev='vda' bus='virtio'/></disk>")


def _fill(size: int, unit: bytes, around: int) -> bytes:
    return unit * max(1, (size - around) // len(unit))


def shapes(size: int) -> dict[str, bytes]:
    """name -> definition of about `size` bytes."""
    cpu = b"<cpu mode='host-model'/>"
    base = len(HEAD) + len(cpu) + 200
    pins = min(16384, (size - base) // 40)  # libvirt's limit on host CPU numbers; a file may have more vCPUs

    def meta(unit: bytes, pre: bytes = b"", post: bytes = b"") -> bytes:
        return HEAD + cpu + META + pre + _fill(size, unit, base + len(pre) + len(post)) + post + END_META

    return {
        "plain (disks)": HEAD + cpu + b"<devices><emulator>/usr/bin/qemu-system-x86_64</emulator>"
                         + _fill(size, DISK, base) + b"</devices></domain>",
        "CDATA '<!doctype <!--<!--...'": meta(b"<!--", b"<![CDATA[<!doctype ", b"]]>"),
        "CDATA sections in <name>": HEAD.replace(b"<name>big</name>", b"<name>" + _fill(size, b"<![CDATA[a]]>", base)
                                                 + b"</name>") + cpu + DEVICES,
        "comments in metadata": meta(b"<!--<!DOCTYPE-->"),
        "nesting at libxml2's depth limit": meta(b"<m:a>" * 250 + b"</m:a>" * 250),
        "metadata children": meta(b"<m:y/>"),
        "one element, many attributes": HEAD + cpu + META[:-1] + b" "
        + b" ".join(b"a%07d='1'" % i for i in range(max(1, (size - base) // 14))) + b">" + END_META,
        "cpu features": HEAD + b"<cpu mode='host-model'>" + _fill(size, b"<feature policy='require' name='x2apic'/>", base)
        + b"</cpu>" + DEVICES,
        "cpuset of full ranges": HEAD.replace(b"<vcpu placement='static'>", b"<vcpu placement='static' cpuset='"
                                              + b",".join([b"0-16383"] * ((size - base) // 8)) + b"'>") + cpu + DEVICES,
        "vcpupins on every host CPU": HEAD.replace(b">4</vcpu>", b">%d</vcpu>" % pins) + b"<cputune>"
        + b"".join(b"<vcpupin vcpu='%d' cpuset='0-16383'/>" % i for i in range(pins)) + b"</cputune>" + cpu + DEVICES,
        "commandline -cpu of many properties": QEMU_DOMAIN + cpu + b"<devices/><qemu:commandline><qemu:arg value='-cpu'/>"
        + b"<qemu:arg value='host" + _fill(size, b",kvm-pv-unhalt=off", base) + b"'/></qemu:commandline></domain>",
        "qemu:commandline args": HEAD.replace(b"<domain ", b"<domain xmlns:qemu='http://libvirt.org/schemas/domain/qemu/1.0' ")
        + cpu + b"<devices/><qemu:commandline>"
        + _fill(size, b"<qemu:arg value='-global'/><qemu:arg value='a.b.c.d.e=f'/>", base) + b"</qemu:commandline></domain>",
    }


def timed(cmd: list[str], stdin: bytes, expect: bytes, where: str) -> float:
    t = time.perf_counter()
    r = subprocess.run(cmd, input=stdin, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=ENV, check=False)
    took = time.perf_counter() - t
    if not (expect in r.stderr if expect else r.returncode == 0):
        raise SystemExit(f"{where}: not evaluated (exit {r.returncode}): {r.stderr[-300:]!r}")
    return took


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-n", "--runs", type=int, default=5)
    ap.add_argument("--mib", type=float, default=4.0, help="definition size in MiB (default 4: libvirt's limit)")
    ap.add_argument("--rewrite", action="store_true", help="also time `virtxml-cpu rewrite` on each")
    args = ap.parse_args()
    docs = shapes(int(args.mib * 1024 * 1024))
    with tempfile.TemporaryDirectory() as tmp:
        cfg = Path(tmp) / "config.toml"
        cfg.write_text(f'[hook]\nmode = "audit"\nsyslog_socket = "{tmp}/none.sock"\n')  # no syslog: stderr
        # No decision digest: every run is a full evaluation, and nothing is kept outside tmp.
        hookinstall.install(f"{tmp}/hooks", "audit", str(cfg), legacy=False, digest_dir="")
        hook = [f"{tmp}/hooks/qemu.d/virtxml-cpu", "big", "prepare", "begin", "-"]
        rewrite = [sys.executable, "-m", "virtxml_cpu", "rewrite", "--no-host-probe", "--qemu-flavour", "upstream", "-"]
        runs = {("hook", k): (hook, v, b" decision=") for k, v in docs.items()}  # evaluated
        if args.rewrite:
            runs.update({("rewrite", k): (rewrite, v, b"") for k, v in docs.items()})
        samples: dict[tuple[str, str], list[float]] = {k: [] for k in runs}
        for _ in range(args.runs):
            for key, (cmd, stdin, expect) in runs.items():
                samples[key].append(timed(cmd, stdin, expect, " ".join(key)))
    print(f"{args.mib:g} MiB definitions, median of {args.runs} runs, interpreter {sys.executable}")
    for what in ("hook", "rewrite") if args.rewrite else ("hook",):
        med = {k: statistics.median(v) for (w, k), v in samples.items() if w == what}
        plain = med["plain (disks)"]
        print(f"\n{what}: {'shape':<34} {'bytes':>9} {'seconds':>8} {'/ plain':>8}")
        for k, v in med.items():
            print(f"{what}: {k:<34} {len(docs[k]):>9} {v:8.3f} {v / plain:7.2f}x")
        worst = max((k for k in med if k != "plain (disks)"), key=med.get)
        print(f"{what}: worst case {worst!r}: {med[worst]:.3f} s = {med[worst] / plain:.2f}x the plain definition")


if __name__ == "__main__":
    main()
