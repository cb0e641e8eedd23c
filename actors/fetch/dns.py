"""DNS resolvers: asynchronous, cached with positive and negative TTLs (BUbiNG's DNS threads).

Three sources of answers:

* ``hosts_file`` (``--resolve FILE``, hosts-file format ``IP name [alias…]``, ``#`` comments):
  answers come from the file only; a name not in it is unresolvable;
* ``dns_server`` (``--dns-server IP:PORT``): every lookup is an A query sent to that server with
  c-ares (aiodns), no search domains, no ``/etc/hosts``;
* neither: c-ares with the system's resolver configuration.

Each lookup gets ``timeout × tries`` seconds in all, and an answer that takes up to ``timeout``
seconds is accepted, however c-ares spaces its retransmissions. Since c-ares 1.32 the configured
per-try timeout only applies until a server has answered three queries; after that each try waits
5× the server's average latency (at least 250 ms, doubling per retry), and each retry after a
timeout goes out from a new socket (c-ares closes a failing server's connections to change the
source port), so an answer to an earlier try is dropped: against a fast loopback server, one answer
taking 1.2 s was lost by every try shorter than that, and a lookup configured for 2 s × 2 failed
whenever no single try lasted 1.2 s (measured with c-ares 1.34.9: each of the 4–5 tries from its
own port). A lookup therefore runs in two lanes: the shared channel's quick retransmissions for its
first ``timeout`` seconds (a lost packet costs ~250 ms, not a whole try), then, if still unanswered,
a channel of its own for the remaining ``tries − 1`` tries, whose first try waits the configured
``timeout`` because a new channel has no latency figures yet. With ``tries=1`` the one try is on a
channel of its own. The deadline is enforced here.

Answers are cached: a hit for ``positive_ttl`` seconds, a failure (NXDOMAIN, no A record, timeout)
for ``negative_ttl`` seconds, so a dead name costs one query per TTL however many URLs it has.
Concurrent lookups of one name share a single query. (c-ares keeps its own cache of answers for
their DNS TTL, capped at an hour, so with a server the TTLs here are lower bounds on re-query intervals.)
"""

from __future__ import annotations

import asyncio
import ipaddress
import logging
import time
from collections import OrderedDict
from collections.abc import Callable
from pathlib import Path

from raycrawl.errors import UserError
from raycrawl.proxies import proxy_resolved

log = logging.getLogger(__name__)


def parse_hosts_file(path: str | Path) -> dict[str, str]:
    """name → IPv4 address from a hosts-format file (the first address given for a name wins).

    Raises :class:`UserError` for a missing file or a malformed line (with its line number).
    """
    try:
        text = Path(path).read_text(encoding="utf-8", errors="replace")
    except OSError as e:
        raise UserError(f"--resolve {path}: cannot read ({e.strerror or e})") from None
    table: dict[str, str] = {}
    for lineno, line in enumerate(text.splitlines(), 1):
        fields = line.split("#", 1)[0].split()
        if not fields:
            continue
        if len(fields) < 2:
            raise UserError(f"--resolve {path}:{lineno}: expected 'IP name [alias...]', got {line.strip()!r}")
        try:
            addr = ipaddress.ip_address(fields[0])
        except ValueError:
            raise UserError(f"--resolve {path}:{lineno}: {fields[0]!r} is not an IP address") from None
        if addr.version != 4:
            continue  # the crawler dials IPv4 only
        for name in fields[1:]:
            table.setdefault(name.lower().rstrip("."), str(addr))
    return table


def parse_dns_server(spec: str) -> tuple[str, int]:
    """``IP[:PORT]`` → (ip, port), port 53 by default; :class:`UserError` if malformed."""
    host, sep, port = spec.strip().rpartition(":")
    if not sep:
        host, port = spec.strip(), "53"
    try:
        ipaddress.ip_address(host.strip("[]"))
        port_num = int(port)
        assert 0 < port_num < 65536
    except (ValueError, AssertionError):
        raise UserError(f"--dns-server: expected IP:PORT, got {spec!r}") from None
    return host.strip("[]"), port_num


