"""Rewriting: the elements to add for a decision, placed where libvirt itself puts them."""

from __future__ import annotations

import copy

from lxml import etree

from .errors import BadInput
from .xmlio import Insertion, apply_insertions, parse_domain, same_tree

# Children of <features> that libvirt formats after <pvspinlock> (virDomainFeature order).
_AFTER_PVSPINLOCK = frozenset({
    "capabilities", "pmu", "vmport", "gic", "smm", "ioapic", "hpt", "htm", "nested-hv", "msrs",
    "ccf-assist", "xen", "cfpc", "sbbc", "ibs", "tcg", "async-teardown", "ras", "ps2", "aia",
})
# Top-level elements libvirt formats after <features> / after <cpu>.
_AFTER_FEATURES = ("cpu", "clock", "on_poweroff", "on_reboot", "on_crash", "on_lockfailure", "pm", "perf",
                   "devices")
_AFTER_CPU = _AFTER_FEATURES[1:]
_AFTER_CPU_FEATURE = frozenset({"numa", "cache", "maxphysaddr"})


def _element(tag: str, **attrs: str) -> etree._Element:
    el = etree.Element(tag)
    for k, v in attrs.items():
        el.set(k.replace("_", "-"), v)
    return el


def _index_before(parent: etree._Element, tags) -> int | None:
    for i, child in enumerate(parent):
        if isinstance(child.tag, str) and child.tag in tags:
            return i
    return None


def _top_level_index(root: etree._Element, after: str, before: tuple[str, ...]) -> int | None:
    anchor = root.find(after)
    if anchor is not None:
        return root.index(anchor) + 1
    return _index_before(root, before)


def plan(root: etree._Element, style: str) -> list[Insertion]:
    """Insertions that turn kvm-pv-unhalt on, in the given style (pure)."""
    if style == "pvspinlock":
        pv = _element("pvspinlock", state="on")
        features = root.find("features")
        if features is not None:
            return [Insertion(features, pv, _index_before(features, _AFTER_PVSPINLOCK))]
        wrapper = _element("features")
        wrapper.append(pv)
        return [Insertion(root, wrapper, _top_level_index(root, "os", _AFTER_FEATURES))]
    feature = _element("feature", policy="require", name="kvm_pv_unhalt")
    cpu = root.find("cpu")
    if cpu is not None:
        feats = cpu.findall("feature")
        index = cpu.index(feats[-1]) + 1 if feats else _index_before(cpu, _AFTER_CPU_FEATURE)
        return [Insertion(cpu, feature, index)]
    wrapper = _element("cpu")
    wrapper.append(feature)
    anchor = "features" if root.find("features") is not None else "os"
    return [Insertion(root, wrapper, _top_level_index(root, anchor, _AFTER_CPU))]


def render(source: bytes, tree: etree._ElementTree, insertions: list[Insertion]) -> bytes:
    """Apply insertions to the source text; verify the result is the intended tree."""
    if not insertions:
        return source
    text = source.decode("utf-8")
    out = apply_insertions(text, tree.getroot(), insertions).encode("utf-8")
    expected = copy.deepcopy(tree.getroot())
    # Replay the insertions on a copy of the tree, mapping parents by path.
    src_root = tree.getroot()
    for ins in insertions:
        path = src_root.getroottree().getpath(ins.parent)
        parent = expected if path == "/domain" else expected.xpath(path)[0]
        new = copy.deepcopy(ins.new)
        if ins.index is None:
            parent.append(new)
        else:
            parent.insert(ins.index, new)
    if not same_tree(parse_domain(out, "rewritten XML").getroot(), expected):
        raise BadInput("internal check failed: the rewritten XML is not the intended tree; nothing was changed")
    return out
