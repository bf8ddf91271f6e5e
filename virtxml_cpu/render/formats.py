"""Audit results -> one output format, by one renderer per format (pure).

A renderer says what to write before any host, after each host as soon as it is done, and at the end.
`emit` drives it over the stream of HostResults into one writer: the shell passes stdout's or a buffer that
becomes the `-o` file, so a stream and a file hold the same bytes for the same results.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from ..live.records import HostResult
from . import jsonlines, prometheus, table


@dataclass(frozen=True)
class Renderer:
    head: Callable[[], str]
    host: Callable[[HostResult], str]  # written as soon as the host is done
    tail: Callable[[list[HostResult], float], str]  # all hosts, and the time the audit finished


RENDERERS = {
    "table": Renderer(table.head, table.host, table.tail),
    "json": Renderer(jsonlines.head, jsonlines.host, jsonlines.tail),
    "prometheus": Renderer(prometheus.head, prometheus.host, prometheus.tail),
}


def emit(renderer: Renderer, results: Iterable[HostResult], write: Callable[[str], None],
         clock: Callable[[], float]) -> list[HostResult]:
    """Render `results` into `write` as they come; returns them all."""
    write(renderer.head())
    hosts = []
    for h in results:
        hosts.append(h)
        write(renderer.host(h))
    write(renderer.tail(hosts, clock()))
    return hosts
