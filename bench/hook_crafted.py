#!/usr/bin/env python3
"""Worst-case time of the libvirt hook on a crafted definition, against a plain one of the same size.

libvirt waits for the hook with no timeout: whoever may define a domain decides how long a guest start
(and a libvirtd worker) waits. Each shape below is a definition libvirt accepts and keeps, built to make
one part of the evaluation expensive (the DOCTYPE check, the tree, the text the decision reads, the rules'
loops over children). The plain baseline is a domain with as many ordinary disks as fit in the same size.

The hook is installed into a temporary hooks directory exactly as `virtxml-cpu hook install` and the .deb
install it, decision digest on (kept in the temporary directory), and run through its shebang as libvirt
runs it: `NAME prepare begin -`, the definition on stdin, libvirt's bare environment. Each run times a
first start (the digest emptied: the key, a full decision, the entry written) and a repeat start (the key
and the entry). Runs are interleaved; medians are reported, with each shape's ratio to the plain
definition in the same run. With --rewrite, `virtxml-cpu rewrite` (what `apply` and `watch` do to each
definition) is timed too.

SCANNERS names, for every module of the package the hook's prepare path imports, the shapes aimed at
what it reads of the definition, or why it reads none of it; tests/unit/xml/test_parse.py checks that it
lists exactly the modules the installed hook imports, so a new module on that path needs its shape here.
"""

from __future__ import annotations

import argparse
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from virtxml_cpu.hook import install as hook_install  # noqa: E402

import os  # noqa: E402
import shutil  # noqa: E402

