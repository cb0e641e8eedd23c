"""Crawl settings: every knob with its default, group and help text, in one place.

A :class:`Settings` is built from defaults, then a config file (TOML ``*.toml`` or YAML
``*.yaml``/``*.yml``; keys are the field names below, ``-`` or ``_`` alike), then command-line
options — later sources win. Unknown keys and bad values are :class:`UserError`.

Each field is made by :func:`knob`: the crawl command's flags and their help
(``core/commands/crawl.py``), the config file keys and the docs table (``docs/settings.md``,
:func:`markdown`) all follow from it, so a new setting is one field here.
"""

from __future__ import annotations

import dataclasses
import ipaddress
import json
import math
import os
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from raycrawl.errors import UserError

IO, BUDGET, POLITENESS, NETWORK, FILTERS, RENDERING, PRIORITY, SIZING = (
    "input / output", "budget", "politeness", "network", "filters", "rendering", "priorities", "agent sizing")


def knob(default: Any, group: str, help: str, *, factory: Callable[[], Any] | None = None) -> Any:
    """A setting's field: its default (or ``factory`` for a list), the group it is listed in, and
    its help text."""
    meta = {"group": group, "help": help}
    if factory is not None:
        return field(default_factory=factory, metadata=meta)
    return field(default=default, metadata=meta)


RENDER_MODES = ("never", "always", "auto")


def render_pattern(spec: str) -> re.Pattern | None:
    """The regular expression a ``render`` setting names (None for never, always or auto)."""
    if spec in RENDER_MODES:
        return None
    try:
        return re.compile(spec)
    except re.error as exc:
        raise UserError(f"render: {spec!r} is neither never, always, auto nor a regular expression ({exc})") from None


