"""websim generation, checked without a server: determinism, graph shape, link forms, topics,
duplicates, spam and epochs — each against the manifest, through the project's text pipeline."""

from __future__ import annotations

from collections import Counter
from functools import lru_cache

import pytest
from selectolax.lexbor import LexborHTMLParser

from raycrawl import text
from raycrawl.urls import canonicalize
from raycrawl.websim.manifest import build_records
from raycrawl.websim.model import SESSION_PARAM, WebModel
from raycrawl.websim.render import Renderer
from raycrawl.websim.vocabulary import build_vocabulary

PORT = 8123


@lru_cache(maxsize=4)
def web(hosts: int = 60, seed: int = 1, epoch: int = 0, port: int = PORT) -> tuple[WebModel, Renderer, dict]:
    model = WebModel.generate(hosts=hosts, ips=4, seed=seed, epoch=epoch)
    renderer = Renderer(model, port)
    records = build_records(model, renderer)
    pages = {r["url"]: r for r in records if r["type"] == "page"}
    hosts_ = {r["host"]: r for r in records if r["type"] == "host"}
    clusters = [r for r in records if r["type"] == "cluster"]
    return model, renderer, {"meta": records[0], "pages": pages, "hosts": hosts_, "clusters": clusters}


def html_of(model: WebModel, renderer: Renderer, url: str) -> str:
    host, path = url.split("/", 3)[2].split(":")[0], "/" + url.split("/", 3)[3]
    h = model.by_name[host]
    return renderer.html(h, h.pages[path])


def extracted_links(html: str, page_url: str, encoding: str | None = None) -> list[str]:
    """What a browser resolves: hrefs against <base href> or the page URL, a query in the page's encoding."""
    tree = LexborHTMLParser(html)
    base_node = tree.css_first("base[href]")
    base = canonicalize(base_node.attributes["href"], page_url) if base_node else page_url
    out = []
    for a in tree.css("a[href]"):
        u = canonicalize(a.attributes["href"], base, encoding)
        if u is not None:
            out.append(u)
    return out


def strip_sid(url: str) -> str:
    base, _, query = url.partition("?")
    kept = [p for p in query.split("&") if p and not p.startswith(SESSION_PARAM + "=")]
    return base + ("?" + "&".join(kept) if kept else "")


def test_same_parameters_same_web_and_seed_changes_it():
    def records(seed):
        model = WebModel.generate(hosts=30, ips=4, seed=seed)
        return build_records(model, Renderer(model, PORT))

    a = records(1)
    assert records(1) == a
    assert records(2) != a


def test_deterministic_across_processes_whatever_the_hash_seed():
    import os
    import subprocess
    import sys

    code = ("import hashlib, json; from raycrawl.websim.model import WebModel; from raycrawl.websim.render import Renderer; "
            "from raycrawl.websim.manifest import build_records; m = WebModel.generate(hosts=40, ips=3, seed=9, epoch=1); "
            "print(hashlib.sha256(json.dumps(build_records(m, Renderer(m, 8000))).encode()).hexdigest())")
    digests = {subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                              env={**os.environ, "PYTHONHASHSEED": str(k)}).stdout for k in (1, 2)}
    assert len(digests) == 1


def test_canonical_urls_and_hosts_on_loopback_test_tld():
    model, _, m = web()
    for url in m["pages"]:
        assert canonicalize(url) == url
    for name, rec in m["hosts"].items():
        assert name.endswith(".test") and rec["ip"].startswith("127.")
        assert rec["ip"] != "127.0.0.1"
    ips = Counter(rec["ip"] for rec in m["hosts"].values() if rec["fault"] != "dead")
    assert len(ips) == 4 and min(ips.values()) >= 5  # many hosts per IP


def test_every_link_form_resolves_to_the_manifest_links():
    model, renderer, m = web()
    forms = Counter()
    checked = 0
    for url, rec in m["pages"].items():
        if rec["kind"] != "html":
            continue
        html = html_of(model, renderer, url)
        charset = next((lab.split(":", 1)[1] for lab in rec["labels"] if lab.startswith("charset:")), None)
        got = extracted_links(html, url, charset)
        if m["hosts"][rec["host"]]["trap"] and m["hosts"][rec["host"]]["trap"]["kind"] == "session":
            got = [strip_sid(u) for u in got]
        assert list(dict.fromkeys(got)) == rec["links"], url
        checked += 1
        tree = LexborHTMLParser(html)
        forms["base"] += bool(tree.css_first("base[href]"))
        for a in tree.css("a[href]"):
            href = a.attributes["href"]
            forms["../"] += href.startswith("../")
            forms["./"] += href.startswith("./")
            forms["fragment"] += "#" in href
            forms["protocol-relative"] += href.startswith("//")
            forms["root-relative"] += href.startswith("/") and not href.startswith("//")
            forms["query"] += "?" in href
            forms["escaped"] += "%" in href
            forms["explicit port"] += f":{PORT}/" in href
            forms["mixed-case host"] += href.startswith("http://") and href.split("/")[2] != href.split("/")[2].lower()
            forms["plain relative"] += not href.startswith(("/", ".", "http", "#", "mailto", "javascript"))
    assert checked > 500
    assert all(forms[f] > 0 for f in ("base", "../", "./", "fragment", "protocol-relative", "root-relative", "query",
                                      "escaped", "explicit port", "mixed-case host", "plain relative")), forms


