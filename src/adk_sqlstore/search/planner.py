"""The exact BM25 top k of one user's memories in few, small reads: a best-first
branch and bound over which query terms a memory holds and how long it is.

A memory's score is ``f(dl) * S(A)`` (:mod:`.lexical`): ``S(A)`` the summed idf of the
query terms ``A`` it holds, ``f`` a decreasing function of its length ``dl`` (its
number of distinct terms, so ``dl >= |A|``). The memories holding any query term are
split into nodes: a node holds every term of ``held``, none of ``absent`` and maybe
some of the ``undecided`` rest (terms are decided rarest first, so a node is a prefix
of include/exclude choices), and its lengths are in a range of length classes
(:data:`~.text.LENGTH_CLASSES`, which the index tokens carry: migration 0006). A node's
bound is the best score a memory in it could have, ``max over v of f(max(|held| + v,
shortest length)) * (S(held) + the v largest undecided idfs)``; its expected size comes
from the terms' document frequencies and the number of the user's memories in each
class, as if terms were independent.

Nodes are taken best bound first. A small node is read whole (the memories holding its
held terms, or any undecided one, in its classes, through the full-text index, scored
exactly in SQL: its best k). A big node is split: on its next term where that term is
rare in it, else on its classes (its shortest class apart from the rest). A node whose
bound is below the k-th score found is never read. So the result is the exact top k,
as reading every match would give, and a user's most frequent words cost a few small
index conjunctions among short memories instead of reading the tens of thousands of
memories that hold them: MaxScore (Turtle & Flood, "Query evaluation: strategies and
optimizations", 1995) where rare terms decide, impact-ordered reads (Anh & Moffat,
"Pruned query evaluation using pre-computed impacts", SIGIR 2006) where common ones do.

Reads go to the database in waves, one statement each
(:meth:`.lexical.UserMemories.read`): the best nodes, until they may hold enough
memories to fill the top k.
"""

from __future__ import annotations

import heapq
import itertools
import math
from collections.abc import Awaitable, Callable, Generator, Sequence
from dataclasses import dataclass, field
from typing import cast

from .lexical import BM25_B, BM25_K1, Read, ReadRow, Scored, Term
from .text import LENGTH_CLASSES

__all__ = ["READ_ROWS", "Reader", "rank", "rank_now", "ranking"]

READ_ROWS = 300
"""A node expected to hold at most this many memories is read whole, not split."""
ROUND_TRIP_READS = 3
"""Where each wave is a round trip to a server (PostgreSQL), a node is read whole up to
this many times :data:`READ_ROWS`, and a wave is filled to k memories rather than 2k:
fewer, bigger reads (measured on a 100,000-memory user, 2 vCPUs: p50/p95 11/29 ms
with 300 rows and 2k, 10/26 ms with 1,000 rows and k; on SQLite, in-process, no
difference showed)."""
_MAX_READS = 64  # reads of one search; past it, what is left is read whole
_WAVE_FILL = 2  # a wave holds nodes until they may hold this many times k memories
_SLACK = 1e-9  # above a bound: scores are rounded half up to 1e-9 (lexical.rounded)
_CLASSES = len(LENGTH_CLASSES)

Reader = Callable[[Sequence[Read], int], Awaitable[list[ReadRow]]]
"""A backend's reads of one wave, in one statement (:meth:`.lexical.UserMemories.read`)."""


@dataclass(order=True)
class _Node:
    neg_bound: float
    seq: int
    held: tuple[int, ...] = field(compare=False)
    absent: tuple[int, ...] = field(compare=False)
    next: int = field(compare=False)  # the first undecided term
    classes: tuple[int, int] = field(compare=False)  # first and last class index
    size: float = field(compare=False)  # expected memories