@dataclass
class Settings:
    # --- input / output ---------------------------------------------------------------------------
    seeds: str | None = knob(None, IO,
        "File of seed URLs, one per line (``#`` comments and blank lines ignored).")
    out: str = knob("crawl-out", IO,
        "Crawl directory: warc/, links/, report.json, redis/ (embedded Redis), sieve/, virtualizer/.")
    resume: bool = knob(False, IO,
        "Continue the crawl stored in ``out`` (and its Redis) instead of starting afresh.")
    redis_url: str | None = knob(None, IO,
        "Redis holding the workbench (``redis://[user[:password]@]host:port/db``, ``rediss://`` for "
        "TLS); None = an embedded server with data under ``out/redis``. Its password is never "
        "written anywhere (shown as ``***``); prefer ``redis_password_file``, which ``ps`` does not show.")
    redis_password_file: str | None = knob(None, IO,
        "File whose first line is the Redis password (else ``$RAYCRAWL_REDIS_PASSWORD``, else the "
        "URL's). With no ``redis_url``, the embedded server requires it too.")
    redis_prefix: str = knob("rc:", IO,
        "Key prefix of every frontier key, so several crawls can share one Redis.")
    address: str | None = knob(None, IO,
        "Ray cluster address (``auto``: the one running on this machine); None = ``$RAY_ADDRESS`` when set "
        "(as Ray reads it; ``ray job submit`` sets it), else a local Ray instance of the crawl's own.")
    dashboard: bool = knob(False, IO,
        "Start the local Ray with its dashboard on a free loopback port and print its URL (also in "
        "``out/dashboard-url``); "
        "a cluster given by ``address`` has its own.")
    operator: str = knob("", IO,
        "Who runs the crawl (a name and contact): the ``operator`` field of every WARC file's warcinfo record.")
    crawl_log: bool = knob(True, IO,
        "Write ``out/crawl.log`` (one line per URL in Heritrix's crawl.log format, from the link records) "
        "at the end of every run; ``raycrawl log`` writes it, or a TSV/parquet table, on demand.")
    out_store: str | None = knob(None, IO,
        "Object store the crawl's outputs are uploaded to (``s3://bucket/prefix``): each WARC and "
        "link-record file once closed, the rest at the end of every run; ``out`` stays the working "
        "directory and keeps everything. Credentials and endpoint from the environment "
        "(``AWS_ACCESS_KEY_ID``…, ``AWS_ENDPOINT_URL``): docs/crawling.md, \"Object storage\".")
    agent_dir: str | None = knob(None, IO,
        "Several agents without a shared ``out`` (needs ``out_store``): each agent works in "
        "``AGENT_DIR/<crawl id>/<agent>`` on its own node's disk, ships its files to the store, and "
        "host shards (sieve, virtual queues) move between agents through the store; the driver's "
        "``out`` keeps Redis, the report and a copy of everything but the WARC files: "
        "docs/crawling.md, \"Several agents without a shared OUT\".")
    ship_seconds: float = knob(5.0, IO,
        "With ``agent_dir``: seconds of WARC, link and summary records an agent gathers in one piece before "
        "closing it and uploading it to ``out_store``; a page counts as done (committed in Redis) only "
        "once its piece is in the store, so a node lost for good costs at most the pages of its last "
        "pieces, fetched again by the others. 0: one piece per WARC file (pages counted when written).")
    checkpoint_seconds: float = knob(30.0, IO,
        "With ``agent_dir``: seconds between checkpoints of an agent's host shards (sieve, virtual "
        "queues) to ``out_store``; what changed since is logged in Redis, so the others take a lost "
        "agent's shards over from there (Redis holds this many seconds of the crawl's new URLs).")
    warc_prefix: str = knob("", IO,
        "Prefix of the WARC file names (``PREFIX-agent0-TIMESTAMP-SERIAL-PID~HOST.warc.gz``; empty = none).")

    # --- budget -----------------------------------------------------------------------------------
    max_pages: int = knob(0, BUDGET,
        "Stop after this many fetched-URL records (0 = until the frontier is empty).")
    max_urls_per_host: int = knob(10_000, BUDGET,
        "URLs ever scheduled per host (per pass of a periodic crawl); later ones are dropped (counted as filtered).")

    # --- politeness -------------------------------------------------------------------------------
    host_delay: float = knob(2.0, POLITENESS,
        "Seconds from the end of a response from a host to the next request to that host.")
    ip_delay: float = knob(0.5, POLITENESS,
        "Seconds from the end of a response from an IP to the next request to that IP.")
    max_crawl_delay: float = knob(30.0, POLITENESS,
        "Cap on a robots.txt ``Crawl-delay`` (seconds); the host delay is max(host_delay, capped).")
    delay_factor: float = knob(2.0, POLITENESS,
        "Adaptive politeness (Heritrix's delayFactor): a host's next request also waits this many times its "
        "last response's duration; after a 429, a 5xx or a timeout the host's delay doubles, then comes "
        "back down halfway at each ordinary response (Scrapy's AutoThrottle). The host delay, Crawl-delay "
        "and the operator's throttle stay floors. 0 turns it off.")
    max_adaptive_delay: float = knob(60.0, POLITENESS,
        "Cap (seconds) on a host's adaptive delay (``delay_factor``).")
    robots_ttl: float = knob(24 * 3600.0, POLITENESS,
        "Seconds a host's robots.txt rules are kept before it is fetched again (RFC 9309 §2.4: SHOULD NOT "
        "be used beyond 24 hours).")
    user_agent: str = knob("raycrawl/0.1 (+http://raycrawl.test/bot)", POLITENESS,
        "User-Agent header and the robots.txt agent token.")

    # --- network ----------------------------------------------------------------------------------
    resolve: str | None = knob(None, NETWORK,
        "Hosts file (``IP name…`` lines): answer DNS from this file only.")
    dns_server: str | None = knob(None, NETWORK,
        "``IP:PORT`` of the DNS server every lookup goes to (default: the system's).")
    allow_networks: str | None = knob(None, NETWORK,
        "Comma-separated CIDRs we may connect to; None = public unicast only.")
    proxy: str | None = knob(None, NETWORK,
        "Proxy every request goes through: ``http://HOST:PORT`` (CONNECT), ``https://``, ``socks5://`` (the "
        "crawl resolves names) or ``socks5h://`` (the proxy does); never with credentials in it "
        "(docs/fetching.md, Proxies).")
    proxy_rules: list[str] = knob(None, NETWORK,
        "``\"PROXY REGEX\"`` each: URLs matching REGEX go through PROXY (a proxy URL, or ``direct``); the "
        "first rule that matches decides, else ``proxy``.", factory=list)
    proxy_credentials_file: str | None = knob(None, NETWORK,
        "File of proxy credentials: ``user:password`` (for ``proxy``) or ``PROXY user:password`` lines; "
        "else ``$RAYCRAWL_PROXY_CREDENTIALS`` for ``proxy``.")
    proxy_patience: float = knob(300.0, NETWORK,
        "Seconds a proxy may fail every request before the URLs behind it are recorded as failed "
        "(error ``proxy``); until then they wait and are tried again, never held against their sites.")
    session_file: str | None = knob(None, NETWORK,
        "TOML file of what the crawl sends to given sites only: extra request headers per site (a URL or "
        "SURT prefix), secret ones read from files or the environment and never archived "
        "(docs/fetching.md, Headers per site).")
    connect_timeout: float = knob(5.0, NETWORK,
        "Seconds to open a connection to a server.")
    read_timeout: float = knob(15.0, NETWORK,
        "Seconds without a byte from the server before the fetch fails (``timeout``); a whole fetch gets "
        "connect_timeout + 3 × read_timeout.")
    max_body: int = knob(4 * 1024 * 1024, NETWORK,
        "Bytes of body received before the fetch is cut (error ``too-large``).")
    max_decompressed: int = knob(16 * 1024 * 1024, NETWORK,
        "Bytes after decompression before the fetch is cut (error ``bomb``).")
    max_retries: int = knob(2, NETWORK,
        "Retries of a transient failure (timeout, connect, reset, 5xx); others are never retried.")
    retry_backoff: float = knob(5.0, NETWORK,
        "First retry waits this long after the failure; each further retry doubles it.")
    keepalive_timeout: float = knob(15.0, NETWORK,
        "Seconds an idle connection to a host is kept for its next request. It is kept only when the host "
        "has more URLs queued and its delay (host_delay or its Crawl-delay) is shorter; otherwise the "
        "request says ``Connection: close`` (docs/fetching.md, Connections).")
    max_idle_connections: int = knob(256, NETWORK,
        "Idle keep-alive connections a fetch actor holds at most (the oldest is closed first): open sockets "
        "stay bounded by politeness, not by the hosts recently visited.")

    # --- filters ----------------------------------------------------------------------------------
    allowed_schemes: list[str] = knob(None, FILTERS,
        "URL schemes followed (prefetch filter).", factory=lambda: ["http", "https"])
    max_url_length: int = knob(2048, FILTERS,
        "Longest URL (characters) followed; longer links are filtered.")
    max_duplicate_segments: int = knob(3, FILTERS,
        "A run of path segments repeated this many times in a row is a trap (filtered; 0 = off).")
    max_depth: int = knob(16, FILTERS,
        "Maximum number of path segments.")
    host_suffixes: list[str] | None = knob(None, FILTERS,
        "Only hosts ending with one of these suffixes are crawled (None = any).")
    allowed_content_types: list[str] = knob(None, FILTERS,
        "Media types that are parsed (postfetch filter); others are stored but not parsed.", factory=lambda: ["text/html", "application/xhtml+xml", "text/plain"])
    accept_missing_content_type: bool = knob(False, FILTERS,
        "Parse a response that has no Content-Type header (postfetch filter).")
    exclude_extensions: list[str] = knob(None, FILTERS,
        "URL path extensions never fetched (prefetch filter), e.g. [\"jpg\", \"zip\"].", factory=list)
    scope_allow: list[str] = knob(None, FILTERS,
        "Regular expressions searched in each URL: when any scope_allow or scope_allow_surts rule is given, "
        "only URLs matching one are crawled (Scrapy's allow; docs/fetching.md, Scope).", factory=list)
    scope_deny: list[str] = knob(None, FILTERS,
        "Regular expressions: URLs matching any are never crawled (Scrapy's deny); deny wins over allow.",
        factory=list)
    scope_allow_surts: list[str] = knob(None, FILTERS,
        "SURT prefixes (Heritrix): 'org,example,' = the host and its subdomains, 'org,example,www)/docs/' = a "
        "path, or a URL turned into one; with any allow rule, only URLs under one are crawled.", factory=list)
    scope_deny_surts: list[str] = knob(None, FILTERS,
        "SURT prefixes (or URLs) never crawled; deny wins over allow.", factory=list)
    page_requisites: bool = knob(True, FILTERS,
        "Fetch what a page needs to be shown — images, stylesheets (and their url()s and @imports), "
        "scripts, fonts, media (core/requisites.py) — as links are fetched (same scope, politeness, "
        "robots.txt), so an archive replays pages as a person sees them; recorded as the link "
        "records' ``embeds`` and as ``E`` hops in crawl.log. They are not pages (storage/crawl_pages.py). "
        "On by default, as an archival crawler's; off for a crawl of pages alone.")
    requisite_hops: int = knob(2, FILTERS,
        "How far page requisites may leave the crawl's scope (its allow rules and host suffixes; deny "
        "rules always hold), as Heritrix's transclusion hops: 0 = not at all; 1 = the requisites of an "
        "in-scope page or stylesheet (a CDN's images, scripts, stylesheets); 2 = also the url()s "
        "(fonts, images) of such an out-of-scope stylesheet, not its @imports.")
    dedup_index: list[str] = knob(None, FILTERS,
        "CDXJ indexes of earlier collections (``raycrawl warc index`` output, or any CDXJ with digests): a "
        "payload already archived there is written as a WARC revisit of that capture "
        "(storage/dedup_index.py).", factory=list)
    follow_sitemaps: bool = knob(False, FILTERS,
        "Follow the Sitemap: lines of robots.txt (sitemaps given as seeds are always read; core/sitemaps.py).")
    spam_gate: str | None = knob(None, FILTERS,
        "A spam gate model (``gate.json``, docs/spam.md) that blocks hosts at crawl time; None = off (or "
        "$RAYCRAWL_SPAM_GATE).")
    near_dup: bool = knob(True, FILTERS,
        "Check parsed pages against the near-duplicate index (actors/visit/shingler.py) when present.")
    stages: list[str] = knob(None, FILTERS,
        "Changes to the chain of crawl-time stages (actors/visit/chain.py; `raycrawl settings` prints the chain "
        "in force, each stage's name and position): ``NAME=POSITION`` moves a stage, ``NAME=off`` switches it off, "
        "``module:Class=POSITION`` adds a VisitStage of one's own (docs/architecture.md, \"Add a crawl-time stage\").",
        factory=list)
    extra_stages: list[str] = knob(None, FILTERS,
        "Crawl-time stages of one's own, as ``module:Class`` import paths of VisitStage subclasses "
        "(actors/visit/visit_stage.py); run after every stage of the chain (``stages`` places them anywhere).",
        factory=list)
    summaries_at_crawl: bool = knob(True, FILTERS,
        "Feed parsed pages to the summary writer during the crawl (``DIR/summaries/spill/``), so "
        "``raycrawl summaries build DIR --from-spill`` needs no second pass over the WARC files.")

    # --- rendering ----------------------------------------------------------------------------------
    render: str = knob("never", RENDERING,
        "Which HTML pages are rendered in headless Chromium (actors/visit/stages/render.py): ``never``, "
        "``always``, ``auto`` (the markup says scripts make what a reader sees: an empty application root, "
        "a noscript asking for JavaScript, little text while a script writes markup; policies/render_policy.py) "
        "or a regular expression of URLs. The browser has no network: every request it makes is answered "
        "from what the crawl archived, and what is missing is fetched as the page's requisite (robots.txt, "
        "scope, politeness, the WARC) before the page is rendered again. Needs page_requisites.")
    render_rounds: int = knob(3, RENDERING,
        "Most renders of one page: after each, what the page asked for and the archive lacked is fetched, "
        "then it is rendered again, until it asks for nothing new.")
    render_wait: float = knob(30.0, RENDERING,
        "Seconds a page waits with none of its requisites coming before it is rendered with what has arrived.")
    render_timeout: float = knob(15.0, RENDERING,
        "Seconds one render may take (load, scroll, settle); a page that outlasts it is recorded as failed "
        "(``timeout``; what its scripts had made is kept if the page still answers) and its tab is replaced.")
    render_tabs: int = knob(4, RENDERING,
        "Pages a browser renders at once, each in a tab of its own.")
    render_browsers: int = knob(1, RENDERING,
        "Browsers of an agent, each in a render actor (a process) of its own on the agent's node; a browser "
        "restarted (after N renders, past its memory bound, after a crash) holds up only its own tabs.")
    render_backlog: int = knob(2_000, RENDERING,
        "Pages waiting for their requisites or a browser, per agent; a page found beyond it is not rendered "
        "(counted as ``render:backlog``).")
    render_cache_mb: int = knob(64, RENDERING,
        "Megabytes of recently archived responses an agent keeps for its renders (a site's scripts and "
        "stylesheets, asked for by every page).")
    render_screenshot: bool = knob(False, RENDERING,
        "Also store a screenshot of each rendered page (a WARC resource record ``urn:screenshot:URL``, PNG, "
        "as Browsertrix writes them).")
    chromium: str | None = knob(None, RENDERING,
        "The Chromium to render with: a path or a command (default: chromium, chromium-browser or "
        "google-chrome on PATH). It is never downloaded.")

    # --- priorities ---------------------------------------------------------------------------------
    focus: str | None = knob(None, PRIORITY,
        "A focus model (``*.focus.json`` written by ``raycrawl simulate``): the parser scores every page and "
        "its links get the priority level of the score (front queues, docs/focused-crawling.md); the front "
        "then stays at ``front_size`` hosts. None = an unfocused, breadth-first crawl.")
    revisit: bool = knob(False, PRIORITY,
        "Run the next pass of a periodic crawl over the crawl in ``out``: the pages whose estimated "
        "change rate makes them due are fetched again with conditional GETs, through the same frontier "
        "and politeness, and new links are followed (docs/periodic-crawling.md). Implies ``resume``; "
        "``max_pages`` is then the pass's budget.")
    revisit_max_interval: int = knob(8, PRIORITY,
        "Most passes between two visits of a page that never changes (the schedule of policies/revisit.py).")

    # --- agent sizing -----------------------------------------------------------------------------
    agents: int = knob(1, SIZING,
        "Agents of the crawl (each with its sieve, fetchers, parser, store and workbench view), spread "
        "over the Ray cluster's nodes; hosts are split among them by consistent hashing.")
    elastic: bool = knob(False, SIZING,
        "One agent per Ray node that can hold one (the nodes with the ``agent`` resource, or all), added "
        "when a node joins; a node that leaves has its hosts taken over (actors/cluster/membership.py).")
    fetch_actors: int = knob(1, SIZING,
        "Fetch actors per agent (each its own process with one event loop).")
    fetch_concurrency: int = knob(256, SIZING,
        "Maximum requests in flight per fetch actor (one per host and per IP at a time anyway).")
    max_uncommitted: int = knob(512, SIZING,
        "Visits a fetch actor may hold acquired but not yet handed to the agent (in flight or finished "
        "and buffered): it acquires no more until the agent drains it. A crash re-fetches at most these "
        "(per fetch actor), plus the two batches the agent has in hand (one parsed, one being written).")
    front_size: int = knob(64, SIZING,
        "Initial required front size (hosts being visited); grows while fetchers wait.")
    max_front_size: int = knob(100_000, SIZING,
        "Upper bound of the required front size.")
    workbench_urls_per_host: int = knob(100, SIZING,
        "URLs of one host kept in Redis; the rest go to the virtualizer on disk (refilled at half). "
        "Redis memory is then bounded by hosts, not URLs (benchmarks/frontier_memory.py).")
    sieve_batch: int = knob(100_000, SIZING,
        "URLs buffered by the sieve before a sorted merge with its on-disk store.")
    url_cache: int = knob(200_000, SIZING,
        "Fingerprints in the sieve's LRU cache of recently seen URLs.")
    batch: int = knob(256, SIZING,
        "URLs per call between actors.")
    drain_linger: float = knob(0.2, SIZING,
        "Seconds a round of the agent's loop lasts at least: once a visit has ended, its drain of "
        "finished visits waits the rest of it for more (up to ``batch``). Each round costs a few "
        "Ray and Redis calls whatever it carries: on a crawl waiting on politeness 0.2 took ~30 % "
        "less CPU than 0, and a fast crawl's rounds take longer anyway (benchmarks/RESULTS.md). "
        "0: rounds as fast as visits end.")
    warc_max_bytes: int = knob(1 << 30, SIZING,
        "WARC file rotation size.")
    progress_interval: float = knob(1.0, SIZING,
        "Seconds between progress lines.")

    def validate(self) -> Settings:
        """Check values; raise UserError naming the bad one. Returns self."""
        for name in ("host_delay", "ip_delay", "proxy_patience", "max_crawl_delay", "delay_factor", "max_adaptive_delay", "connect_timeout", "read_timeout", "retry_backoff",
                     "keepalive_timeout", "ship_seconds", "checkpoint_seconds", "render_wait", "render_timeout"):
            v = getattr(self, name)
            if not isinstance(v, int | float) or not math.isfinite(v) or v < 0:
                raise UserError(f"{name} must be a finite non-negative number, got {v!r}")
        if not isinstance(self.robots_ttl, int | float) or not 0 < self.robots_ttl <= 24 * 3600:
            raise UserError(f"robots_ttl must be more than 0 and at most 86400 seconds (RFC 9309), got {self.robots_ttl!r}")
        if self.requisite_hops not in (0, 1, 2):
            raise UserError(f"requisite_hops must be 0, 1 or 2, got {self.requisite_hops!r}")
        for name in ("max_pages", "max_urls_per_host", "max_retries", "max_idle_connections"):
            if not isinstance(getattr(self, name), int) or getattr(self, name) < 0:
                raise UserError(f"{name} must be a non-negative integer, got {getattr(self, name)!r}")
        for name in ("agents", "fetch_actors", "fetch_concurrency", "max_uncommitted", "front_size", "workbench_urls_per_host", "sieve_batch",
                     "revisit_max_interval", "render_rounds", "render_tabs", "render_browsers", "render_backlog", "render_cache_mb",
                     "url_cache", "batch", "max_body", "max_decompressed", "max_url_length"):
            if not isinstance(getattr(self, name), int) or getattr(self, name) < 1:
                raise UserError(f"{name} must be a positive integer, got {getattr(self, name)!r}")
        from raycrawl.scope_rules import compile_rules

        compile_rules(self.scope_allow, self.scope_deny, self.scope_allow_surts, self.scope_deny_surts)
        if self.out_store is not None:
            from raycrawl.argtypes import check_store_url

            check_store_url(self.out_store, "out_store")
        if self.agent_dir is not None and self.out_store is None:
            raise UserError("agent_dir needs out_store: the object store is where agents without a shared "
                            "out meet (their files, and the shards that move between them)")
        if self.resolve and self.dns_server:
            raise UserError("--resolve and --dns-server are mutually exclusive")
        if self.resolve and not Path(self.resolve).is_file():
            raise UserError(f"hosts file not found: {self.resolve}")
        if self.dns_server:
            parse_hostport(self.dns_server)
        if self.proxy or self.proxy_rules:
            from raycrawl.proxies import ProxyRules

            if self.proxy_credentials_file:  # (the fetch actors read it, wherever they run from)
                self.proxy_credentials_file = str(Path(self.proxy_credentials_file).resolve())
            ProxyRules.of(self)  # (a bad proxy URL or rule, an unreadable credentials file: one line now)
        if self.session_file:
            from raycrawl.site_sessions import SiteSessions

            self.session_file = str(Path(self.session_file).resolve())
            SiteSessions.read(self.session_file)
        if self.focus is not None:
            self.focus = str(Path(self.focus).resolve())  # actors, and a --resume elsewhere, find it
        self.dedup_index = [str(Path(p).resolve()) for p in self.dedup_index or ()]
        missing = [p for p in self.dedup_index if not Path(p).is_file()]
        if missing:
            raise UserError(f"--dedup-index: no such file: {', '.join(missing)}")
        render_pattern(self.render)  # (a bad regular expression: one line)
        if self.render != "never":
            if not self.page_requisites:
                raise UserError("render needs page_requisites: what a page asks for is fetched as its requisites")
            from raycrawl.chromium import find_browser

            find_browser(self.chromium)  # (none: one line before the crawl starts, not a failed render a page)
        if self.revisit:
            self.resume = True  # a pass continues the crawl in out: its Redis, sieve and archive
        if self.allow_networks:
            for cidr in self.allow_networks.split(","):
                try:
                    ipaddress.ip_network(cidr.strip(), strict=False)
                except ValueError:
                    raise UserError(f"bad CIDR in --allow-networks: {cidr.strip()!r}") from None
        return self

    def update(self, values: dict[str, Any], source: str) -> Settings:
        """Overlay ``values`` (None values ignored); unknown keys are a UserError naming ``source``."""
        names = {f.name: f for f in dataclasses.fields(self)}
        for key, value in values.items():
            name = key.replace("-", "_")
            if name not in names:
                raise UserError(f"{source}: unknown setting {key!r}")
            if value is None:
                continue
            current = getattr(self, name)
            if isinstance(current, bool) and not isinstance(value, bool):
                raise UserError(f"{source}: {key} must be true or false")
            if isinstance(current, float) and isinstance(value, int) and not isinstance(value, bool):
                value = float(value)
            setattr(self, name, value)
        return self

    def to_dict(self) -> dict[str, Any]:
        """The settings as they may be shown or written: credentials redacted (core/credentials.py)."""
        from raycrawl.credentials import redact

        return {k: redact(k, v) for k, v in dataclasses.asdict(self).items()}

    def redis_password(self) -> str | None:
        """The Redis password: from ``redis_password_file``, else the environment, else the URL."""
        from raycrawl.credentials import redis_password

        return redis_password(self.redis_password_file, self.redis_url)


