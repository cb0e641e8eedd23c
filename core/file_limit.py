"""File descriptors: a crawl's processes raise their soft limit to what the crawl needs.

A fetch actor holds a socket per request in flight and per idle keep-alive connection, plus its
Redis connection, DNS sockets and files; the default soft limit (often 1,024) is below that for a
broad crawl, while the hard limit usually allows it. Out of descriptors, a connect fails with
EMFILE — our fault, which the fetch loop never holds against a host (``exchange.LOCAL``).
"""

from __future__ import annotations

import logging

log = logging.getLogger(__name__)

MARGIN = 256  # Redis, DNS, log and store files, Ray's own sockets


def files_needed(settings: object) -> int:
    """Descriptors one fetch actor may use at once under ``settings``."""
    return int(settings.fetch_concurrency) + int(settings.max_idle_connections) + MARGIN


def raise_file_limit(need: int) -> int:
    """Raise this process's soft RLIMIT_NOFILE to ``need`` (at most the hard limit; children
    started afterwards inherit it). Returns the soft limit now; says in one line when the hard
    limit is too low."""
    try:
        import resource
    except ImportError:  # not a POSIX system: nothing to raise
        return need
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = need if hard == resource.RLIM_INFINITY else min(need, hard)
    if soft != resource.RLIM_INFINITY and soft < target:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
            soft = target
        except (ValueError, OSError) as exc:
            log.warning("could not raise the open-files limit from %d to %d: %s", soft, target, exc)
    if soft != resource.RLIM_INFINITY and soft < need:
        log.warning("open-files limit is %d, the crawl may need %d (fetch_concurrency + max_idle_connections + "
                    "%d): raise the hard limit (ulimit -Hn) or lower those settings; requests that find no "
                    "descriptor wait and are tried again", soft, need, MARGIN)
    return soft
