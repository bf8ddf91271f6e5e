#!/usr/bin/env python3
"""Latency of the libvirt hook as whole processes, against floors measured in the same run, for the venv's
interpreter and Debian's /usr/bin/python3 (when it has python3-lxml).

fast path (an ignored op, `started begin`: the shell front alone)   vs  /bin/sh -c exit
cold prepare (`prepare begin`, a full evaluation, digest empty)      vs  python3 -c 'import lxml.etree'
cached prepare (`prepare begin` answered from the decision digest)   vs  python3 -I -S -c pass

With --against DIR (another checkout of virtxml-cpu, e.g. the commit before a change), the same hook
installed from DIR by its own `virtxml-cpu hook install` runs interleaved with this tree's, and the cold and
cached prepare paths are also reported as this tree / DIR.

The hook is rendered exactly as `virtxml-cpu hook install` renders it (for the venv: installed by it) and
executed as libvirt runs it, with libvirt's environment. The QEMU build is read from libvirt's capabilities
cache when the host has one for /usr/bin/qemu-system-x86_64. Runs are interleaved; medians are reported.
"""

from __future__ import annotations

import argparse
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from virtxml_cpu.hook import install  # noqa: E402

# With the emulator libvirt lists, so the prepare path reads libvirt's capabilities cache as on a real host.
XML = (ROOT / "tests" / "fixtures" / "handwritten-no-cpu.xml").read_bytes().replace(
    b"</devices>", b"<emulator>/usr/bin/qemu-system-x86_64</emulator></devices>")
XML = XML[XML.index(b"<domain"):].replace(b"<domain type='kvm'>", b"<domain type='kvm' id='7'>")
ENV = {"LC_ALL": "C", "PATH": "/usr/bin:/bin", "HOME": "/root"}  # what libvirt gives a hook
SYSTEM_PYTHON = "/usr/bin/python3"
SYSTEM_LIB = "/usr/lib/python3/dist-packages"
TARGETS = {"fast": 1.1, "cold": 1.3, "cached": None}  # cached: its target is the lab's (bench/hook_start.py)


def timed(cmd: list[str], stdin: bytes, before=None) -> float:
    if before:
        before()
    t = time.perf_counter()
    subprocess.run(cmd, input=stdin, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=ENV, check=False)
    return time.perf_counter() - t


def interpreters() -> list[tuple[str, tuple[str, ...]]]:
    """(python, lib dirs) for the venv's interpreter and Debian's, when it has lxml."""
    out = [(sys.executable, install.lib_dirs())]
    if os.path.realpath(sys.executable) != os.path.realpath(SYSTEM_PYTHON) and os.path.exists(SYSTEM_PYTHON):
        if subprocess.run([SYSTEM_PYTHON, "-c", "import lxml.etree"], capture_output=True).returncode == 0:
            out.append((SYSTEM_PYTHON, (SYSTEM_LIB,)))
        else:
            print(f"({SYSTEM_PYTHON} has no lxml: apt-get install python3-lxml to measure it too)")
    return out