class _Plan:
    """The arithmetic of one search: bounds and expected sizes of nodes."""

    def __init__(
        self, terms: list[Term], n: float, avgdl: float, class_sizes: Sequence[int]
    ) -> None:
        self.terms = terms
        self.n = n
        self.avgdl = avgdl
        self.idf = [t.idf for t in terms]
        self.prefix = [0.0, *itertools.accumulate(self.idf)]
        self.class_sizes = class_sizes
        # The share of the memories of each class holding each term (a memory of length
        # d drawing d / avgdl times as many terms as an average one).
        self.holds = [
            [1 - (1 - min(t.df / n, 1.0)) ** (_typical(c) / avgdl) for c in range(_CLASSES)]
            for t in terms
        ]
        self.seq = itertools.count()

    def weight(self, dl: int) -> float:
        """BM25's length factor ``(k1 + 1) / (1 + k1 * norm(dl))``."""
        return (BM25_K1 + 1) / (1 + BM25_K1 * (1 - BM25_B + BM25_B * dl / self.avgdl))

    def node(
        self, held: tuple[int, ...], absent: tuple[int, ...], nxt: int, classes: tuple[int, int]
    ) -> _Node | None:
        """The node, or None where it provably holds no memory: nothing held and
        nothing undecided, no class with memories as long as its held terms, or a term
        left out that every memory holds. (Its expected size is an estimate: it may be
        0.0 where terms are rare, or underflow, and the node still holds memories.)"""
        m = len(self.terms)
        first, last = classes
        if not held and nxt == m:
            return None
        if not any(self._possible(held, c) for c in range(first, last + 1)):
            return None
        if any(self.terms[i].df >= self.n for i in absent):
            return None
        size = sum(self._cell(held, absent, nxt, c) for c in range(first, last + 1))
        s = sum(self.idf[i] for i in held)
        shortest = LENGTH_CLASSES[classes[0]]
        bound = max(
            self.weight(max(len(held) + v, shortest))
            * (s + self.prefix[nxt + v] - self.prefix[nxt])
            for v in range(0 if held else 1, m - nxt + 1)
        )
        return _Node(-bound, next(self.seq), held, absent, nxt, classes, size)

    def _possible(self, held: tuple[int, ...], c: int) -> bool:
        """Whether class ``c`` holds memories, as long as ``held`` at least."""
        return bool(self.class_sizes[c]) and _longest(c) >= len(held)

    def _cell(self, held: tuple[int, ...], absent: tuple[int, ...], nxt: int, c: int) -> float:
        """The expected memories of class ``c`` holding ``held``, not ``absent``, and
        (with nothing held) some undecided term."""
        if not self._possible(held, c):
            return 0.0
        size: float = self.class_sizes[c] * math.prod(self.holds[i][c] for i in held)
        size *= math.prod(1 - self.holds[i][c] for i in absent)
        if not held:
            size *= 1 - math.prod(1 - self.holds[i][c] for i in range(nxt, len(self.terms)))
        return size

    def children(self, node: _Node) -> list[_Node]:
        """The node split on its next term or on its shortest class: whichever makes
        the smaller child of the parent's bound (the one that will likely be read; the
        other's lower bound may be beaten first)."""
        first, last = node.classes
        t = node.next
        by_term = by_class = None
        if t < len(self.terms):
            by_term = [
                self.node((*node.held, t), node.absent, t + 1, node.classes),
                self.node(node.held, (*node.absent, t), t + 1, node.classes),
            ]
        if first < last:
            by_class = [
                self.node(node.held, node.absent, t, (first, first)),
                self.node(node.held, node.absent, t, (first + 1, last)),
            ]
        pair = by_term or by_class or []
        if by_term and by_class:
            size = [math.inf if c is None else c.size for c in (by_term[0], by_class[0])]
            pair = by_term if size[0] <= size[1] else by_class
        return [c for c in pair if c is not None]

    def read_of(self, node: _Node) -> Read:
        """The read of the whole node: its classes with some memory of the user."""
        first, last = node.classes
        lows = tuple(
            LENGTH_CLASSES[c] for c in range(first, last + 1) if self._possible(node.held, c)
        )
        return Read(node.held, node.absent, lows)

    def splittable(self, node: _Node) -> bool:
        return node.next < len(self.terms) or node.classes[0] < node.classes[1]