def setting_fields() -> list[dataclasses.Field]:
    return list(dataclasses.fields(Settings))


def default_of(f: dataclasses.Field) -> Any:
    return f.default_factory() if f.default_factory is not dataclasses.MISSING else f.default


def show_default(f: dataclasses.Field) -> str:
    value = default_of(f)
    if value is None or value == "":
        return "none"
    if isinstance(value, bool):
        return "on" if value else "off"
    if isinstance(value, list):
        return ",".join(value) if value else "none"
    return str(value)


def markdown() -> str:
    """The settings table of docs/settings.md (tests/test_settings.py keeps that file equal to it)."""
    lines = ["# Crawl settings", "",
             "Generated from `core/settings.py` (`make docs`); every setting is a `raycrawl crawl` flag "
             "(`--host-delay 1.5`; `--no-near-dup` for an on/off one) and a config file key (`host_delay = 1.5`, "
             "in a `[crawl]` table or at the top level).", ""]
    group = None
    for f in setting_fields():
        if f.metadata["group"] != group:
            group = f.metadata["group"]
            lines += ["", f"## {group[0].upper()}{group[1:]}", "", "| setting | default | meaning |", "|---|---|---|"]
        help_text = f.metadata["help"].replace("|", "\\|")
        lines.append(f"| `{f.name}` | `{show_default(f)}` | {help_text} |")
    return "\n".join(lines).replace("\n\n\n", "\n\n") + "\n"


