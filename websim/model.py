"""The synthetic web graph: hosts, pages, links, labels — a pure function of (hosts, ips, seed, epoch).

Nothing here knows the port or renders HTML (see :mod:`websim.render`). Structure:

* Host sizes are power-law (Pareto α≈1.3, scaled to ``pages_per_host_mean``); host popularity is
  Zipf in the host index, so host 0 is the most linked-to. Hosts 0..seeds-1 are the seeds.
* Inside a host, pages form a spanning tree rooted at ``/`` (every page reachable from the home
  page) with local parents, plus power-law extra out-links (Pareto α≈1.6) that stay on the host
  with probability ``intra_host``, mostly to nearby pages; cross-host links go preferentially to
  popular hosts. Every host gets at least one link from an earlier host, so everything is
  reachable from the seeds (robots rules permitting).
* Special hosts (roles) carry the traps, faults, duplicates and spam; special resources (redirect
  chains, 5xx, oversized pages…) are sprinkled on plain hosts.
* Epoch K = epoch K-1 plus edits, link changes, new and removed pages, each drawn from a random
  stream of its own, so epoch 0 is identical whatever K is asked for. Every evolving page changes
  with the same chance per epoch (0.13) unless ``change_rates``: then each page has a chance of its
  own, log-uniform in [0.03, 0.8] (stream "change-rate", keyed by host and path), which the
  manifest gives as ``change_p`` — the ground truth of a periodic crawl's change-rate estimates.
  The epoch streams are read the same way either way.
"""

from __future__ import annotations

import logging
import random
from bisect import bisect_right, insort
from collections.abc import Iterator
from dataclasses import dataclass, field
from itertools import accumulate
from pathlib import Path
from urllib.parse import quote

from raycrawl.websim.robots import KINDS, Rules, rules_for
from raycrawl.websim.vocabulary import Vocabulary, build_vocabulary

log = logging.getLogger(__name__)

#: Address handed out for hosts whose server is down (nothing listens there: connection refused).
DEAD_IP = "127.255.255.254"

ROLES = (
    "plain", "mirror", "near_miss", "exact_mirror", "link_farm", "keyword_stuffing", "copied_content",
    "slow", "hang", "dead", "calendar", "repeat", "session",
)
SPAM_ROLES = ("link_farm", "keyword_stuffing", "copied_content")
FAULT_ROLES = ("slow", "hang", "dead")
TRAP_ROLES = ("calendar", "repeat", "session")
# Share of hosts per special role (at least one each once the web has >= 30 hosts).
_ROLE_SHARE = {
    "mirror": 0.02, "near_miss": 0.01, "exact_mirror": 0.005, "link_farm": 0.012, "keyword_stuffing": 0.01,
    "copied_content": 0.01, "slow": 0.005, "hang": 0.003, "dead": 0.003, "calendar": 0.003, "repeat": 0.003,
    "session": 0.003,
}
# Special resources on plain hosts, per 100 hosts (at least one each).
_RESOURCE_SHARE = {
    "error": 2.0, "reset": 0.5, "redirect_chain": 1.0, "redirect_loop": 0.5, "redirect_cross": 0.5,
    "oversized": 0.3, "chunked_oversized": 0.3, "bomb": 0.2, "binary": 0.5, "pdf": 1.0, "png": 1.0,
    "nxdomain_link": 0.5,
}
_ROBOTS_WEIGHTS = {"missing": 30, "allow_all": 15, "basic": 25, "agent_groups": 5, "agent_excluded": 2,
                   "wildcards": 10, "error_5xx": 3, "redirect": 5, "garbage": 5}
CHARSETS = ("iso-8859-1", "windows-1251", "shift_jis")
#: The non-ASCII query word of a legacy-encoded page's /find link, per charset.
LEGACY_QUERY_WORDS = {"iso-8859-1": "café", "windows-1251": "привет", "shift_jis": "東京"}
SESSION_PARAM = "sid"
#: The host of real pages served beside the generated web (WebModel._add_real_pages), and its robots kind.
REAL_PAGES_HOST = "real-pages.test"
REAL_PAGES_ROBOTS = "real_pages"
#: How a JavaScript web's script-made pages make their content (WebModel._add_scripts).
SCRIPT_KINDS = ("inline", "fetch", "lazy", "infinite", "pushstate", "throws", "alerts", "route")
CALENDAR_ENTRY = "/calendar/2026/01/"


@dataclass(slots=True)
class Page:
    """One URL of a host. ``links`` are (host name, path) targets, unique, in document order."""

    path: str
    kind: str = "html"      # html | pdf | png | binary | redirect | error | reset | oversized | bomb | cut | css | js | font | json
    topic: int = 0
    status: int = 200
    links: list[tuple[str, str]] = field(default_factory=list)
    paras: list[int] = field(default_factory=list)   # paragraph versions (html): an edit bumps one
    labels: list[str] = field(default_factory=list)  # malformed, charset:X, base_href, print_view...
    parent: str | None = None                        # tree parent path (its link is never removed)
    location: tuple[str, str] | None = None          # redirect target
    copy_of: tuple[str, str] | None = None           # exact copy of that page's content
    edit_of: tuple[str, str] | None = None           # near-duplicate of that page...
    edit_words: int = 0                              # ...with this many words replaced
    target_jaccard: float = 1.0                      # the 4-shingle Jaccard the edits aim at
    copied_paras: list[tuple[str, str, int, int]] = field(default_factory=list)  # (host, path, para, version)
    charset: str = "utf-8"
    changed: list[int] = field(default_factory=list)  # epochs in which the content changed
    removed_in: int | None = None
    change_p: float = 0.13                           # chance of an edit or link change per epoch
    embeds: list[tuple[str, str]] = field(default_factory=list)  # page requisites (requisites webs), document order


