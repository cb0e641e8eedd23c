"""Mercator's frontier for simulated crawls: front queues (priorities), back queues (politeness).

Najork and Heydon's Mercator frontier (seed 001): URLs enter one of ``K`` FIFO *front queues*
chosen by their priority; ``B`` *back queues* each hold the URLs of exactly one host, and a heap
orders the back queues by the time their host may be contacted again. Among the hosts that may be
contacted *now*, the one whose next URL has the highest priority goes first (FIFO among equals),
so priorities act within the politeness constraints instead of being flattened by them. When a back queue empties,
it is refilled by pulling URLs from the front queues, highest priority first: a URL of a host
that already has a back queue joins it, the first URL of a new host takes the empty queue.

Time is simulated: a fetch takes ``fetch_time`` units and a host waits ``delay`` units between the
end of a fetch and the next request to it. Pure and synchronous (no Ray, no I/O).
"""

from __future__ import annotations

import heapq
from collections import deque


class MercatorFrontier:
    """Frontier of node ids with integer priority levels 0 (lowest) … ``levels`` − 1 (highest).

    Contract: :meth:`add` may be called with a node more than once (a better priority found
    later); the frontier returns each node at most once and skips entries already returned.
    """

    def __init__(self, host_of, levels: int = 1, back_queues: int = 64, delay: float = 1.0,
                 fetch_time: float = 1.0) -> None:
        assert levels >= 1 and back_queues >= 1 and delay >= 0 and fetch_time > 0
        self.host_of = host_of
        self.levels = levels
        self.back_limit = back_queues
        self.delay = delay
        self.fetch_time = fetch_time
        self.front = [deque() for _ in range(levels)]
        self.back: dict[int, deque] = {}  # host -> its URLs
        self.heap: list[tuple[float, int, int]] = []  # (ready time, tie, host): waiting hosts
        self.ready: list[tuple[int, int, int]] = []  # (−level of head URL, tie, host): may go now
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
        """(node, level) of the next not-yet-scheduled node from the highest non-empty front queue."""
        for level in range(self.levels - 1, -1, -1):
            q = self.front[level]
            while q:
                node = q.popleft()
                self._front_size -= 1
                if node not in self.done:
                    return node, level
        return None

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
        heap, ready = self.heap, self.ready
        while heap and heap[0][0] <= self.now:
            self._make_ready(heapq.heappop(heap)[2])
        if not ready:
            if not heap:
                return None
            self.now = heap[0][0]  # nobody may be contacted yet: the clock jumps
            while heap and heap[0][0] <= self.now:
                self._make_ready(heapq.heappop(heap)[2])
        host = heapq.heappop(ready)[2]
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

    def _make_ready(self, host: int) -> None:
        self._tie += 1
        heapq.heappush(self.ready, (-self.back[host][0][1], self._tie, host))

    def __len__(self) -> int:
        return self._front_size + sum(len(q) for q in self.back.values())
