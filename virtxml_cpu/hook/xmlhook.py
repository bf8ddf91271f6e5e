"""The edit an orchestrator's own XML hook makes (VDSM's before_vm_start, KubeVirt's onDefineDomain): the
domain XML the orchestrator is about to hand libvirt, with kvm-pv-unhalt added where the rules say so.

It decides as the libvirt qemu hook does (the same config file, read the same way, nothing in the
environment steering it; host facts from the same sources: hook/evaluate.py `hook_host_facts`, which reads
libvirt's capabilities cache and /dev/kvm and executes nothing) and inserts as `virtxml-cpu rewrite` does
(core/pipeline.py `process` -> xml/insert.py: byte-preserving, checked by reparsing). Unlike the libvirt
hook it changes the XML: here the orchestrator asks for the document back, before libvirt sees it.

It never fails: a document it cannot parse, a config it cannot use, any error of its own gives the bytes
back as they came, with one line saying why. An orchestrator refuses to start a guest whose hook fails
(docs/xml-hooks.md), and a missing spinlock bit is not worth a guest that does not start.
"""

from __future__ import annotations

from collections import namedtuple

PASSED_THROUGH = "domain XML passed through unchanged"


class Edit(namedtuple("Edit", "output changed line")):
    """What a hook hands back: the bytes, whether they differ from what came in, one line for its log."""

    __slots__ = ()  # a plain named tuple: its fields, annotated below for readers

    output: bytes
    changed: bool
    line: str


def edit(data: bytes, label: str, config_path: str | None = None) -> Edit:
    """`data` with kvm-pv-unhalt added where the config's policy (or the domain's own exemption in its
    <metadata>) says so, exactly as `virtxml-cpu rewrite` adds it; `label` names the guest in the line.
    Never raises: on any error, `data` itself and the reason."""
    try:
        return _edit(data, label, config_path)
    except Exception as e:  # noqa: BLE001 - never fail the orchestrator's start for our own error
        from ..errors import failure

        why = failure(e)
        return Edit(data, False, one_line(f"{why if why.startswith(label) else f'{label}: {why}'}; {PASSED_THROUGH}"))


def _edit(data: bytes, label: str, config_path: str | None) -> Edit:
    from ..core import config
    from ..core.pipeline import decided, read
    from .evaluate import hook_host_facts

    cfg = config.from_raw(config.read_raw(config_path, environ={}), config_path, environ={})
    doc = read(data, label)
    o = decided(doc, hook_host_facts(doc.facts, cfg), cfg)
    d = o.decision
    if o.changed:
        return Edit(o.output, True, one_line(f"{label}: added kvm-pv-unhalt ({d.rule})"))
    return Edit(data, False, one_line(f"{label}: unchanged ({d.rule}): {d.reason}"))


def one_line(text: str) -> str:
    """`text` as one printable line: a line break or control character from a document or an error
    (a domain name) cannot start a second log line."""
    from ..errors import shown

    return shown(" ".join(text.splitlines()))