def parse_hostport(s: str) -> tuple[str, int]:
    host, _, port = s.rpartition(":")
    try:
        ipaddress.ip_address(host)
        p = int(port)
        assert 0 < p < 65536
    except (ValueError, AssertionError):
        raise UserError(f"--dns-server must be IP:PORT, got {s!r}") from None
    return host, p


def load_config(path: str | Path) -> dict[str, Any]:
    """Read a TOML or YAML config file into a flat dict (a ``[crawl]`` table/section is accepted)."""
    path = Path(path)
    if not path.is_file():
        raise UserError(f"config file not found: {path}")
    text = path.read_text()
    try:
        if path.suffix == ".toml":
            import tomllib

            data = tomllib.loads(text)
        elif path.suffix in (".yaml", ".yml"):
            import yaml

            data = yaml.safe_load(text) or {}
        else:
            raise UserError(f"config file must end in .toml, .yaml or .yml: {path}")
    except UserError:
        raise
    except Exception as exc:  # noqa: BLE001 - any parse error is the user's file
        raise UserError(f"cannot parse {path}: {exc}") from None
    if not isinstance(data, dict):
        raise UserError(f"{path}: expected a table of settings")
    if isinstance(data.get("crawl"), dict):
        data = data["crawl"]
    return data


def parse_assignment(text: str) -> tuple[str, Any]:
    """``-s KEY=VALUE`` → (field name, value of the field's type). Booleans take true/false/on/off/
    yes/no/1/0, lists comma-separated items, ``none`` (or nothing) unsets an optional setting."""
    key, sep, raw = text.partition("=")
    name = key.strip().replace("-", "_")
    fields = {f.name: f for f in setting_fields()}
    if not sep or name not in fields:
        known = "" if sep else " (expected KEY=VALUE)"
        raise UserError(f"-s {text!r}: unknown setting {key.strip()!r}{known}; `raycrawl settings` lists them")
    kind = str(fields[name].type)
    raw = raw.strip()
    if raw.lower() in ("", "none", "null") and "None" in kind:
        return name, _UNSET
    try:
        if kind.startswith("bool"):
            flag = {"true": True, "on": True, "yes": True, "1": True, "false": False, "off": False, "no": False, "0": False}
            return name, flag[raw.lower()]
        if kind.startswith("int"):
            return name, int(raw.replace("_", ""))
        if kind.startswith("float"):
            return name, float(raw)
        if kind.startswith("list"):
            if raw.startswith("["):  # a JSON array: items that contain commas (SURTs, regexes)
                items = json.loads(raw)
                if not isinstance(items, list) or not all(isinstance(i, str) for i in items):
                    raise ValueError(raw)
                return name, items
            return name, [item.strip() for item in raw.split(",") if item.strip()]
    except (KeyError, ValueError):
        raise UserError(f"-s {name}={raw}: not a valid {kind.replace(' | None', '')}") from None
    return name, raw