@dataclass(slots=True)
class Host:
    idx: int
    name: str
    ip: str
    topic: int
    role: str
    robots: str
    crawl_delay: float | None
    pages: dict[str, Page] = field(default_factory=dict)
    mirror_of: str | None = None
    farm: int | None = None  # link-farm group
    robots_partner: str | None = None  # redirect_cross: the host serving this host's robots.txt

    @property
    def spam(self) -> str | None:
        return self.role if self.role in SPAM_ROLES else None

    @property
    def fault(self) -> str | None:
        return self.role if self.role in FAULT_ROLES else None

    @property
    def trap(self) -> str | None:
        return self.role if self.role in TRAP_ROLES else None

    @property
    def rules(self) -> Rules:
        if self.robots == REAL_PAGES_ROBOTS:  # its pages and its root only (WebModel._add_real_pages)
            return Rules(((True, "/$"), *((True, p + "$") for p in self.pages if p != "/"), (False, "/")), False, None)
        return rules_for(self.robots, self.crawl_delay)

    def live_html_paths(self) -> list[str]:
        """Paths of this host's HTML pages not removed by this epoch."""
        return [p for p, pg in self.pages.items() if pg.kind == "html" and pg.removed_in is None]


def repeat_segment(model: WebModel, host: Host) -> str:
    """The two segments a repeat-trap host's relative link keeps appending (``w1/w2/``)."""
    words = model.vocab.topic_words[host.topic]
    return f"{words[5]}/{words[6]}/"


# The /16 the served addresses come from: loopback, or (``--net``) a private network a test made
# of its own, where the crawler runs in other network namespaces (tests/netns_cluster.py).
LOOPBACK_NET = "127.0"


def ip_address(i: int, net: str = LOOPBACK_NET) -> str:
    """The i-th served address: 127.0.1.1, 127.0.1.2, ... (254 per /24, from NET.1.0/24 on)."""
    assert 0 <= i < 254 * 254
    return f"{net}.{1 + i // 254}.{1 + i % 254}"


def check_net(net: str) -> str:
    """``net`` ("A.B") names a /16 of loopback or of private addresses (never the internet's)."""
    import ipaddress

    try:
        network = ipaddress.ip_network(f"{net}.0.0/16")
    except ValueError:
        raise ValueError(f"not the first two numbers of an IPv4 /16: {net!r}") from None
    if not (network.is_loopback or network.is_private):
        raise ValueError(f"{network} is neither loopback nor private: websim serves no other network")
    return net