def _typical(c: int) -> float:
    """A typical length in class ``c``."""
    return (LENGTH_CLASSES[c] + _longest(c)) / 2 if c + 1 < _CLASSES else LENGTH_CLASSES[c] * 1.5


def _longest(c: int) -> float:
    """The longest length in class ``c``."""
    return LENGTH_CLASSES[c + 1] - 1 if c + 1 < _CLASSES else math.inf


async def rank(
    terms: list[Term],
    n: float,
    avgdl: float,
    class_sizes: Sequence[int],
    limit: int,
    read: Reader,
    *,
    round_trips: bool = False,
) -> list[Scored]:
    """The exact top ``limit`` (score, timestamp, pk), best first, of the memories
    holding any of ``terms`` (rarest first, with their idf), among ``n`` memories of
    mean length ``avgdl`` whose numbers per length class are ``class_sizes``, through
    ``read`` (see the module docstring). ``round_trips``: each call of ``read`` is a
    round trip to a server (see :data:`ROUND_TRIP_READS`)."""
    steps = ranking(terms, n, avgdl, class_sizes, limit, round_trips=round_trips)
    try:
        wave = next(steps)
        while True:
            wave = steps.send(await read(wave, limit))
    except StopIteration as done:
        return cast("list[Scored]", done.value)


def rank_now(
    terms: list[Term],
    n: float,
    avgdl: float,
    class_sizes: Sequence[int],
    limit: int,
    read: Callable[[Sequence[Read], int], list[ReadRow]],
) -> list[Scored]:
    """:func:`rank` with a synchronous ``read`` (SQLite, inside aiosqlite's thread: a
    whole search in one batch)."""
    steps = ranking(terms, n, avgdl, class_sizes, limit)
    try:
        wave = next(steps)
        while True:
            wave = steps.send(read(wave, limit))
    except StopIteration as done:
        return cast("list[Scored]", done.value)


def ranking(
    terms: list[Term],
    n: float,
    avgdl: float,
    class_sizes: Sequence[int],
    limit: int,
    *,
    round_trips: bool = False,
) -> Generator[list[Read], list[ReadRow], list[Scored]]:
    """The search of :func:`rank` without its I/O: yields each wave's reads, is sent
    their rows, and returns the top ``limit``."""
    read_rows = READ_ROWS * ROUND_TRIP_READS if round_trips else READ_ROWS
    fill = 1 if round_trips else _WAVE_FILL
    plan = _Plan(terms, n, avgdl, class_sizes)
    root = plan.node((), (), 0, (0, _CLASSES - 1))
    heap = [root] if root is not None else []
    found: list[Scored] = []
    reads = 0
    while heap:
        wave = _wave(plan, heap, found, limit, read_rows, fill, whole=reads >= _MAX_READS)
        if not wave:
            break
        reads += len(wave)
        found += [(row.score, row.timestamp, row.pk) for row in (yield wave)]
        found.sort(reverse=True)
        del found[limit:]
    return found


def _wave(
    plan: _Plan,
    heap: list[_Node],
    found: list[Scored],
    limit: int,
    read_rows: int,
    fill: float,
    *,
    whole: bool,
) -> list[Read]:
    """The next wave's reads: nodes taken best bound first, those of more than
    ``read_rows`` expected memories split, until the reads may hold ``fill`` times the
    top k; nodes that cannot beat the k-th score found are dropped. ``whole``: read
    every node left whole (the read budget is spent)."""
    kth = found[limit - 1][0] if len(found) >= limit else -math.inf
    wave: list[Read] = []
    expected = 0.0
    while heap and expected < fill * limit:
        if -heap[0].neg_bound * (1 + 1e-12) + _SLACK < kth:
            heap.clear()  # every node left is bounded by this one
            break
        node = heapq.heappop(heap)
        if node.size > read_rows and not whole and plan.splittable(node):
            for child in plan.children(node):
                heapq.heappush(heap, child)
            continue
        read = plan.read_of(node)
        if read.classes:
            wave.append(read)
            expected += min(node.size, limit)
    return wave