_UNSET = object()  # -s key=none: the setting back to None


SPAM_GATE_ENV = "RAYCRAWL_SPAM_GATE"
"""The spam gate model when no config, ``-s`` or flag names one (the ``spam_gate`` setting)."""


def build_settings(config: str | Path | None = None, assignments: list[str] | tuple[str, ...] = (),
                   **overrides: Any) -> Settings:
    """Defaults, then ``config``, then ``-s`` ``assignments``, then ``overrides`` (flags; None
    values mean "not given"), then ``$RAYCRAWL_SPAM_GATE`` for an unset ``spam_gate``.
    ``settings_sources(s)`` says where each value came from."""
    s = Settings()
    sources = {f.name: "default" for f in setting_fields()}
    if config:
        values = load_config(config)
        s.update(values, str(config))
        sources.update({k.replace("-", "_"): f"config {config}" for k, v in values.items() if v is not None})
    for text in assignments:
        name, value = parse_assignment(text)
        if value is _UNSET:
            setattr(s, name, None)
        else:
            s.update({name: value}, f"-s {text}")
        sources[name] = f"-s {text}"
    s.update(overrides, "command line")
    sources.update({k: f"--{k.replace('_', '-')}" for k, v in overrides.items() if v is not None})
    if s.spam_gate is None and os.environ.get(SPAM_GATE_ENV):
        # read here, in the driver: the actors of a cluster the crawl joins do not share its environment
        s.spam_gate = os.environ[SPAM_GATE_ENV]
        sources["spam_gate"] = f"${SPAM_GATE_ENV}"
    s.validate()
    s._sources = sources  # not a field: to_dict() and the docs leave it out
    return s


