"""One domain document in, one Decided out: parse -> facts -> resolution -> decision -> rewritten bytes.

The one memo (MEMO) lives here, keyed by value: a resolution by the domain's facts but its name and uuid
(the only facts that differ between clones of one template) and the host's facts; a decision by those and
the policy and style, in the resolution's entry; what a shell made of a renderer's parts that clones share
(shared_part), by what they render. Resolution and policy stay pure, and renderers never touch the memo: the
shell that drives them keeps their parts here.
"""

from __future__ import annotations

from collections import namedtuple
from operator import itemgetter

from lxml import etree

from . import decision, domain, precedence, resolve
from .config import Config
from .hostfacts import HostFacts
from .memo import Memo, frozen
from ..xml.parse import parse_domain, parse_domain_lean

MEMO = Memo()


class Document(namedtuple("Document", "label source facts tree")):
    """A domain document read: its bytes, its facts, and its tree when it is to be rewritten."""

    __slots__ = ()  # a plain named tuple: its fields, annotated below for readers

    label: str
    source: bytes
    facts: domain.DomainFacts
    tree: etree._ElementTree | None  # None: read only for deciding (a lean parse)


class Decided(namedtuple("Decided", "label resolution decision policy_source style source output key",
                         defaults=((),))):
    """A document decided: its resolution and decision, and its rewritten bytes when it was read to be."""

    __slots__ = ()  # a plain named tuple: its fields, annotated below for readers
    label: str
    resolution: resolve.Resolution
    decision: decision.Decision
    policy_source: str
    style: str
    source: bytes
    output: bytes | None  # None when not rendered (explain, --check, audit, the hook)
    key: tuple  # what decides the resolution (resolution_key), the memo's key for what it shares

    @property
    def changed(self) -> bool:
        """Whether the rewrite changes the document (decided without rendering when it was not rendered)."""
        return self.decision.action == "inject" if self.output is None else self.output != self.source


def host_key(host: HostFacts) -> tuple:
    """The host's facts as a hashable value: themselves when assembled (hostfacts.combine freezes their
    mappings), else with their mappings frozen."""
    if dict not in (type(host.cpuid), type(host.aliases), type(host.descriptions)):
        return host
    return tuple(map(frozen, host))  # built by hand with plain dicts


assert resolve.Resolution._fields[0] == "facts"  # decided() swaps a clone's facts in by position

IDENTITY = ("name", "uuid")  # the only facts that differ between clones of one template; decide nothing
_DECIDING = itemgetter(*(i for i, f in enumerate(domain.DomainFacts._fields) if f not in IDENTITY))


ITEM_BYTES = 1024  # what kept answers hold per item of a document's fact sequences (one <cpu><feature>: ~0.8 KiB)


def kept_cost(facts: domain.DomainFacts, source: bytes) -> int:
    """What the memo is charged for the answers about one document: its size, and ITEM_BYTES per item of the
    sequences its facts hold (features, settings, placement, -global, -overcommit), which a key holds as
    Python objects: 25,000 `<cpu><feature>`s in 1 MiB are about 4 MiB of them, and charged by size alone, a
    long-lived `watch` kept 40 such definitions' worth."""
    q = facts.qemu
    items = (len(facts.cpu_features) + len(facts.settings) + len(facts.placement) + len(q.globals)
             + len(q.overcommit))
    return len(source) + ITEM_BYTES * items


def resolution_key(facts: domain.DomainFacts, host: HostFacts) -> tuple:
    """Everything resolve.resolve reads: the domain's facts but its name and uuid (by field name), and the
    host's facts."""
    return _DECIDING(facts), host_key(host)


def read(data: bytes, label: str, render: bool = True) -> Document:
    """`render=False` reads for deciding only (explain, --check, audit, the hook): a lean parse that drops
    what no decision reads, and no tree to rewrite."""
    tree = parse_domain(data, label) if render else None
    facts = domain.extract(tree.getroot() if tree is not None else parse_domain_lean(data, label))
    return Document(label, data, facts, tree)


def decided(doc: Document, host: HostFacts, config: Config, cli_policy: str | None = None,
            cli_style: str | None = None) -> Decided:
    """The outcome for a document read, under `host`; rewritten bytes when it was read with its tree."""
    facts = doc.facts
    key = ("resolution", resolution_key(facts, host))
    # One entry per key: the resolution, its decisions by policy and style (a handful), and the key itself,
    # which holds every deciding fact: it is hashed and compared once per document, and the outcome carries
    # the entry's own key (its hash worked out once), which a shell's lookups (shared_part) then find by
    # identity. What an entry is charged is worked out only when one is made.
    entry = MEMO.find(key)
    if entry is None:
        entry = MEMO.get(key, lambda: (resolve.resolve(facts, host), {}, frozen(key[1])), kept_cost(facts, doc.source))
    resolution, decisions, key = entry
    if resolution.facts is not facts:  # a clone's: the same but for name and uuid
        resolution = resolution._make((facts, *resolution[1:]))  # _replace(facts=facts) without its kwargs
    chosen, source = precedence.policy(facts.override_policy, cli_policy, config.policy)
    style = precedence.style(cli_style, config.style).value
    if chosen not in decision.POLICIES:  # the domain's metadata names no policy
        made = decision.invalid_exemption(chosen)
    else:
        made = decisions.get((chosen, style))
        if made is None:
            made = decisions[chosen, style] = decision.decide(resolution, chosen, style)
    if doc.tree is None:
        return Decided(doc.label, resolution, made, source, style, doc.source, None, key)
    from ..xml import insert  # here: deciding alone (the hook, audit, explain) never renders

    insertions = insert.plan(doc.tree.getroot(), style) if made.action == "inject" else []
    return Decided(doc.label, resolution, made, source, style, doc.source,
                   insert.render(doc.source, doc.tree, insertions), key)


SHARED_PARTS = ("resolution", "decision")  # what of a Decided a shell may have rendered once for its clones


def shared_part(o: Decided, part: str, kind: str, make):
    """`make(o)` (a renderer's), kept once for every Decided that shares `part` of `o` (SHARED_PARTS): the
    resolution by its key, the decision by the decision itself, its policy's source and the style. `kind`
    names what is made of it. A Decided not built by decided() shares nothing: made afresh."""
    if not o.key:
        return make(o)
    key = (kind, part, o.key if part == "resolution" else (o.decision, o.policy_source, o.style))
    kept = MEMO.find(key)
    return kept if kept is not None else MEMO.get(key, lambda: make(o), kept_cost(o.resolution.facts, o.source))


def process(data: bytes, label: str, host: HostFacts, config: Config, cli_policy: str | None = None,
            cli_style: str | None = None, render: bool = True) -> Decided:
    """read() then decided(): `render=False` decides without producing the rewritten bytes."""
    return decided(read(data, label, render), host, config, cli_policy, cli_style)