class WebModel:
    """The deterministic synthetic web. Build with :meth:`generate`."""

    def __init__(self, hosts: int, ips: int, seed: int, epoch: int, pages_per_host_mean: float,
                 vocab: Vocabulary) -> None:
        self.n_hosts, self.n_ips, self.seed, self.epoch = hosts, ips, seed, epoch
        self.pages_per_host_mean = pages_per_host_mean
        self.vocab = vocab
        self.hosts: list[Host] = []
        self.by_name: dict[str, Host] = {}
        self.nxdomain_hosts: list[str] = []
        self.n_seeds = 0
        self.clean = False
        self.change_rates = False
        self.requisites = False
        self.scripts = False
        self.net = LOOPBACK_NET
        self.real_dir: Path | None = None

    # ------------------------------------------------------------------ public
    @classmethod
    def generate(cls, hosts: int = 1000, ips: int = 100, seed: int = 7, epoch: int = 0,
                 pages_per_host_mean: float = 25.0, clean: bool = False, change_rates: bool = False,
                 requisites: bool = False, net: str = LOOPBACK_NET, scripts: bool = False,
                 real_pages: str | Path | None = None) -> WebModel:
        """The web for these parameters (same arguments, same web). ``clean``: a web for measuring
        throughput — plain hosts only (no traps, faults, spam or mirrors), robots.txt allowing
        everything with no Crawl-delay, no special resources and no browser cases.
        ``change_rates``: each page changes with a chance per epoch of its own (module doc).
        ``requisites``: pages need images, stylesheets, scripts and a font to be shown
        (:meth:`_add_requisites`); the rest of the web is the same as without. ``net``: the /16 its
        addresses come from (:func:`ip_address`); the pages are the same on every one.
        ``scripts``: a JavaScript web — some pages' content and links are made by scripts
        (:meth:`_add_scripts`). ``real_pages``: a directory of real sites' pages served beside the
        web on a host of their own (:meth:`_add_real_pages`)."""
        if hosts < 1 or ips < 1 or epoch < 0 or pages_per_host_mean < 1:
            raise ValueError("hosts, ips and pages_per_host_mean must be >= 1 and epoch >= 0")
        if ips > 254 * 254:
            raise ValueError("at most 64516 loopback addresses")
        model = cls(hosts, ips, seed, epoch, pages_per_host_mean, build_vocabulary(seed))
        model.clean, model.change_rates, model.requisites, model.scripts = clean, change_rates, requisites, scripts
        model.net = check_net(net)
        model._build()
        if requisites:
            model._add_requisites()
        if scripts:
            model._add_scripts()
        if change_rates:
            for host in model.hosts:
                for page in host.pages.values():
                    page.change_p = model._change_p(host, page.path)
        for k in range(1, epoch + 1):
            model._evolve(k)
        if real_pages is not None:
            model._add_real_pages(Path(real_pages))
        model._finalize()
        return model

    def seeds(self) -> list[tuple[str, str]]:
        """(host, path) of the seed pages: the home pages of the most popular hosts."""
        return [(h.name, "/") for h in self.hosts[: self.n_seeds]]

    def live_html_pages(self) -> Iterator[tuple[Host, Page]]:
        """(host, page) of every live HTML page of an ordinary host (no trap, no fault): the pages
        whose text a crawl of this epoch archives."""
        for host in self.hosts:
            if host.role not in TRAP_ROLES and not host.fault:
                for path in host.live_html_paths():
                    yield host, host.pages[path]

    def page(self, host: str, path: str) -> Page | None:
        h = self.by_name.get(host)
        return h.pages.get(path) if h else None

    # ------------------------------------------------------------------ build
    def _rng(self, *key: object) -> random.Random:
        return random.Random("|".join(map(str, (self.seed, *key))))

    def _build(self) -> None:
        rng = self._rng("structure")
        H = self.n_hosts
        self.n_seeds = max(1, min(10, H // 20))
        roles = ["plain"] * H
        if H >= 30 and not self.clean:
            pool = list(range(self.n_seeds, H))
            rng.shuffle(pool)
            for role, share in _ROLE_SHARE.items():
                count = max(1, round(share * H))
                if role == "link_farm":
                    count = max(3, count)
                for _ in range(count):
                    if len(pool) <= H // 2:
                        break
                    roles[pool.pop()] = role
        ip_of = list(range(H))
        rng.shuffle(ip_of)
        vocab = self.vocab
        robots_kinds = list(_ROBOTS_WEIGHTS)
        robots_cum = list(accumulate(_ROBOTS_WEIGHTS.values()))
        forced_kinds = list(KINDS)  # every kind appears at least once
        for i in range(H):
            topic = rng.randrange(vocab.topics)
            word = vocab.topic_words[topic][rng.randrange(40)]
            name = f"{'www.' if rng.random() < 0.2 else ''}{word}{i}.test"
            role = roles[i]
            if self.clean:
                robots = "allow_all"
            elif i < self.n_seeds:
                robots = "basic" if i % 2 else "missing"
            elif forced_kinds and role == "plain":
                robots = forced_kinds.pop()
            else:
                robots = robots_kinds[bisect_right(robots_cum, rng.random() * robots_cum[-1])]
            delay = None
            if robots not in ("missing", "error_5xx", "garbage") and rng.random() < 0.12 and not self.clean:
                delay = rng.choice((0.25, 0.5, 1.0))
            ip = DEAD_IP if role == "dead" else ip_address(ip_of[i] % self.n_ips, self.net)
            host = Host(i, name, ip, topic, role, robots, delay)
            self.hosts.append(host)
            self.by_name[name] = host
        self.nxdomain_hosts = [] if self.clean else [f"gone{k}.test" for k in range(max(1, H // 200))]

        sizes = self._host_sizes(rng)
        host_cum = list(accumulate(1.0 / (i + 1) ** 0.9 for i in range(H)))
        for host, size in zip(self.hosts, sizes, strict=True):
            if host.role in ("plain", "keyword_stuffing", "calendar", "repeat", "session", "slow"):
                self._make_pages(host, size if host.role == "plain" else min(size, 15))
            elif host.role in ("hang", "dead"):
                self._make_pages(host, 3)
        for host in self.hosts:
            if host.role == "calendar":
                host.pages["/"].links.append((host.name, CALENDAR_ENTRY))
            elif host.role == "repeat":
                host.pages["/"].links.append((host.name, "/" + repeat_segment(self, host)))
        self._make_link_farms(rng)
        self._make_links(rng, host_cum)
        self._make_mirrors(rng)
        self._make_copied(rng, host_cum)
        if not self.clean:
            self._make_resources(rng)
        self._connect_hosts(rng, host_cum)
        if not self.clean:
            self._make_browser_cases()
            self._make_cut_bodies()

    def _host_sizes(self, rng: random.Random) -> list[int]:
        alpha = 1.3
        raw = [(1.0 - rng.random()) ** (-1.0 / alpha) for _ in range(self.n_hosts)]
        cap = 12 * self.pages_per_host_mean  # the biggest host bounds a polite crawl's length
        scale = self.pages_per_host_mean / (sum(min(r, cap) for r in raw) / len(raw))
        sizes = [max(1, min(int(cap), round(r * scale))) for r in raw]
        # Popular hosts (low index) tend to be big: sort descending, then shuffle lightly.
        sizes.sort(reverse=True)
        for i in range(len(sizes) - 1):
            if rng.random() < 0.3:
                sizes[i], sizes[i + 1] = sizes[i + 1], sizes[i]
        return sizes

    def _make_pages(self, host: Host, n: int) -> None:
        rng = self._rng("pages", host.name)
        words = self.vocab.topic_words[host.topic]
        dirs = ["/"]
        n_dirs = max(1, int(n ** 0.5))
        used: set[str] = set()
        for _ in range(n_dirs - 1):
            parent = rng.choice(dirs)
            d = f"{parent}{rng.choice(words[:200])}/"
            if d not in used:
                used.add(d)
                dirs.append(d)
        if n >= 6:
            dirs += ["/private/", "/tmp/"]
        home = Page("/", topic=host.topic, paras=[0] * rng.randint(2, 4))
        host.pages["/"] = home
        order = ["/"]
        i = 0
        while len(order) < n:
            i += 1
            d = rng.choice(dirs)
            r = rng.random()
            if d == "/private/" and r < 0.4:
                path = f"{d}open-{rng.choice(words)}-{i}.html"
            elif r < 0.05:
                path = f"{d}list?page={i}"
            elif r < 0.07:
                path = f"{d}list?sort=name&page={i}"
            elif r < 0.09:
                path = f"{d}{rng.choice(words)}-{i}/"
            else:
                path = f"{d}{rng.choice(words)}-{i}.html"
            if path in host.pages:
                continue
            topic = host.topic if rng.random() < 0.9 else rng.randrange(self.vocab.topics)
            k = len(order)
            # Local parents: mostly one of the few pages created just before.
            parent = order[rng.randrange(max(0, k - 6), k)] if rng.random() < 0.7 else order[rng.randrange(k)]
            page = Page(path, topic=topic, paras=[0] * rng.randint(2, 5), parent=parent)
            if rng.random() < 0.03:
                page.labels.append("malformed")
            if rng.random() < 0.05:
                page.labels.append("base_href")
            if host.role == "plain" and rng.random() < 0.02:
                page.charset = rng.choice(CHARSETS)
                page.labels.append(f"charset:{page.charset}")
                if rng.random() < 0.5:
                    page.labels.append("charset_in_meta_only")
            host.pages[path] = page
            host.pages[parent].links.append((host.name, path))
            order.append(path)
        if host.role == "plain" and n >= 8 and rng.random() < 0.5:
            # A printer-friendly view: same text, different markup and URL (an exact duplicate).
            src = order[rng.randrange(1, len(order))]
            view = f"{src.split('?')[0]}?view=print"
            if view not in host.pages:
                host.pages[view] = Page(view, topic=host.pages[src].topic, copy_of=(host.name, src),
                                        labels=["print_view"])
                host.pages[src].links.append((host.name, view))

    def _make_link_farms(self, rng: random.Random) -> None:
        farm_hosts = [h for h in self.hosts if h.role == "link_farm"]
        groups = [farm_hosts[i: i + 4] for i in range(0, len(farm_hosts), 4)]
        for g, group in enumerate(groups):
            for h in group:
                h.farm = g
                self._make_pages(h, rng.randint(15, 30))
            targets = [(h.name, p) for h in group for p in h.pages]
            boosted = (group[0].name, "/")
            for h in group:
                for page in h.pages.values():
                    for t in rng.sample(targets, min(len(targets), 15)):
                        if t not in page.links and t != (h.name, page.path):
                            page.links.append(t)
                    if boosted not in page.links and boosted != (h.name, page.path):
                        page.links.append(boosted)

    def _make_links(self, rng: random.Random, host_cum: list[float]) -> None:
        content = [h for h in self.hosts if h.pages and h.role not in ("link_farm",)]
        linkable = [h for h in self.hosts if h.pages]
        # Topical locality (Davison 2000): half the cross-host links stay within the topic, again
        # preferring popular hosts. Focused crawls rely on it.
        by_topic: dict[int, list[Host]] = {}
        for h in linkable:
            if h.role == "plain":
                by_topic.setdefault(h.topic, []).append(h)
        topic_cum = {t: list(accumulate(1.0 / (h.idx + 1) ** 0.9 for h in hs)) for t, hs in by_topic.items()}
        for host in content:
            paths = list(host.pages)
            n = len(paths)
            for k, path in enumerate(paths):
                page = host.pages[path]
                if page.copy_of:
                    continue
                degree = min(150, int(3 * (1.0 - rng.random()) ** (-1.0 / 1.6)))
                for _ in range(max(0, degree - len(page.links))):
                    if rng.random() < 0.88 or len(linkable) == 1:
                        j = min(n - 1, max(0, k + rng.randint(-8, 8))) if rng.random() < 0.6 else rng.randrange(n)
                        target = (host.name, paths[j])
                    else:
                        same = by_topic.get(host.topic)
                        if same and rng.random() < 0.5:
                            cum = topic_cum[host.topic]
                            other = same[bisect_right(cum, rng.random() * cum[-1])]
                        else:
                            other = self.hosts[bisect_right(host_cum, rng.random() * host_cum[-1])]
                        if not other.pages or other is host:
                            continue
                        tp = "/" if rng.random() < 0.4 else rng.choice(list(other.pages))
                        target = (other.name, tp)
                    if target != (host.name, path) and target not in page.links:
                        page.links.append(target)

    @staticmethod
    def _pick_origin(rng: random.Random, origins: list[Host], taken: list[int]) -> Host | None:
        """A random host of the first half of ``origins`` not yet ``taken`` (sorted indexes into
        ``origins``), as ``rng.choice`` of that half would pick it — without rebuilding the list
        for every mirror, which made a 100,000-host web take a quarter of an hour."""
        left = len(origins) - len(taken)
        if left <= 0:
            return None
        k = rng.randrange(max(1, left // 2))  # the draw rng.choice makes over a list of that length
        for t in taken:  # the k-th index not taken: step over the taken ones below it
            if t <= k:
                k += 1
            else:
                break
        return origins[k]

    def _make_mirrors(self, rng: random.Random) -> None:
        origins = [h for h in self.hosts if h.role == "plain" and 3 <= len(h.pages) <= 80]
        position = {h.name: i for i, h in enumerate(origins)}
        taken_idx: list[int] = []
        taken: set[str] = set()
        for host in self.hosts:
            if host.role not in ("mirror", "near_miss", "exact_mirror"):
                continue
            origin = self._pick_origin(rng, origins, taken_idx)
            if origin is None:
                host.role = "plain"
                self._make_pages(host, 5)
                # a new plain host can be an origin too, in its place among the hosts
                origins = [h for h in self.hosts if h.role == "plain" and 3 <= len(h.pages) <= 80]
                position = {h.name: i for i, h in enumerate(origins)}
                taken_idx = sorted(position[n] for n in taken)
                continue
            taken.add(origin.name)
            insort(taken_idx, position[origin.name])
            host.mirror_of, host.topic = origin.name, origin.topic
            order = [p for p, pg in origin.pages.items() if pg.kind == "html" and not pg.copy_of]
            copied = set(order)
            # Targets evenly spread over the range (shuffled), so every mirror covers all of it.
            lo, hi = (0.90, 0.99) if host.role == "mirror" else (0.5, 0.85)
            targets = [lo + (hi - lo) * (k + 0.5) / len(order) for k in range(len(order))]
            rng.shuffle(targets)
            for path, target in zip(order, targets, strict=True):
                src = origin.pages[path]
                page = Page(path, topic=src.topic, parent=src.parent, paras=[],
                            labels=[lab for lab in src.labels if lab in ("base_href",)])
                page.links = [((host.name if (h == origin.name and p in copied) else h), p) for h, p in src.links]
                if host.role == "exact_mirror":
                    page.copy_of = (origin.name, path)
                else:
                    page.edit_of = (origin.name, path)  # edit_words fixed later by the renderer
                    page.target_jaccard = target
                host.pages[path] = page

    def _make_copied(self, rng: random.Random, host_cum: list[float]) -> None:
        sources = [(h.name, p) for h in self.hosts[: max(3, self.n_hosts // 10)] if h.role == "plain"
                   for p, pg in h.pages.items() if pg.kind == "html" and not pg.copy_of]
        for host in self.hosts:
            if host.role != "copied_content":
                continue
            if not sources:
                host.role = "plain"
                self._make_pages(host, 5)
                continue
            n = rng.randint(8, 20)
            home = Page("/", topic=host.topic, paras=[0, 0])
            host.pages["/"] = home
            for i in range(1, n):
                path = f"/article-{i}.html"
                page = Page(path, topic=host.topic, parent="/")
                if rng.random() < 0.3:
                    page.copy_of = rng.choice(sources)   # verbatim copy: an exact duplicate
                else:
                    for _ in range(rng.randint(2, 4)):
                        h, p = rng.choice(sources)
                        src = self.by_name[h].pages[p]
                        i = rng.randrange(len(src.paras))
                        page.copied_paras.append((h, p, i, src.paras[i]))  # a copy taken now: static
                    page.links = [rng.choice(sources) for _ in range(3)]
                home.links.append((host.name, path))
                host.pages[path] = page

    def _make_resources(self, rng: random.Random) -> None:
        plain = [h for h in self.hosts if h.role == "plain" and h.robots not in ("error_5xx", "agent_excluded")]
        if not plain:
            return
        per = self.n_hosts / 100
        for kind, share in _RESOURCE_SHARE.items():
            for k in range(max(1, round(share * per))):
                host = rng.choice(plain)
                src = rng.choice([p for p, pg in host.pages.items() if pg.kind == "html" and not pg.copy_of])
                new: list[Page] = []
                match kind:
                    case "error":
                        status = rng.choice((500, 502, 503))
                        new.append(Page(f"/err/e{k}-{status}.html", kind="error", status=status))
                    case "reset":
                        new.append(Page(f"/err/reset{k}.html", kind="reset", status=0))
                    case "redirect_chain":
                        length = rng.randint(2, 7)
                        final = rng.choice([p for p in host.pages if host.pages[p].kind == "html"])
                        for s in range(length, 0, -1):
                            nxt = f"/go/chain{k}/{s - 1}" if s > 1 else final
                            new.append(Page(f"/go/chain{k}/{s}", kind="redirect", status=rng.choice((301, 302, 307, 308)),
                                            location=(host.name, nxt), labels=[f"redirect_chain:{length}"]))
                    case "redirect_loop":
                        a, b = f"/go/loop{k}/a", f"/go/loop{k}/b"
                        new.append(Page(a, kind="redirect", status=302, location=(host.name, b), labels=["redirect_loop"]))
                        new.append(Page(b, kind="redirect", status=302, location=(host.name, a), labels=["redirect_loop"]))
                    case "redirect_cross":
                        other = rng.choice(plain)
                        new.append(Page(f"/go/away{k}", kind="redirect", status=301, location=(other.name, "/"),
                                        labels=["redirect_cross_host"]))
                    case "oversized":
                        new.append(Page(f"/big/huge{k}.html", kind="oversized", labels=["content_length"]))
                    case "chunked_oversized":
                        new.append(Page(f"/big/stream{k}.html", kind="oversized", labels=["chunked"]))
                    case "bomb":
                        new.append(Page(f"/big/bomb{k}.html", kind="bomb"))
                    case "binary":
                        new.append(Page(f"/files/blob{k}.html", kind="binary"))
                    case "pdf":
                        new.append(Page(f"/docs/paper{k}.pdf", kind="pdf"))
                    case "png":
                        new.append(Page(f"/img/figure{k}.png", kind="png"))
                    case "nxdomain_link":
                        host.pages[src].links.append((self.nxdomain_hosts[k % len(self.nxdomain_hosts)], "/"))
                for page in new:
                    if page.path in host.pages:
                        continue
                    page.topic = host.topic
                    host.pages[page.path] = page
                if new and new[0].path in host.pages:
                    host.pages[src].links.append((host.name, new[0].path))

    def _make_cut_bodies(self) -> None:
        """Servers that cut a body short (a stream of its own, so the rest of the web is unchanged):
        per 100 hosts, one page whose ``Content-Length`` promises more than is sent before the
        connection closes, and one whose chunked stream breaks off (no last chunk). A crawler must
        archive what arrived as cut (WARC-Truncated), never as the whole page."""
        rng = self._rng("cut-bodies")
        plain = [h for h in self.hosts if h.role == "plain" and h.robots not in ("error_5xx", "agent_excluded")]
        for k in range(max(1, round(self.n_hosts / 100))):
            for label in ("content_length", "chunked"):
                host = rng.choice(plain)
                src = rng.choice([p for p, pg in host.pages.items() if pg.kind == "html" and not pg.copy_of])
                path = f"/cut/{label}{k}.html"
                if path not in host.pages:
                    host.pages[path] = Page(path, kind="cut", topic=host.topic, paras=[0, 0], parent=src,
                                            labels=[label])
                    host.pages[src].links.append((host.name, path))

    def _make_browser_cases(self) -> None:
        """What a crawler must read as browsers and RFC 9309 do (a stream of its own: the rest of the
        web is the same with or without it). Each case binds the crawler to rules or URLs that a
        sloppy reading gets wrong, so the audit of a real crawl catches the mistake:

        * robots.txt served by a "basic" host in a form the rules must survive (kinds of
          :data:`websim.robots.BROWSER_KINDS`: a redirect to another authority, a truncated
          byte-order mark, a ``ray`` group that is not ours, a 503 before the file);
        * a redirect whose ``Location`` is Latin-1 bytes (``/caf\xe9K.html``: a browser goes to
          ``/caf%E9K.html``);
        * ``/index.html`` on some hosts: the same bytes as ``/`` (a byte-identical duplicate);
        * on pages in a legacy encoding, a link whose query has non-ASCII text (a browser encodes it
          in the page's encoding: ``/find?q=caf%E9``, not UTF-8).
        Link spellings only a browser reads right (backslashes, ``///host``) and refresh metas
        without a URL are markup: :mod:`websim.render` adds them."""
        from raycrawl.websim.robots import BROWSER_KINDS

        rng = self._rng("browser")
        per = max(1, round(self.n_hosts / 100))
        plain = [h for h in self.hosts if h.role == "plain" and h.robots not in ("error_5xx", "agent_excluded")]
        plain_ids = {id(h) for h in plain}  # (``h in plain`` compares dataclasses: quadratic in hosts)
        basic = [h for h in self.hosts[self.n_seeds:] if id(h) in plain_ids and h.robots == "basic"]
        rng.shuffle(basic)
        # hosts with /private/ pages first: there a wrong reading fetches what the rules forbid
        basic.sort(key=lambda h: not any(p.startswith("/private/") for p in h.pages))
        by_ip: dict[str, list[Host]] = {}
        for h in plain:
            by_ip.setdefault(h.ip, []).append(h)
        for host, kind in zip(basic, BROWSER_KINDS * per, strict=False):
            host.robots = kind
            if kind == "redirect_cross":
                same_ip = [h for h in by_ip[host.ip] if h is not host]
                host.robots_partner = rng.choice(same_ip if same_ip and rng.random() < 0.5
                                                 else [h for h in plain if h is not host]).name
        for k in range(per):
            host = rng.choice(plain)
            src = rng.choice([p for p, pg in host.pages.items() if pg.kind == "html" and not pg.copy_of])
            target = f"/caf%E9{k}.html"
            host.pages[target] = Page(target, topic=host.topic, paras=[0, 0], parent=src)
            host.pages[f"/go/latin{k}"] = Page(f"/go/latin{k}", kind="redirect", status=302, topic=host.topic,
                                               location=(host.name, target), labels=["location_latin1"])
            host.pages[src].links.append((host.name, f"/go/latin{k}"))
        for host in self._rng("browser", "same_bytes").sample(plain, min(len(plain), 2 * per)):
            # /index.html answering the very bytes of /: the one duplicate a WARC may record as a revisit
            if "/index.html" not in host.pages and host.pages["/"].kind == "html":
                host.pages["/index.html"] = Page("/index.html", topic=host.topic, copy_of=(host.name, "/"),
                                                 labels=["same_bytes"], parent="/")
                host.pages["/"].links.append((host.name, "/index.html"))
        for host in self.hosts:
            for page in list(host.pages.values()):
                if page.kind == "html" and page.charset != "utf-8" and not page.copy_of:
                    word = LEGACY_QUERY_WORDS[page.charset]
                    path = "/find?q=" + quote(word.encode(page.charset), safe="")
                    if path not in host.pages:
                        host.pages[path] = Page(path, topic=host.topic, paras=[0], parent=page.path,
                                                labels=[f"legacy_query:{page.charset}"])
                    page.links.append((host.name, path))

    def _connect_hosts(self, rng: random.Random, host_cum: list[float]) -> None:
        """Give every host an inbound link from an earlier content host, so the seeds reach it."""
        donors: list[Host] = []
        for host in self.hosts:
            if host.idx >= self.n_seeds and host.pages and donors:
                k = bisect_right(host_cum, rng.random() * host_cum[len(donors) - 1])
                donor = donors[min(k, len(donors) - 1)]
                pages = [p for p in donor.pages.values() if p.kind == "html" and not p.copy_of]
                src = rng.choice(pages)
                if (host.name, "/") not in src.links:
                    src.links.append((host.name, "/"))
            if host.role in ("plain", "keyword_stuffing") and host.pages:
                donors.append(host)

    def _add_requisites(self) -> None:
        """What the HTML pages of plain hosts need to be shown, as real sites have it: each host's
        stylesheet (``/static/site.css``, which ``@import``s ``/static/base.css`` and has a
        background image), its script, its logo (with a 2x ``srcset`` alternate) and, on about
        half its pages, a content image; and from a shared "CDN" host (the last plain host) a
        library script and a web font that every host's ``base.css`` names. Drawn from their own
        random stream, so the web's pages and links are those of the same seed without."""
        rng = self._rng("requisites")
        plain = [h for h in self.hosts if h.role == "plain"]
        if not plain:
            return
        cdn = plain[-1]
        font, lib = (cdn.name, "/fonts/shared.woff"), (cdn.name, "/lib/shared.js")
        cdn.pages[font[1]] = Page(font[1], kind="font", topic=cdn.topic)
        cdn.pages[lib[1]] = Page(lib[1], kind="js", topic=cdn.topic)
        for host in plain:
            own = {path: Page(path, kind=kind, topic=host.topic) for path, kind in (
                ("/static/site.css", "css"), ("/static/base.css", "css"), ("/static/bg.png", "png"),
                ("/static/app.js", "js"), ("/static/logo.png", "png"), ("/static/logo@2x.png", "png"))}
            own["/static/site.css"].embeds = [(host.name, "/static/base.css"), (host.name, "/static/bg.png")]
            own["/static/base.css"].embeds = [font]
            html_pages = [pg for pg in host.pages.values() if pg.kind == "html"]
            for k, page in enumerate(html_pages):
                page.embeds = [(host.name, "/static/site.css"), lib, (host.name, "/static/app.js"),
                               (host.name, "/static/logo.png"), (host.name, "/static/logo@2x.png")]
                if rng.random() < 0.5:
                    figure = f"/static/figure{k}.png"
                    own[figure] = Page(figure, kind="png", topic=host.topic)
                    page.embeds.append((host.name, figure))
            for path, page in own.items():
                host.pages.setdefault(path, page)

    def _add_scripts(self) -> None:
        """A JavaScript web (issue 52): on plain hosts about a third of the HTML pages are served as
        an empty application root that scripts fill with the page's content — its text and links,
        which the markup sent does not have (labels ``js:KIND``, websim.render):

        * ``inline``: an inline script writes the content;
        * ``fetch``: a script loads it with ``fetch()`` from a JSON endpoint (``/api/contentN.json``,
          kind ``json``), which the page's markup does not name;
        * ``lazy``: written at once, and an image (``/static/lazyN.png``) loads when scrolled to;
        * ``infinite``: the first links at once, the others appended as the reader scrolls;
        * ``pushstate``: a client-side route (``history.pushState``) before the content;
        * ``throws``: a script writes the content, then throws;
        * ``alerts``: an alert and a confirm before the content;
        * ``route``: a client-side route of its host's application — every such page of a host
          serves the very same shell, and the application's script (``/static/appN.js``, label
          ``routes``) makes each route's page from the URL it is at (so a crawler that takes
          byte-identical pages for one page misses all but one).

        And per 100 hosts one page that never stops loading (``js:hangs``) and one that exhausts
        the browser's memory (``js:eats``), leaves with no links (``/js/hangsN.html``,
        ``/js/eatsN.html``). Drawn from their own random stream: the rest of the web is unchanged."""
        rng = self._rng("scripts")
        plain = [h for h in self.hosts if h.role == "plain" and h.robots not in ("error_5xx", "agent_excluded")]
        if not plain:
            return
        n = 0
        for host in plain:
            routes = 0
            for page in list(host.pages.values()):
                eligible = not (page.kind != "html" or page.copy_of or page.edit_of or page.charset != "utf-8"
                                or page.labels or host.mirror_of)
                if routes == 1 and eligible:  # (an application has two routes at least)
                    page.labels.append("js:route")
                    routes += 1
                    continue
                if not eligible or rng.random() >= 1 / 3:
                    continue
                kind = SCRIPT_KINDS[n % len(SCRIPT_KINDS)]
                routes += kind == "route"
                page.labels.append(f"js:{kind}")
                if kind == "fetch":
                    path = f"/api/content{n}.json"
                    host.pages[path] = Page(path, kind="json", topic=host.topic, parent=page.path,
                                            labels=[f"content_of:{page.path}"])
                elif kind == "lazy":
                    path = f"/static/lazy{n}.png"
                    host.pages[path] = Page(path, kind="png", topic=host.topic, parent=page.path)
                elif kind == "route" and not any("routes" in p.labels for p in host.pages.values()):
                    path = f"/static/app{host.idx}.js"
                    host.pages[path] = Page(path, kind="js", topic=host.topic, parent=page.path, labels=["routes"])
                n += 1
        for k in range(max(1, round(self.n_hosts / 100))):
            for kind in ("hangs", "eats"):
                host = rng.choice(plain)
                src = rng.choice([p for p, pg in host.pages.items() if pg.kind == "html" and not pg.copy_of])
                path = f"/js/{kind}{k}.html"
                if path not in host.pages:
                    host.pages[path] = Page(path, topic=host.topic, paras=[0], parent=src, labels=[f"js:{kind}"])
                    host.pages[src].links.append((host.name, path))

    def _add_real_pages(self, directory: Path) -> None:
        """Real sites' pages (``NAME.html.gz`` in ``directory``, gzipped as they were saved; with
        ``languages.tsv``, ``NAME<TAB>language`` lines, the language of each) served unchanged as
        ``/pages/NAME.html`` by a host of their own on the first host's address, whose home page
        links them and is linked from the first seed's. Its robots.txt allows those pages and the
        home page only: the links inside real pages (their own sites' paths, other sites) lead to
        nothing the manifest knows, so a crawl follows none to this web (other names do not resolve).
        The generated web is otherwise the same (the first seed's home page has one link more)."""
        files = sorted(directory.glob("*.html.gz"))
        if not files:
            raise ValueError(f"no NAME.html.gz pages in {directory}")
        langs = {}
        if (directory / "languages.tsv").is_file():
            for line in (directory / "languages.tsv").read_text(encoding="utf-8").splitlines():
                if line and not line.startswith("#") and "\t" in line:
                    name, lang = line.split("\t")[:2]
                    langs[name] = lang.strip()
        host = Host(len(self.hosts), REAL_PAGES_HOST, self.hosts[0].ip, self.hosts[0].topic, "real",
                    REAL_PAGES_ROBOTS, None)
        names = [f.name[: -len(".html.gz")] for f in files]
        host.pages["/"] = Page("/", topic=host.topic, paras=[0, 0],
                               links=[(host.name, f"/pages/{n}.html") for n in names])
        for n in names:
            host.pages[f"/pages/{n}.html"] = Page(f"/pages/{n}.html", kind="real", topic=host.topic, parent="/",
                                                  labels=[f"real:{n}", *([f"lang:{langs[n]}"] if n in langs else [])])
        self.hosts.append(host)
        self.by_name[host.name] = host
        self.hosts[0].pages["/"].links.append((host.name, "/"))
        self.real_dir = directory

    def _finalize(self) -> None:
        """Copies and mirrors follow their source's links as of this epoch (so exact copies stay exact)."""
        for host in self.hosts:
            for page in host.pages.values():
                src_key = page.copy_of or page.edit_of
                if src_key is None or host.role == "copied_content":
                    continue
                src = self.by_name[src_key[0]].pages[src_key[1]]
                page.changed = list(src.changed)  # copies and mirrors change with their source
                if host.mirror_of:
                    page.links = [((host.name if (h == src_key[0] and p in host.pages) else h), p)
                                  for h, p in src.links]
                else:
                    page.links = list(src.links)  # a print view keeps even the link to itself
            if host.role == "copied_content":
                for page in host.pages.values():
                    if page.copy_of:
                        src = self.by_name[page.copy_of[0]].pages[page.copy_of[1]]
                        page.links, page.changed = list(src.links), list(src.changed)

    # ------------------------------------------------------------------ epochs
    # Per epoch and page, the chance that a cross-host link is added / dropped: honest sites change
    # their links to other sites slowly, link farms rewire much of theirs (they join other farms and
    # drop members as they are found out) — the temporal link signal of seed 003 §3.1, noisy on both
    # sides so that it separates the classes only partly.
    HONEST_LINK_CHURN = 0.03
    FARM_LINK_CHURN = 0.25

    def _evolve(self, k: int) -> None:
        self._evolve_pages(k)
        if not self.clean:
            self._evolve_cross_links(k)

    def _evolve_cross_links(self, k: int) -> None:
        """Links between hosts change (their own random stream: the page edits of an epoch are the
        same as before this existed)."""
        rng = self._rng("epoch-links", k)
        honest = [h for h in self.hosts if h.role in ("plain", "keyword_stuffing") and h.pages]
        farms = [h for h in self.hosts if h.role == "link_farm" and h.pages]

        for host in [*honest, *farms]:
            churn = self.FARM_LINK_CHURN if host.role == "link_farm" else self.HONEST_LINK_CHURN
            pool = farms if host.role == "link_farm" and rng.random() < 0.8 else honest
            for path in host.live_html_paths():
                page = host.pages[path]
                before = list(page.links)
                if rng.random() < churn:
                    away = [t for t in page.links if t[0] != host.name]
                    if away:
                        page.links.remove(rng.choice(away))
                if rng.random() < churn and len(pool) > 1:
                    other = rng.choice(pool)
                    paths = other.live_html_paths() if other is not host else []
                    if paths:
                        target = (other.name, rng.choice(paths))
                        if target not in page.links:
                            page.links.append(target)
                if page.links != before and page.changed[-1:] != [k]:
                    page.changed.append(k)

    CHANGE_P_RANGE = (0.03, 0.8)

    def _change_p(self, host: Host, path: str) -> float:
        """A page's own chance of changing per epoch (log-uniform in CHANGE_P_RANGE)."""
        lo, hi = self.CHANGE_P_RANGE
        return lo * (hi / lo) ** self._rng("change-rate", host.name, path).random()

    def _evolve_pages(self, k: int) -> None:
        rng = self._rng("epoch", k)
        for host in self.hosts:
            if host.role not in ("plain", "keyword_stuffing", "copied_content", "session", "calendar", "repeat"):
                continue
            paths = host.live_html_paths()
            for path in paths:
                page = host.pages[path]
                r = rng.random()
                # The edit / link-change / removal thresholds, scaled to the page's own chance
                # (0.08 / 0.13 / 0.135 when every page has the same).
                p = page.change_p
                edit, link, gone = (0.08, 0.13, 0.135) if not self.change_rates else (p * 8 / 13, p, p + 0.005)
                if r < edit and page.paras:
                    page.paras[rng.randrange(len(page.paras))] += 1
                    page.changed.append(k)
                elif r < link:
                    before = list(page.links)
                    removable = [t for t in page.links if t[0] == host.name and host.pages.get(t[1]) is not None
                                 and host.pages[t[1]].parent != path]
                    if removable:
                        page.links.remove(rng.choice(removable))
                    target = (host.name, rng.choice(paths))
                    if target != (host.name, path) and target not in page.links:
                        page.links.append(target)
                    if page.links != before:
                        page.changed.append(k)
                elif r < gone and path != "/" and not any(
                        q.parent == path for q in host.pages.values() if q.removed_in is None):
                    page.removed_in, page.status = k, 404
            n_new = sum(1 for _ in range(len(paths)) if rng.random() < 0.03)
            for j in range(n_new):
                parent = rng.choice(paths)
                word = rng.choice(self.vocab.topic_words[host.topic][:200])
                path = f"/new/e{k}/{word}-{j}.html"
                if path in host.pages:
                    continue
                host.pages[path] = Page(path, topic=host.topic, paras=[k] * rng.randint(2, 4), parent=parent,
                                        changed=[k])
                if self.change_rates:
                    host.pages[path].change_p = self._change_p(host, path)
                host.pages[parent].links.append((host.name, path))
                host.pages[parent].changed.append(k)

