"""Mercator's frontier for simulated crawls: front queues (priorities), back queues (politeness).

Najork and Heydon's Mercator frontier (seed 001): URLs enter one of ``K`` FIFO *front queues*
chosen by their priority; ``B`` *back queues* each hold the URLs of exactly one host, and a heap
orders the back queues by the time their host may be contacted again: the earliest goes next, as
the live workbench hands out its ready hosts. When a back queue empties, it is refilled from the
front queues: a front queue is drawn with a randomised bias toward higher priority
(:class:`policies.front_queues.FrontQueueSelector`, the live frontier's selector too) and its head
URL pulled; a URL of a host that already has a back queue joins it, the first URL of a new host
takes the empty queue.

Time is simulated: a fetch takes ``fetch_time`` units and a host waits ``delay`` units between the
end of a fetch and the next request to it. Pure and synchronous (no Ray, no I/O).
"""

from __future__ import annotations

import heapq
from collections import deque

from raycrawl.policies.front_queues import DEFAULT_BIAS, FrontQueueSelector


class MercatorFrontier:
    """Frontier of node ids with integer priority levels 0 (lowest) … ``levels`` − 1 (highest).

    Contract: :meth:`add` may be called with a node more than once (a better priority found
    later); the frontier returns each node at most once and skips entries already returned.
    """

    def __init__(self, host_of, levels: int = 1, back_queues: int = 64, delay: float = 1.0,
                 fetch_time: float = 1.0, bias: float = DEFAULT_BIAS, seed: int | None = 0) -> None:
        assert levels >= 1 and back_queues >= 1 and delay >= 0 and fetch_time > 0
        self.host_of = host_of
        self.levels = levels
        self.back_limit = back_queues
        self.delay = delay
        self.fetch_time = fetch_time
        self.front = [deque() for _ in range(levels)]
        self.selector = FrontQueueSelector(levels, bias, seed)
        self.back: dict[int, deque] = {}  # host -> its URLs
        self.heap: list[tuple[float, int, int]] = []  # (ready time, tie, host): every back queue
        self.done: set[int] = set()  # nodes handed out (or queued in a back queue)
        self.now = 0.0
        self._tie = 0
        self._front_size = 0
        self._released: dict[int, float] = {}  # host -> earliest next request after its queue emptied

    def add(self, node: int, level: int = 0) -> None:
        """Queue ``node`` at priority ``level`` (clamped to the valid range)."""
        if node in self.done:
            return
        level = 0 if level < 0 else (self.levels - 1 if level >= self.levels else level)
        self.front[level].append(node)
        self._front_size += 1

    def _pull_front(self) -> tuple[int, int] | None:
        """(node, level) of the next not-yet-scheduled node from a front queue drawn by the selector."""
        sizes = [len(q) for q in self.front]
        while True:
            level = self.selector.pick(sizes)
            if level is None:
                return None
            node = self.front[level].popleft()
            sizes[level] -= 1
            self._front_size -= 1
            if node not in self.done:
                return node, level

    def _refill(self) -> None:
        """Fill back queues from the front queues until all ``B`` are in use or the front is empty."""
        while len(self.back) < self.back_limit:
            pulled = self._pull_front()
            if pulled is None:
                return
            node, level = pulled
            self.done.add(node)
            host = self.host_of[node]
            q = self.back.get(host)
            if q is not None:
                q.append((node, level))
                continue
            self.back[host] = deque([(node, level)])
            self._tie += 1
            ready = self._released.pop(host, 0.0)
            heapq.heappush(self.heap, (ready if ready > self.now else self.now, self._tie, host))

    def next(self) -> int | None:
        """The next node to fetch, honouring host politeness; advances the simulated clock."""
        self._refill()
        heap = self.heap
        if not heap:
            return None
        ready, _, host = heapq.heappop(heap)
        if ready > self.now:
            self.now = ready  # nobody may be contacted yet: the clock jumps
        q = self.back[host]
        node, _ = q.popleft()
        self.now += self.fetch_time
        if q:
            self._tie += 1
            heapq.heappush(heap, (self.now + self.delay, self._tie, host))
        else:
            # The back queue is released; a later URL of this host starts a new one, which must
            # still wait out the delay.
            del self.back[host]
            self._released[host] = self.now + self.delay
        return node

    def __len__(self) -> int:
        return self._front_size + sum(len(q) for q in self.back.values())