def settings_sources(s: Settings) -> dict[str, str]:
    """Where each value of a :func:`build_settings` result came from ("default", "config FILE",
    "-s KEY=VALUE", "--flag")."""
    return dict(getattr(s, "_sources", {f.name: "default" for f in setting_fields()}))


def sample_config() -> str:
    """A commented TOML config with every setting at its default (docs/sample-config.toml; `raycrawl
    settings --sample`): uncomment what you change."""
    import json

    lines = ["# raycrawl crawl settings (raycrawl crawl --config THIS_FILE). Every key is also a flag",
             "# (--host-delay 1.5) and a -s assignment (-s host_delay=1.5); `raycrawl settings` prints the",
             "# effective values and where each came from. Generated from core/settings.py (make docs).",
             "", "[crawl]"]
    group = None
    for f in setting_fields():
        if f.metadata["group"] != group:
            group = f.metadata["group"]
            lines += ["", f"# --- {group} " + "-" * (90 - len(group))]
        words, line = f.metadata["help"].replace("``", "`").split(), "#"
        for word in words:
            if len(line) + len(word) > 98:
                lines.append(line)
                line = "#"
            line += " " + word
        lines.append(line)
        value = default_of(f)
        lines.append(f"# {f.name} = " + ("(none)" if value is None else json.dumps(value)))
    return "\n".join(lines) + "\n"
