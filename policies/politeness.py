"""Politeness: when the next request to a host or an IP may start.

BUbiNG's rule (see docs/crawling.md): a delay runs from the END of the previous response from the
host (IP) to the START of the next request to it. The host delay is the larger of the configured
host delay and the robots.txt ``Crawl-delay`` (capped by ``max_crawl_delay``). Retries of transient
failures back off exponentially, never sooner than the host delay allows.
"""

from __future__ import annotations

from dataclasses import dataclass

from raycrawl.exchange import FetchResult
from raycrawl.settings import Settings


@dataclass(frozen=True)
class Politeness:
    host_delay: float = Settings.host_delay
    ip_delay: float = Settings.ip_delay
    max_crawl_delay: float = Settings.max_crawl_delay
    retry_backoff: float = Settings.retry_backoff

    @classmethod
    def of(cls, s: Settings) -> Politeness:
        return cls(s.host_delay, s.ip_delay, s.max_crawl_delay, s.retry_backoff)

    def __post_init__(self) -> None:
        assert min(self.host_delay, self.ip_delay, self.max_crawl_delay, self.retry_backoff) >= 0

    def effective_host_delay(self, crawl_delay: float | None, override: float | None = None) -> float:
        """The delay between two requests to a host whose robots.txt asks for ``crawl_delay``;
        ``override``: the operator's delay for the host (``raycrawl ctl throttle``), which replaces
        the configured one, higher or lower, but never goes below the Crawl-delay."""
        base = self.host_delay if override is None else override
        if crawl_delay is None or crawl_delay <= 0:
            return base
        return max(base, min(crawl_delay, self.max_crawl_delay))

    def host_next(self, end: float, crawl_delay: float | None = None, override: float | None = None) -> float:
        """Earliest start of the next request to a host whose last response ended at ``end``."""
        return end + self.effective_host_delay(crawl_delay, override)

    def ip_next(self, end: float) -> float:
        """Earliest start of the next request to an IP whose last response ended at ``end``."""
        return end + self.ip_delay

    def retry_next(self, end: float, attempt: int, crawl_delay: float | None = None) -> float:
        """When retry number ``attempt`` (1-based) of a transient failure may start."""
        assert attempt >= 1
        return max(self.host_next(end, crawl_delay), end + self.retry_backoff * 2 ** (attempt - 1))


CUT_GRACE = 1.0
"""Seconds added to the end of an exchange WE cut (timeout, body or decompressed-size cap): the
server may still be sending when we stop reading, and its response ends only when it notices."""
CUT_ERRORS = frozenset({"timeout", "too-large", "bomb"})


def response_end(fr: FetchResult) -> float:
    """When an exchange ended on the wire, conservatively: the time delays run from."""
    return fr.ended + (CUT_GRACE if fr.error in CUT_ERRORS else 0.0)
