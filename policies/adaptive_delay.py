"""Adaptive politeness: a host's delay follows how slowly it answers.

Heritrix's rule (``delayFactor``): the next request to a host waits ``factor`` times the last
response's duration, so a server that slows down under the crawl's load is asked less often, and
one that answers fast is not held back more than the configured delay. Scrapy's AutoThrottle adds
the two habits kept here: after a sign of overload (429, 5xx, a timeout) the delay doubles, and it
comes back down gradually — halfway to its target at each ordinary response — never at once; an
error page's short duration (a 404 answered from a cache) does not lower it.

The result is only ever a floor added to the others: the configured host delay, robots.txt's
``Crawl-delay`` and the operator's throttle still apply (the fetch loop gives it as the release's
``not_before``). Hosts whose adaptive delay is not above the configured one are forgotten, so the
memory held is that of the hosts currently slowed, at most ``size`` of them.
"""

from __future__ import annotations

from collections import OrderedDict

from raycrawl.exchange import FetchResult

OVERLOAD_ERRORS = frozenset({"timeout"})


def overloaded(fr: FetchResult) -> bool:
    """A sign that the server is overloaded: 429, a 5xx, or no answer in time."""
    return fr.status == 429 or fr.status >= 500 or fr.error in OVERLOAD_ERRORS


class AdaptiveDelays:
    """``factor`` (0: off) × a response's duration, capped at ``cap`` seconds; ``base``: the
    configured host delay (below it nothing is kept)."""

    def __init__(self, factor: float, cap: float, base: float, size: int = 100_000) -> None:
        self.factor, self.cap, self.base, self.size = factor, cap, base, size
        self.delays: OrderedDict[str, float] = OrderedDict()

    def after(self, host: str, fr: FetchResult) -> float:
        """The delay ``host`` wants before its next request, after the response ``fr`` (0 when
        off, or for an exchange that never reached the server)."""
        if self.factor <= 0 or fr.started <= 0 or fr.ended < fr.started:
            return 0.0
        target = self.factor * (fr.ended - fr.started)
        prev = self.delays.pop(host, 0.0)
        if overloaded(fr):
            new = max(2 * prev, 2 * self.base, target)
        else:
            new = max(target, (prev + target) / 2)
            if fr.status != 200 and new < prev:
                new = prev
        new = min(new, self.cap)
        if new > self.base:
            self.delays[host] = new
            if len(self.delays) > self.size:
                self.delays.popitem(last=False)
        return new