ARES_MIN_TRY = 0.25  # c-ares's floor for an adaptive try (ares_metrics.c MIN_TIMEOUT_MS)
ARES_MAX_TRY = 5.0  # and its default cap (MAX_TIMEOUT_MS)


def ares_tries(deadline: float) -> int:
    """Tries that make c-ares keep a query alive for ``deadline`` seconds at its shortest schedule:
    a 250 ms try, then doubling, each retry jittered down to half, capped at 5 s."""
    elapsed, tries = ARES_MIN_TRY, 1
    while elapsed < deadline:
        elapsed += max(ARES_MIN_TRY, min(ARES_MIN_TRY * 2**tries, ARES_MAX_TRY) / 2)
        tries += 1
    return tries + 1  # one more: the deadline, not c-ares, ends a lookup


_UNANSWERED = object()  # a lane that ran out of time (or tries) without an answer


class Resolver:
    """Host name → IPv4 address with a TTL cache. Use from one event loop."""

    def __init__(
        self,
        dns_server: tuple[str, int] | None = None,
        hosts_file: str | None = None,
        positive_ttl: float = 300,
        negative_ttl: float = 60,
        *,
        timeout: float = 2.0,
        tries: int = 2,
        max_cache: int = 1_000_000,
        max_inflight: int = 64,
        remote: Callable[[str], bool] | None = None,
    ) -> None:
        """A lookup waits ``timeout × tries`` seconds in all for an answer. ``max_inflight`` bounds the queries outstanding at once: a burst of thousands of UDP
        queries overflows a small server's socket buffer and turns into timeouts (measured: 22 % of
        3,000 simultaneous lookups against a dnslib server failed; none with 64 in flight).
        ``remote(name)``: a socks5h proxy resolves the name, so it is not looked up here (its
        address is the placeholder of core/proxies.py)."""
        assert positive_ttl >= 0 and negative_ttl >= 0
        self.dns_server = dns_server
        self.hosts = parse_hosts_file(hosts_file) if hosts_file else None
        self.positive_ttl = positive_ttl
        self.negative_ttl = negative_ttl
        self.timeout = timeout
        self.tries = tries
        self.max_cache = max_cache
        self._cache: OrderedDict[str, tuple[str | None, float]] = OrderedDict()
        self._inflight: dict[str, asyncio.Future[str | None]] = {}
        self._aiodns = None
        self.max_inflight = max_inflight
        self.remote = remote
        self._slots: asyncio.Semaphore | None = None
        self.queries = 0  # lookups that missed the cache (sent to DNS / the hosts table)
        self.answered = 0  # of those, finished with an address
        self.failures = 0  # finished without one

    def _new_channel(self, tries: int):
        import aiodns

        kwargs: dict = {"timeout": self.timeout, "tries": tries}
        if self.dns_server is not None:
            ip, port = self.dns_server
            server = f"[{ip}]:{port}" if ":" in ip else f"{ip}:{port}"
            kwargs.update(nameservers=[server], domains=[], lookups="b")
        return aiodns.DNSResolver(**kwargs)

    def _channel(self):
        """The shared channel (the quick lane): its tries cover ``timeout`` at c-ares's shortest spacing."""
        if self._aiodns is None:
            self._aiodns = self._new_channel(ares_tries(self.timeout))
        return self._aiodns

    @staticmethod
    def _normalise(host: str) -> str:
        host = host.strip().lower().rstrip(".")
        if host.startswith("["):
            return host  # IPv6 literal (never dialed, but don't mangle it)
        return host.rsplit(":", 1)[0] if host.count(":") == 1 else host

    def cached(self, host: str, now: float | None = None) -> tuple[bool, str | None]:
        """(hit, answer) from the cache without querying."""
        entry = self._cache.get(self._normalise(host))
        if entry is None or entry[1] <= (time.monotonic() if now is None else now):
            return False, None
        return True, entry[0]

    async def resolve(self, host: str) -> str | None:
        """The IPv4 address of ``host`` (``host:port`` accepted), or None if it cannot be resolved
        (NXDOMAIN, no A record, server failure/timeout, not in the hosts file). Never raises."""
        name = self._normalise(host)
        try:
            addr = ipaddress.ip_address(name.strip("[]"))
            return str(addr) if addr.version == 4 else None
        except ValueError:
            pass
        if self.remote is not None and self.remote(name):
            return proxy_resolved(name)
        hit, answer = self.cached(name)
        if hit:
            return answer
        pending = self._inflight.get(name)
        if pending is not None:
            return await asyncio.shield(pending)
        fut: asyncio.Future[str | None] = asyncio.get_running_loop().create_future()
        self._inflight[name] = fut
        try:
            answer = await self._lookup(name)
            self._store(name, answer)
            fut.set_result(answer)
        except BaseException as e:  # cancelled: wake the waiters, don't cache
            fut.set_result(None)
            if not isinstance(e, Exception):
                raise
            log.warning("DNS lookup of %s failed unexpectedly: %r", name, e)
            answer = None
        finally:
            del self._inflight[name]
        return answer

    async def resolve_many(self, hosts: list[str]) -> dict[str, str | None]:
        """host → address (or None) for every host, looked up concurrently."""
        unique = list(dict.fromkeys(hosts))
        answers = await asyncio.gather(*(self.resolve(h) for h in unique))
        return dict(zip(unique, answers, strict=True))

    async def _lookup(self, name: str) -> str | None:
        self.queries += 1
        if self.hosts is not None:
            answer = self.hosts.get(name)
            if answer is None:
                self.failures += 1
            else:
                self.answered += 1
            return answer
        if self._slots is None:
            self._slots = asyncio.Semaphore(self.max_inflight)
        deadline = time.monotonic() + self.timeout * self.tries
        async with self._slots:
            result = _UNANSWERED
            if self.tries > 1:
                result = await self._ask(self._channel(), name, self.timeout)
            if result is _UNANSWERED:
                own = self._new_channel(max(1, self.tries - 1))
                try:
                    result = await self._ask(own, name, deadline - time.monotonic())
                finally:
                    await own.close()
        if result is _UNANSWERED or result is None:
            self.failures += 1
            if result is _UNANSWERED:
                log.debug("DNS %s: no answer within %.1fs", name, self.timeout * self.tries)
            return None
        for record in result.answer:
            addr = getattr(record.data, "addr", None)
            if record.type == 1 and addr:  # A; CNAME chains are followed by the server
                self.answered += 1
                return addr
        self.failures += 1
        return None

    @staticmethod
    async def _ask(channel, name: str, seconds: float):
        """The channel's answer to an A query within ``seconds``; None for a final negative answer
        (NXDOMAIN, no data, refused…), ``_UNANSWERED`` if time or c-ares's tries ran out."""
        import aiodns

        try:
            return await asyncio.wait_for(channel.query_dns(name, "A"), max(seconds, 0.0))
        except TimeoutError:
            return _UNANSWERED
        except aiodns.error.DNSError as e:
            if e.args and e.args[0] == aiodns.error.ARES_ETIMEOUT:
                return _UNANSWERED
            log.debug("DNS %s: %s", name, e.args)
            return None

    def _store(self, name: str, answer: str | None) -> None:
        ttl = self.positive_ttl if answer is not None else self.negative_ttl
        self._cache[name] = (answer, time.monotonic() + ttl)
        self._cache.move_to_end(name)
        while len(self._cache) > self.max_cache:
            self._cache.popitem(last=False)

    async def close(self) -> None:
        """Release the c-ares channel (the resolver may be used again afterwards)."""
        if self._aiodns is not None:
            await self._aiodns.close()
            self._aiodns = None