def test_default_port_written_explicitly_when_serving_on_80():
    model, renderer, m = web(port=80)
    assert all(":80/" not in u for u in m["pages"])
    hrefs = [a.attributes["href"] for u, r in list(m["pages"].items())[:400] if r["kind"] == "html"
             for a in LexborHTMLParser(html_of(model, renderer, u)).css("a[href]")]
    assert any(":80/" in h for h in hrefs)


def test_graph_shape_power_laws_locality_preferential_attachment():
    model, _, m = web(hosts=200)
    html = [r for r in m["pages"].values() if r["kind"] == "html"]
    degrees = sorted(len(r["links"]) for r in html)
    mean = sum(degrees) / len(degrees)
    assert degrees[-1] > 8 * mean  # heavy tail
    sizes = sorted((rec["pages"] for rec in m["hosts"].values() if rec["role"] == "plain"), reverse=True)
    assert sizes[0] > 8 * (sum(sizes) / len(sizes))
    intra = sum(1 for r in html for u in r["links"] if u.split("/")[2] == r["url"].split("/")[2])
    total = sum(len(r["links"]) for r in html)
    assert intra / total > 0.7
    inlinks = Counter(u.split("/")[2] for r in html for u in r["links"] if u.split("/")[2] != r["url"].split("/")[2])
    top = sum(c for _, c in inlinks.most_common(len(m["hosts"]) // 10))
    assert top / sum(inlinks.values()) > 0.3  # the top 10% of hosts get a big share of cross-host links


def test_everything_reachable_from_the_seeds():
    from raycrawl.websim.manifest import Manifest

    _, _, m = web()
    man = Manifest(m["meta"], m["hosts"], m["pages"], m["clusters"])
    everything = man.reachable(obey_robots=False)
    expandable = {u for u, r in m["pages"].items() if m["hosts"][r["host"]]["fault"] not in ("hang", "dead")}
    assert expandable <= everything
    polite = man.reachable(obey_robots=True)
    assert polite < everything and all(man.allowed(u) for u in polite)


def test_page_words_come_mostly_from_their_topic():
    model, renderer, m = web()
    blocks = [set(ws) for ws in model.vocab.topic_words]
    agree = total = 0
    for url, rec in m["pages"].items():
        if rec["kind"] != "html" or m["hosts"][rec["host"]]["spam"]:
            continue
        words = text.tokens(text.visible_text(html_of(model, renderer, url)))
        best = max(range(len(blocks)), key=lambda t: sum(w in blocks[t] for w in words))
        agree += best == rec["topic"]
        total += 1
    assert agree / total > 0.95
    assert len(m["meta"]["popular_terms"]) >= 100


def test_vocabulary_words_are_single_terms():
    vocab = build_vocabulary(1)
    words = list(vocab.background) + [w for ws in vocab.topic_words for w in ws]
    assert len(set(words)) == len(words)
    assert not set(words) & text.stopwords()
    sample = words[::7]
    assert text.stems(sample, drop_stopwords=False) == sample


def jaccard4(a: str, b: str) -> float:
    def sh(html):
        toks = text.tokens(text.visible_text(html))
        return {tuple(toks[i:i + 4]) for i in range(len(toks) - 3)}

    x, y = sh(a), sh(b)
    return len(x & y) / len(x | y)


def test_duplicate_clusters_measured_with_the_text_pipeline():
    model, renderer, m = web()
    kinds = Counter(c["kind"] for c in m["clusters"])
    assert kinds["exact"] and kinds["near"] and kinds["near_miss"], kinds
    markup_differs = 0
    for c in m["clusters"]:
        first = html_of(model, renderer, c["urls"][0])
        for u, j in zip(c["urls"][1:], c["jaccard"][1:], strict=True):
            other = html_of(model, renderer, u)
            measured = jaccard4(first, other)
            assert measured == pytest.approx(j, abs=0.01), (c, u)
            if c["kind"] == "exact":
                assert text.content_digest(text.visible_text(first)) == text.content_digest(text.visible_text(other))
                markup_differs += first != other
            elif c["kind"] == "near":
                assert 0.87 <= measured < 1.0
            else:
                assert 0.45 <= measured <= 0.88
    assert markup_differs > 0
    near = [j for c in m["clusters"] if c["kind"] == "near" for j in c["jaccard"][1:]]
    assert max(near) - min(near) > 0.04  # spread over the range, not one value


def test_spam_hosts_are_labelled_and_look_like_spam():
    model, renderer, m = web()
    spam = Counter(rec["spam"] for rec in m["hosts"].values() if rec["spam"])
    assert set(spam) == {"link_farm", "keyword_stuffing", "copied_content"}
    popular = set(m["meta"]["popular_terms"])

    def popular_share(rec):
        toks = text.tokens(text.visible_text(html_of(model, renderer, rec["url"])))
        return sum(t in popular for t in toks) / len(toks)

    pages = [r for r in m["pages"].values() if r["kind"] == "html"]
    stuffed = [popular_share(r) for r in pages if m["hosts"][r["host"]]["spam"] == "keyword_stuffing"]
    plain = [popular_share(r) for r in pages if m["hosts"][r["host"]]["role"] == "plain"][:200]
    assert min(stuffed) > 2 * (sum(plain) / len(plain))
    farm_hosts = {h for h, rec in m["hosts"].items() if rec["spam"] == "link_farm"}
    farm_links = [u.split("/")[2].split(":")[0] for r in pages if r["host"] in farm_hosts for u in r["links"]]
    assert sum(h in farm_hosts for h in farm_links) / len(farm_links) > 0.9
    # Copied content: every paragraph of a copying page appears verbatim in some other host's page.
    copier = next(h for h, rec in m["hosts"].items() if rec["spam"] == "copied_content")
    for r in pages:
        if r["host"] == copier and r["url"].endswith(".html") and r["cluster"] is None:
            paras = [p.text() for p in LexborHTMLParser(html_of(model, renderer, r["url"])).css("p")
                     if not p.attributes.get("class")]
            assert paras
            others = [html_of(model, renderer, u) for u, o in m["pages"].items()
                      if o["kind"] == "html" and o["host"] != copier and not m["hosts"][o["host"]]["spam"]]
            assert all(any(p in o for o in others) for p in paras)
            break


def test_epochs_evolve_the_web():
    model0, r0, m0 = web()
    model1, r1, m1 = web(epoch=1)
    model2, r2, m2 = web(epoch=2)
    assert set(m0["pages"]) <= set(m1["pages"]) <= set(m2["pages"])  # removed pages stay, answering 404
    new = set(m2["pages"]) - set(m0["pages"])
    assert new and all(m2["pages"][u]["changed"] for u in new)
    removed = [u for u, r in m2["pages"].items() if r["removed_in"]]
    assert removed and all(m2["pages"][u]["status"] == 404 for u in removed)
    changed = unchanged = 0
    for url, rec in m1["pages"].items():
        if url not in m0["pages"] or rec["kind"] != "html" or rec["removed_in"] or m1["hosts"][rec["host"]]["mirror_of"]:
            continue
        a, b = html_of(model0, r0, url), html_of(model1, r1, url)
        if 1 in rec["changed"]:
            assert a != b
            changed += 1
        elif rec["links"] == m0["pages"][url]["links"] and not any(
                c["kind"] == "exact" and url in c["urls"] for c in m1["clusters"]):
            assert a == b
            unchanged += 1
    assert changed > 20 and unchanged > changed
    # Link changes: some page gained or lost links between epochs.
    assert any(m1["pages"][u]["links"] != r["links"] for u, r in m0["pages"].items())


def test_cross_host_links_are_topically_local():
    _, _, m = web(hosts=200)
    topic_of = {h: rec["topic"] for h, rec in m["hosts"].items()}
    same = total = 0
    for r in m["pages"].values():
        src = r["host"]
        if m["hosts"][src]["role"] != "plain":
            continue
        for u in r["links"]:
            dst = u.split("/")[2].split(":")[0]
            if dst != src and dst in topic_of:
                total += 1
                same += topic_of[dst] == topic_of[src]
    chance = sum(c * c for c in Counter(topic_of.values()).values()) / len(topic_of) ** 2
    assert same / total > chance + 0.3


def test_clean_profile_has_nothing_but_politeness_to_wait_for():
    """The throughput benchmarks' web: plain hosts, robots.txt allowing everything with no
    Crawl-delay, only HTML pages, all reachable."""
    clean = WebModel.generate(hosts=120, ips=12, seed=4, clean=True)
    assert {h.role for h in clean.hosts} == {"plain"} and {h.robots for h in clean.hosts} == {"allow_all"}
    assert not any(h.crawl_delay for h in clean.hosts) and clean.nxdomain_hosts == []
    assert {p.kind for h in clean.hosts for p in h.pages.values()} == {"html"}
    seen, todo = set(), [(h, p) for h, p in clean.seeds()]
    while todo:
        host, path = todo.pop()
        if (host, path) in seen:
            continue
        seen.add((host, path))
        todo += clean.page(host, path).links
    assert seen == {(h.name, p) for h in clean.hosts for p in h.pages}
    assert len({h.role for h in WebModel.generate(hosts=120, ips=12, seed=4).hosts}) > 5
