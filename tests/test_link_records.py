import pytest

from raycrawl.storage.link_records import LinkRecord, LinkRecordWriter, iter_link_records, read_link_file


def _rec(i):
    return {"url": f"http://h{i % 3}.test/p{i}", "status": 200, "links": [f"http://h.test/{i + 1}"], "digest": bytes(16)}


def test_round_trip_and_rotation(tmp_path):
    w = LinkRecordWriter(tmp_path, records_per_file=10)
    for start in range(0, 35, 7):
        w.write_maps(_rec(i) for i in range(start, start + 7))
    assert len(list((tmp_path / "links").glob("*.rec.gz"))) == 3  # rotation happens between batches, never inside one
    assert [r.url for r in iter_link_records(tmp_path)] == [_rec(i)["url"] for i in range(35)]


def test_truncated_tail_loses_only_last_batch(tmp_path):
    w = LinkRecordWriter(tmp_path)
    w.write_maps(_rec(i) for i in range(5))
    w.write_maps(_rec(i) for i in range(5, 10))
    data = w.path.read_bytes()
    w.path.write_bytes(data[:-7])  # torn write at kill -9
    assert [r.url for r in iter_link_records(tmp_path)] == [_rec(i)["url"] for i in range(5)]
    # A resumed writer starts a fresh file and nothing earlier is lost.
    w2 = LinkRecordWriter(tmp_path)
    w2.write_maps([_rec(99)])
    assert [r.url for r in iter_link_records(tmp_path)][-1] == _rec(99)["url"]


def test_crawl_log_gives_failures_heritrix_fetch_status_codes(tmp_path):
    """A body cut short is a failed fetch (-3 connection lost, -4 timeout) whatever its status line,
    with Heritrix's truncation annotation; our size cap keeps the HTTP status (lenTrunc); robots.txt
    unavailable is -61, a DNS failure -6, a robots exclusion -9998."""
    from raycrawl.storage.crawl_log import rows

    cases = {"cut": (200, "reset"), "slow": (200, "timeout"), "capped": (200, "too-large"), "ok": (200, None),
             "noname": (0, "dns"), "unavailable": (0, "robots-unavailable"), "excluded": (0, "robots"),
             "refused": (0, "connect")}
    w = LinkRecordWriter(tmp_path)
    w.write_batch(LinkRecord(f"http://a.test/{name}", status, "text/html", 1.0 + i, ip="127.0.0.1", size=10, error=err)
                  for i, (name, (status, err)) in enumerate(cases.items()))
    w.close()
    got = {r["url"].rsplit("/", 1)[1]: (r["status"], r["http_status"], r["annotations"]) for r in rows(tmp_path)}
    assert got == {"cut": (-3, 200, "disconnectTrunc"), "slow": (-4, 200, "timeTrunc"), "capped": (200, 200, "lenTrunc"),
                   "ok": (200, 200, None), "noname": (-6, 0, None), "unavailable": (-61, 0, None),
                   "excluded": (-9998, 0, None), "refused": (-2, 0, None)}


def _reference_vias(records):
    """The via rule of storage/crawl_log.py's module doc, written out plainly over records held in
    memory (records: (worker, LinkRecord) in file order): the page fetched earliest among those
    linking to (or redirecting to) a URL, provided it was fetched before it; its discovery path."""
    ordered = sorted(records, key=lambda wr: wr[1].time)
    fetched = {}
    for _, r in ordered:
        fetched.setdefault(r.url, r.time)
    via, hop = {}, {}
    for _, r in ordered:
        for url, letter in ([(u, "L") for u in r.links] + ([(r.redirect, "R")] if r.redirect else [])
                            + [(u, "E") for u in r.embeds]):
            if url not in via and url != r.url and fetched.get(url, float("inf")) > r.time:
                via[url], hop[url] = r.url, letter

    def path(url):
        return path(via[url]) + hop[url] if url in via else ""
    return [(r.url, via.get(r.url), path(r.url), w) for w, r in ordered]


@pytest.mark.parametrize("budget", [None, 3, 7, 40])
def test_crawl_log_vias_match_the_rule_written_plainly(tmp_path, budget):
    """Random crawls with equal times, self-links, redirects, refetches, links to pages never
    fetched and two writers: crawl_log.rows gives every record, in time order, with the via and
    discovery path of the plain rule — in one bucket and one sorted run (the default budget), and
    spread over many buckets and runs (a budget of a few records)."""
    import random

    from raycrawl.storage.crawl_log import rows

    paths = set()
    for trial in range(5):
        rnd = random.Random(trial)
        out = tmp_path / str(trial)
        pages = [f"http://h{i % 7}.test/{i}" for i in range(60)]
        writers = [LinkRecordWriter(out, writer=f"agent{k}") for k in range(2)]
        records = []
        for k in range(150):
            url = rnd.choice(pages[: 10 + k // 3])
            rec = LinkRecord(url, 200, "text/html", 1000.0 + rnd.randrange(40),  # many equal times
                             links=[rnd.choice(pages + ["http://never.test/x"]) for _ in range(rnd.randrange(6))],
                             redirect=rnd.choice(pages) if rnd.random() < 0.3 else None,
                             embeds=[rnd.choice(pages) for _ in range(rnd.randrange(3))])
            w = rnd.randrange(2)
            writers[w].write_batch([rec])
            records.append((w, rec))
        for w in writers:
            w.close()
        files = sorted((out / "links").glob("*.rec.gz"))
        in_file_order = [(f.name.rsplit("-", 1)[0], r) for f in files for r in read_link_file(f)]
        derived = rows(out) if budget is None else rows(out, budget=budget)
        got = [(r["url"], r["via"], r["discovery_path"], r["worker"]) for r in derived]
        assert got == _reference_vias(in_file_order), trial
        paths.update(p for _, _, p, _ in got)
    assert "" in paths and any("R" in p for p in paths) and any("E" in p for p in paths)  # the cases occurred
    assert max(map(len, paths)) >= 3