def install_from(checkout: str, python: str, where: Path, config: Path) -> Path:
    """The hook as `virtxml-cpu hook install` of another checkout renders it for `python`."""
    r = subprocess.run([python, "-m", "virtxml_cpu", "hook", "install", "--hooks-dir", str(where), "--qemu-d",
                        "--mode", "audit", "--config", str(config), "--digest-dir", f"{where}.d"],
                       cwd=checkout, env={**ENV, "PYTHONPATH": checkout}, capture_output=True, text=True)
    hook = where / "qemu.d" / "virtxml-cpu"
    if r.returncode or f"PACKAGE_DIR='{os.path.realpath(checkout)}'" not in hook.read_text():
        sys.exit(f"hook install from {checkout} failed: {r.stderr.strip()}")
    return hook


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-n", "--runs", type=int, default=40)
    ap.add_argument("--against", metavar="DIR", help="another checkout: its hook runs interleaved with this one's")
    args = ap.parse_args()
    ok = True
    with tempfile.TemporaryDirectory() as tmp:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)  # a syslog that reads every line
        sock.bind(f"{tmp}/log.sock")
        sock.setblocking(False)
        cfg = Path(tmp) / "config.toml"
        cfg.write_text(f'[hook]\nmode = "audit"\nspool = "{tmp}/spool"\nsyslog_socket = "{tmp}/log.sock"\n')

        def drain():
            try:
                while True:
                    sock.recv(65536)
            except BlockingIOError:
                pass

        for python, lib in interpreters():
            hooks = {}
            for kind in ("cold", "cached"):
                hooks[kind] = Path(tmp) / f"hook-{kind}-{len(hooks)}-{abs(hash(python))}"
                hooks[kind].write_text(install.render(install.template(), python, install.PACKAGE_PARENT,
                                                          "audit", str(cfg), lib, f"{tmp}/{hooks[kind].name}.d"))
                hooks[kind].chmod(0o755)
            cold_dir = f"{tmp}/{hooks['cold'].name}.d"

            def empty_digest():
                drain()
                shutil.rmtree(cold_dir, ignore_errors=True)

            against = {}
            if args.against:
                for kind in ("cold", "cached"):
                    against[kind] = install_from(args.against, python, Path(tmp) / f"against-{kind}-{abs(hash(python))}",
                                                 cfg)
                against_cold_dir = f"{against['cold'].parent.parent}.d"

                def empty_against_digest():
                    drain()
                    shutil.rmtree(against_cold_dir, ignore_errors=True)

            cases = {
                "floor: /bin/sh -c exit": (["/bin/sh", "-c", "exit"], None),
                "fast path (started begin)": ([str(hooks["cold"]), "vm", "started", "begin", "-"], None),
                "floor: python3 -c 'import lxml.etree'": ([python, "-c", "import lxml.etree"], None),
                "cold prepare (digest empty)": ([str(hooks["cold"]), "vm", "prepare", "begin", "-"], empty_digest),
                "floor: python3 -I -S -c pass": ([python, "-I", "-S", "-c", "pass"], None),
                "cached prepare (digest hit)": ([str(hooks["cached"]), "vm", "prepare", "begin", "-"], drain),
            }
            if against:
                cases["cold prepare, --against"] = ([str(against["cold"]), "vm", "prepare", "begin", "-"],
                                                    empty_against_digest)
                cases["cached prepare, --against"] = ([str(against["cached"]), "vm", "prepare", "begin", "-"], drain)
            for cmd, before in cases.values():  # warm the page cache and the digest
                timed(cmd, XML, before)
            samples: dict[str, list[float]] = {k: [] for k in cases}
            for _ in range(args.runs):
                for name, (cmd, before) in cases.items():
                    samples[name].append(timed(cmd, XML, before))
            med = {k: statistics.median(v) * 1000 for k, v in samples.items()}
            print(f"interpreter {python} (a floor with site counts every .pth file of its environment)")
            for k, v in med.items():
                print(f"  {k:<40} {v:7.1f} ms (median of {args.runs})")
            names = list(med)
            for kind, (floor, path) in zip(TARGETS, ((names[0], names[1]), (names[2], names[3]), (names[4], names[5]))):
                ratio, target = med[path] / med[floor], TARGETS[kind]
                ok &= target is None or ratio <= target
                verdict = ("no target of its own: a guest start's +5% is bench/hook_start.py's" if target is None
                           else f"target <= {target}x{'' if ratio <= target else ': MISSED'}")
                print(f"  {kind + ' / floor':<22} = {ratio:.2f}x ({verdict})")
            if against:
                for kind in ("cold", "cached"):
                    mine = med[names[3] if kind == "cold" else names[5]]
                    print(f"  {kind + ' / --against':<22} = {mine / med[f'{kind} prepare, --against']:.3f}x "
                          f"({mine:.1f} ms here, {med[f'{kind} prepare, --against']:.1f} ms in {args.against})")
        sock.close()
    print("all targets met" if ok else "some target MISSED")
    return 0


if __name__ == "__main__":
    sys.exit(main())
