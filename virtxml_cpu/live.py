"""`virtxml-cpu apply`: fix persistent definitions through libvirt (never the running guest).

Reads each definition with INACTIVE|SECURE (secrets survive), rewrites it with the same pipeline as
files, re-reads it just before defining (no lost updates) and defines it again with the same uuid.
"""

from __future__ import annotations

import glob
import json
import os
import sys
from dataclasses import dataclass
from .config import Config
from .errors import EnvironmentProblem
from .libvirt_conn import _libvirt, connection_host_facts, open_connection, open_for_reading
from .pipeline import process
from .report import unified_diff


def pending_entries(spool: str) -> list[tuple[str, dict]]:
    out = []
    for path in sorted(glob.glob(os.path.join(spool, "*.json"))):
        try:
            with open(path, encoding="utf-8") as fh:
                out.append((path, json.load(fh)))
        except (OSError, ValueError) as e:
            print(f"virtxml-cpu: skipping unreadable spool entry {path}: {e}", file=sys.stderr)
    return out


@dataclass
class ApplyResult:
    changed: int = 0
    would_change: int = 0
    skipped: int = 0
    unchanged: int = 0
    errors: int = 0


def apply(uri: str, names: list[str], all_domains: bool, pending: bool, cfg: Config, policy: str | None,
          style: str | None, dry_run: bool, diff: bool, yes: bool, probe: bool = True, out=sys.stdout,
          confirm=None) -> ApplyResult:
    libvirt = _libvirt()
    conn = open_for_reading(uri) if dry_run or diff else open_connection(uri, read_only=False)
    res = ApplyResult()
    spool_of: dict[str, str] = {}
    try:
        host = connection_host_facts(conn, uri, probe, cfg.qemu_flavour)
        if pending:
            targets = []
            for path, entry in pending_entries(cfg.spool):
                spool_of[entry.get("uuid", "")] = path
                targets.append(("uuid", entry.get("uuid", "")))
        elif all_domains:
            targets = [("dom", d) for d in conn.listAllDomains()]
        else:
            targets = [("name", n) for n in names]
        for kind, ref in targets:
            try:
                dom = ref if kind == "dom" else (conn.lookupByUUIDString(ref) if kind == "uuid"
                                                 else conn.lookupByName(ref))
            except libvirt.libvirtError as e:
                if kind == "uuid":  # the queued domain is gone: nothing left to fix
                    _drop(spool_of.get(ref))
                    print(f"{ref}: no such domain any more; spool entry removed", file=out)
                else:
                    print(f"virtxml-cpu: {ref}: {e.get_error_message()}", file=sys.stderr)
                    res.errors += 1
                continue
            _apply_one(libvirt, conn, dom, host, cfg, policy, style, dry_run, diff, yes, out, res, confirm,
                       spool_of.get(dom.UUIDString()))
    finally:
        conn.close()
    return res


def _drop(path: str | None) -> None:
    if path:
        try:
            os.unlink(path)
        except FileNotFoundError:
            pass


def _apply_one(libvirt, conn, dom, host, cfg, policy, style, dry_run, diff, yes, out, res, confirm, spool_path):
    name = dom.name()
    if not dom.isPersistent():
        print(f"{name}: skipped: transient domain (no persistent definition to fix)", file=out)
        res.skipped += 1
        return
    flags = libvirt.VIR_DOMAIN_XML_INACTIVE | libvirt.VIR_DOMAIN_XML_SECURE
    xml = dom.XMLDesc(flags).encode()
    o = process(xml, name, host, cfg, policy, style)
    if not o.changed:
        print(f"{name}: unchanged: {o.decision.reason}", file=out)
        res.unchanged += 1
        if not dry_run and not diff:
            _drop(spool_path)
        return
    if diff:
        out.write(unified_diff(o))
    if dry_run or diff:
        print(f"{name}: would add kvm-pv-unhalt: {o.decision.reason}", file=out)
        res.would_change += 1
        return
    if not yes:
        if confirm is None or not confirm(f"{unified_diff(o)}Define '{name}' with this change? [y/N] "):
            print(f"{name}: skipped: not confirmed", file=out)
            res.skipped += 1
            return
    if dom.XMLDesc(flags).encode() != xml:
        print(f"virtxml-cpu: {name}: skipped: its definition changed while we worked; run again", file=sys.stderr)
        res.skipped += 1
        return
    try:
        new = conn.defineXML(o.output.decode())
    except libvirt.libvirtError as e:
        raise EnvironmentProblem(f"{name}: define failed, definition unchanged: {e.get_error_message()}") from None
    assert new.UUIDString() == dom.UUIDString()
    when = "at its next cold boot (the running guest is untouched)" if dom.isActive() else "at its next start"
    print(f"{name}: added kvm-pv-unhalt; takes effect {when}", file=out)
    res.changed += 1
    _drop(spool_path)