ENV = {"LC_ALL": "C", "PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "HOME": "/root",
       "USER": "root", "LOGNAME": "root"}  # all libvirt passes a hook (virCommandAddEnvPassCommon)
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
        "commandline -global of many dots": QEMU_DOMAIN + cpu + b"<devices/><qemu:commandline><qemu:arg value='-global'/>"
        + b"<qemu:arg value='a" + _fill(size // 2, b".", base // 2) + b"'/><qemu:arg value='-overcommit'/><qemu:arg value='"
        + _fill(size // 2, b"cpu-pm=of,", base // 2) + b"'/></qemu:commandline></domain>",
        "commandline -overcommit of many parameters": QEMU_DOMAIN + cpu + b"<devices/><qemu:commandline>"
        + b"<qemu:arg value='-overcommit'/><qemu:arg value='" + _fill(size, b"cpu-pm=on,nocpu-pm,", base)
        + b"cpu-pm'/></qemu:commandline></domain>",
        "commandline -machine of many irqchips": QEMU_DOMAIN + cpu + b"<devices/><qemu:commandline>"
        + b"<qemu:arg value='-machine'/><qemu:arg value='" + _fill(size, b",,,,kernel_irqchip=on,", base)
        + b"'/></qemu:commandline></domain>",
        "commandline -machine of one long comma run": QEMU_DOMAIN + cpu + b"<devices/><qemu:commandline>"
        + b"<qemu:arg value='-machine'/><qemu:arg value='kernel_irqchip" + _fill(size, b",,", base)
        + b"kernel_irqchip=on'/></qemu:commandline></domain>",
        "commandline of many -overcommit": QEMU_DOMAIN + cpu + b"<devices/><qemu:commandline>"
        + _fill(size, b"<qemu:arg value='-overcommit'/><qemu:arg value='mem-lock=off,cpu-pm=yes'/>", base)
        + b"</qemu:commandline></domain>",
        # the decision digest's key (canonical(): libvirt's per-start values dropped)
        "CDATA of <seclabel> openers, type='dynamic'": meta(b"<seclabel>", b"<![CDATA[type='dynamic'", b"]]>"),
        "CDATA of <seclabel> openers, one closer": meta(b"<seclabel>", b"<![CDATA[type='dynamic'", b"</seclabel>]]>"),
        "CDATA of dynamic openers of one empty <seclabel/>": meta(b"<seclabel type='dynamic' ", b"<![CDATA[",
                                                                  b"/></seclabel>]]>"),
        "CDATA of <label> openers in a dynamic <seclabel>": meta(b"<label>", b"<![CDATA[<seclabel type='dynamic'>",
                                                                b"</label></seclabel>]]>"),
        "CDATA of <label> texts holding '<'": meta(b"<label><", b"<![CDATA[<seclabel type='dynamic'>",
                                                   b"</label></seclabel>]]>"),
        "dynamic <seclabel> with a 4 MiB label": HEAD.replace(b"<domain type='kvm'>", b"<domain type='kvm' id='7'>")
        + cpu + b"<devices><emulator>/usr/bin/qemu-system-x86_64</emulator></devices>"
        b"<seclabel type='dynamic' model='selinux' relabel='yes'><label>" + _fill(size, b"s0:c1,c2", base)
        + b"</label><imagelabel>x</imagelabel></seclabel></domain>",
        "root tag of long attributes": HEAD.replace(b"<domain type='kvm'>", b"<domain type='kvm' "
                                                    + b" ".join(b"a%02d='%s'" % (i, b"1" * ((size - base) // 64))
                                                                for i in range(63)) + b">") + cpu + DEVICES,
        # what the readers of the tree look at
        "cpuset of distinct ranges": HEAD.replace(b"<vcpu placement='static'>", b"<vcpu placement='static' cpuset='"
                                                  + b",".join(b"%d-%d" % (i % 1000, i % 1000 + i // 1000)
                                                              for i in range((size - base) // 9)) + b"'>") + cpu + DEVICES,
        "libosinfo id of the whole size": HEAD + cpu + b"<metadata><libosinfo:libosinfo "
        b"xmlns:libosinfo='http://libosinfo.org/xmlns/libvirt/domain/1.0'><libosinfo:os id='http://redhat.com/rhel/"
        + _fill(size, b"7.", base) + b"3'/></libosinfo:libosinfo></metadata>" + DEVICES,
        "metadata children in orchestrators' namespaces": meta(b"<n:i xmlns:n='http://openstack.org/xmlns/libvirt/nov'/>"),
        "machine name of the whole size": HEAD.replace(b"machine='pc-q35-7.2'", b"machine='pc-q35-rhel"
                                                       + _fill(size, b"7.", base) + b"'") + cpu + DEVICES,
        "CPU model name of the whole size": HEAD + b"<cpu mode='custom'><model>" + _fill(size, b"Skylake-", base)
        + b"</model></cpu>" + DEVICES,
        "emulator path of the whole size": HEAD + cpu + b"<devices><emulator>/usr/bin/" + _fill(size, b"q/", base)
        + b"</emulator></devices></domain>",
        "uuid of the whole size": HEAD.replace(b"0b7e2d1c-6a51-4f0e-8d7b-3c2f9e1a4b66", _fill(size, b"0b7e2d1c-", base))
        + cpu + DEVICES,
        "features children": HEAD + cpu + b"<features>" + _fill(size, b"<kvm><hidden state='on'/></kvm>", base)
        + b"</features>" + DEVICES,
        "XML declaration padded with blanks": b"<?xml version='1.0'" + _fill(size, b" ", len(HEAD) + 400)
        + b"encoding='UTF-8'?>" + HEAD + cpu + DEVICES,
        # libxml2 before 2.12 looks each element's and prefixed attribute's namespace up through every
        # declaration in scope (limits.MAX_NAMESPACES_IN_SCOPE)
        **namespace_shapes(size, meta),
    }


def _declarations(count: int, stem: bytes = b"n") -> bytes:
    return b"".join(b" xmlns:%s%d='urn:%s%d'" % (stem, j, stem, j) for j in range(count))


def namespace_shapes(size: int, meta) -> dict[str, bytes]:
    """Nested declarations (refused past the bound), and the worst cases of the scan that counts them (more
    `xmlns` than the bound, in comments and values, then what costs the scan a step)."""
    stack = b"".join(b"<m:a%s>" % _declarations(255, b"n%d_" % level) for level in range(250))
    unstack = b"</m:a>" * 250
    bound = 64  # limits.MAX_NAMESPACES_IN_SCOPE, written out: the bench runs on the package as it was too
    past = b"<!--" + b" xmlns" * bound + b"-->"  # the scan runs: more `xmlns` than the bound
    prefixed = b"<m:y" + b"".join(b" n0_%d:a='1'" % j for j in range(8)) + b"/>"
    return {
        "namespace stack: 250 levels of 255 declarations": meta(b"<m:y/>", stack, unstack),
        "namespace stack, prefixed attributes": meta(prefixed, stack, unstack),
        "xmlns in every attribute value": meta(b"<m:y a='xmlns:a=1' b=\"x>xmlns\"/>"),
        "sibling declarations past the bound, then tiny elements": meta(
            b"<m:y></m:y>", b"".join(b"<m:d xmlns:n='urn:n'/>" for _ in range(bound + 1))),
        "nesting at libxml2's depth limit, the scan run": meta(b"<a>" * 250 + b"</a>" * 250, past),
        "two-level elements, the scan run": meta(b"<a><b/></a>", past),
        "metadata children, the scan run": meta(b"<m:y/>", past),
    }


# Every module the hook's prepare path imports (tests/unit/xml/test_parse.py compares with the installed hook's
# import list): the shapes aimed at what it reads of the definition, or why it reads none of it.
XMLIO = ("CDATA '<!doctype <!--<!--...'", "CDATA sections in <name>", "comments in metadata",
         "nesting at libxml2's depth limit", "metadata children", "one element, many attributes",
         "XML declaration padded with blanks", "namespace stack: 250 levels of 255 declarations",
         "namespace stack, prefixed attributes", "xmlns in every attribute value",
         "sibling declarations past the bound, then tiny elements", "nesting at libxml2's depth limit, the scan run",
         "two-level elements, the scan run", "metadata children, the scan run")
DIGEST = ("CDATA of <seclabel> openers, type='dynamic'", "CDATA of <seclabel> openers, one closer",
          "CDATA of dynamic openers of one empty <seclabel/>",
          "CDATA of <label> openers in a dynamic <seclabel>", "CDATA of <label> texts holding '<'",
          "dynamic <seclabel> with a 4 MiB label", "root tag of long attributes")
NO_DEFINITION = "reads nothing of the definition"
SCANNERS: dict[str, tuple[str, ...] | str] = {
    "virtxml_cpu": NO_DEFINITION + " (the version)",
    "virtxml_cpu.constants": NO_DEFINITION + " (the tool's own fixed facts: the default style)",
    "virtxml_cpu.core": NO_DEFINITION + " (an empty package: a layer's folder)",
    "virtxml_cpu.fs": NO_DEFINITION + " (an empty package: a layer's folder)",
    "virtxml_cpu.hook": NO_DEFINITION + " (an empty package: a layer's folder)",
    "virtxml_cpu.host": NO_DEFINITION + " (an empty package: a layer's folder)",
    "virtxml_cpu.tables": NO_DEFINITION + " (an empty package: a layer's folder)",
    "virtxml_cpu.tables.builds": NO_DEFINITION + " (an empty package: a layer's folder)",
    "virtxml_cpu.xml": NO_DEFINITION + " (an empty package: a layer's folder)",
    "virtxml_cpu.hook.import_guard": NO_DEFINITION + " (checks the files of the modules the front imports)",
    "virtxml_cpu.hook.entry": "reads the definition's bytes (bounded) and hands them on",
    "virtxml_cpu.hook.digest_key": DIGEST,
    "virtxml_cpu.hook.digest": NO_DEFINITION + " (the entry named by the key)",
    "virtxml_cpu.xml.parse": XMLIO,
    "virtxml_cpu.xml.limits": XMLIO,
    "virtxml_cpu.core.pipeline": XMLIO,  # read(): the parse and the facts, nothing of its own
    "virtxml_cpu.core.domain": ("cpu features", "features children", "uuid of the whole size", "qemu:commandline args",
                           "commandline -global of many dots", "commandline -machine of many irqchips",
                           "commandline -machine of one long comma run", "libosinfo id of the whole size",
                           "metadata children in orchestrators' namespaces", "emulator path of the whole size"),
    "virtxml_cpu.core.rows": ("cpu features", "features children", "vcpupins on every host CPU"),
    "virtxml_cpu.tables.lazyre": ("uuid of the whole size", "XML declaration padded with blanks", "cpuset of full ranges",
                           "cpuset of distinct ranges", "libosinfo id of the whole size",
                           "machine name of the whole size", "commandline -global of many dots"),
    "virtxml_cpu.core.cpuset": ("cpuset of full ranges", "cpuset of distinct ranges", "vcpupins on every host CPU"),
    "virtxml_cpu.core.placement": ("cpuset of full ranges", "vcpupins on every host CPU"),
    "virtxml_cpu.core.resolve": ("commandline -cpu of many properties", "qemu:commandline args", "features children",
                           "CPU model name of the whole size"),
    "virtxml_cpu.core.cpu_option": ("commandline -cpu of many properties", "qemu:commandline args",
                                    "commandline -global of many dots"),
    "virtxml_cpu.core.property_steps": ("cpu features", "CPU model name of the whole size",
                                        "commandline -global of many dots", "commandline of many -overcommit"),
    "virtxml_cpu.core.libvirt_cpu": ("cpu features", "features children", "commandline -cpu of many properties",
                                     "commandline -global of many dots"),
    "virtxml_cpu.core.merge": ("machine name of the whole size",),
    "virtxml_cpu.core.support": NO_DEFINITION + " (launchSecurity's type, a table key)",
    "virtxml_cpu.core.answer": NO_DEFINITION + " (the answer's named tuples)",
    "virtxml_cpu.core.commandline": ("qemu:commandline args", "commandline -global of many dots",
                                     "commandline -machine of many irqchips",
                                     "commandline -machine of one long comma run", "commandline of many -overcommit"),
    "virtxml_cpu.tables.qemu_commandline": NO_DEFINITION + " (the <qemu:commandline> options' rows)",
    "virtxml_cpu.host.kvm": NO_DEFINITION + " (/dev/kvm, a fixed path)",
    "virtxml_cpu.tables.libvirt_xml": ("cpu features", "features children"),
    "virtxml_cpu.core.decision": ("cpu features", "libosinfo id of the whole size", "vcpupins on every host CPU"),
    "virtxml_cpu.tables.guest_os": ("libosinfo id of the whole size",),
    "virtxml_cpu.tables.orchestrators": ("metadata children in orchestrators' namespaces",),
    "virtxml_cpu.core.machines": ("machine name of the whole size",),
    "virtxml_cpu.core.lifecycle": ("machine name of the whole size",),
    "virtxml_cpu.tables.builds.known": ("machine name of the whole size",),
    "virtxml_cpu.tables.builds.model": ("machine name of the whole size",),
    "virtxml_cpu.tables.builds.rhel": ("machine name of the whole size",),
    "virtxml_cpu.tables.builds.ubuntu": ("machine name of the whole size",),
    "virtxml_cpu.tables.builds.upstream": ("machine name of the whole size",),
    "virtxml_cpu.core.overcommit": ("commandline -overcommit of many parameters", "commandline of many -overcommit",
                               "commandline -global of many dots"),
    "virtxml_cpu.tables.cpu_models": ("CPU model name of the whole size",),
    "virtxml_cpu.host.caps_cache": ("emulator path of the whole size",),
    "virtxml_cpu.host.sources": ("emulator path of the whole size",),
    "virtxml_cpu.hook.evaluate": ("emulator path of the whole size",),  # dependencies(): the emulator's cache file
    "virtxml_cpu.hook.act": ("CDATA sections in <name>", "uuid of the whole size"),  # the log line, the spool
    "virtxml_cpu.hook.incoming": ("uuid of the whole size",),  # the restore/migration mark, named by the UUID
    "virtxml_cpu.hook.logline": ("CDATA sections in <name>",),
    "virtxml_cpu.core.memo": ("cpu features", "qemu:commandline args"),  # keys made of the facts
    "virtxml_cpu.tables.properties": NO_DEFINITION + " (the property table)",
    "virtxml_cpu.tables.qemu": NO_DEFINITION + " (QEMU's fixed facts)",
    "virtxml_cpu.core.hostfacts": NO_DEFINITION + " (the host's facts)",
    "virtxml_cpu.core.precedence": NO_DEFINITION + " (settles the sources' claims)",
    "virtxml_cpu.core.config": NO_DEFINITION + " (the config file)",
    "virtxml_cpu.core.toml_check": NO_DEFINITION + " (the config file's grammar)",
    "virtxml_cpu.core.toml_read": NO_DEFINITION + " (reads the config file's TOML)",
    "virtxml_cpu.core.toml_strings": NO_DEFINITION + " (the config file's strings)",
    "virtxml_cpu.tables.version": ("machine name of the whole size",),  # a machine name's X.Y[.Z]
    "virtxml_cpu.errors": NO_DEFINITION + " (exception classes)",
    "virtxml_cpu.fs.trusted": NO_DEFINITION + " (opens files by fixed paths)",
    "virtxml_cpu.fs.atomic": NO_DEFINITION + " (writes the digest's entry)",
    "virtxml_cpu.fs.temps": NO_DEFINITION + " (names and clears the atomic writer's temporary files)",
}


CPU: dict[str, list[float]] = {}  # each shape's first starts in CPU seconds (user + system of the hook and its children)


def timed(cmd: list[str], stdin: bytes, expect: bytes, where: str, refuse: bytes = b"") -> float:
    """The wall time of one run; its CPU time goes to CPU[where], which a busy machine moves far less."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.perf_counter()
    r = subprocess.run(cmd, input=stdin, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=ENV, check=False,
                       cwd="/")
    took = time.perf_counter() - t
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    CPU.setdefault(where, []).append(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
    if not (expect in r.stderr if expect else r.returncode == 0) or (refuse and refuse in r.stderr):
        raise SystemExit(f"{where}: not evaluated as expected (exit {r.returncode}): {r.stderr[-300:]!r}")
    return took


def install(tmp: str) -> tuple[list[str], str]:
    """The hook as `hook install` puts it (digest on: a store in `tmp`), and that store."""
    cfg = Path(tmp) / "config.toml"
    cfg.write_text(f'[hook]\nmode = "audit"\nsyslog_socket = "{tmp}/none.sock"\n')  # no syslog: stderr
    digests = f"{tmp}/decisions"
    hook_install.install(f"{tmp}/hooks", "audit", str(cfg), legacy=False, digest_dir=digests)
    return [f"{tmp}/hooks/qemu.d/virtxml-cpu", "big", "prepare", "begin", "-"], digests


# Shapes the hook refuses before parsing (one line, the guest started unchecked), and the words it says.
REFUSED = {"one element, many attributes": b"256 or more attributes",
           "namespace stack: 250 levels of 255 declarations": b"namespace declarations in scope",
           "namespace stack, prefixed attributes": b"namespace declarations in scope"}


def starts(hook: list[str], digests: str, doc: bytes, where: str) -> tuple[float, float]:
    """(first start, repeat start) of `doc`: decided in full and kept, then answered from the digest (a
    decision whose entry would exceed digest.MAX_ENTRY_BYTES, a 4 MiB name in it, is decided again)."""
    shutil.rmtree(digests, ignore_errors=True)
    said = REFUSED.get(where, b" decision=")
    first = timed(hook, doc, said, where, refuse=b"cached=yes")
    again = timed(hook, doc, said, where + " (repeat)")
    return first, again


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-n", "--runs", type=int, default=5)
    ap.add_argument("--mib", type=float, default=4.0, help="definition size in MiB (default 4: libvirt's limit)")
    ap.add_argument("--rewrite", action="store_true", help="also time `virtxml-cpu rewrite` on each")
    ap.add_argument("--only", metavar="WORD", action="append",
                    help="only the shapes whose name holds WORD (repeatable), and the plain one")
    ap.add_argument("--json", action="store_true", help="print the medians as one JSON object")
    args = ap.parse_args()
    docs = {k: v for k, v in shapes(int(args.mib * 1024 * 1024)).items()
            if not args.only or k == "plain (disks)" or any(w in k for w in args.only)}
    rewrite = [sys.executable, "-m", "virtxml_cpu", "rewrite", "--no-host-probe", "--qemu-build", "upstream", "-"]
    samples: dict[tuple[str, str], list[float]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        hook, digests = install(tmp)
        for _ in range(args.runs):
            for k, doc in docs.items():
                first, again = starts(hook, digests, doc, k)
                samples.setdefault(("first start", k), []).append(first)
                samples.setdefault(("repeat start", k), []).append(again)
                if args.rewrite:
                    samples.setdefault(("rewrite", k), []).append(timed(rewrite, doc, b"", "rewrite " + k))
    print(f"{args.mib:g} MiB definitions, median of {args.runs} runs, interpreter {sys.executable}, "
          f"{os.cpu_count()} CPUs, load {os.getloadavg()[0]:.2f}")
    whats = ("first start", "repeat start", "rewrite") if args.rewrite else ("first start", "repeat start")
    med = {key: statistics.median(v) for key, v in samples.items()}
    if args.json:
        import json

        from lxml import etree

        print(json.dumps({"python": sys.version.split()[0], "libxml2": ".".join(map(str, etree.LIBXML_VERSION)),
                          "lxml": ".".join(map(str, etree.LXML_VERSION)), "runs": args.runs,
                          "best": {f"{w}|{k}": min(v) for (w, k), v in samples.items()},
                          "best_cpu_first_start": {k: min(v) for k, v in CPU.items() if k in docs},
                          "median": {f"{w}|{k}": t for (w, k), t in med.items()}}))
        return
    plain = {what: med[(what, "plain (disks)")] for what in whats}
    print(f"\n| {'shape':<48} | {'bytes':>9} | " + " | ".join(f"{w} (s) | / plain" for w in whats) + " |")
    print("|---|---|" + "---|---|" * len(whats))
    for k in docs:
        cells = " | ".join(f"{med[(w, k)]:.3f} | {med[(w, k)] / plain[w]:.2f}x" for w in whats)
        print(f"| {k:<48} | {len(docs[k]):>9} | {cells} |")
    for what in whats:
        worst = max((k for k in docs if k != "plain (disks)"), key=lambda k: med[(what, k)])
        print(f"{what}: worst case {worst!r}: {med[(what, worst)]:.3f} s = "
              f"{med[(what, worst)] / plain[what]:.2f}x the plain definition")


if __name__ == "__main__":
    main()
