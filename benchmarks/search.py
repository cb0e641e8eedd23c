"""Fragment index vs tantivy on a multi-epoch websim: Table 6.1 shape, index size, 2-term latency,
top-10 overlap with tantivy's BM25 on single-version queries.

    .venv/bin/python benchmarks/search.py                         # 60 hosts, 5 epochs (~2-3 min)
    .venv/bin/python benchmarks/search.py --hosts 100 --queries 400

Pages are read straight from the websim model/renderer for each epoch (no crawl: the bytes are
what the websim server would send; see tasks.index_build.websim_versions). As the paper did (seed
004 §6: "removing all exact duplicates among the versions ... not a good measure of the efficacy of
our approach"), a version whose terms equal an earlier version of the same URL is dropped before
anything is measured (``--keep-identical`` keeps them, for comparison). Both indexes see the
same terms (raycrawl.text.terms joined by spaces; tantivy gets a whitespace tokenizer, positions
on, one segment, one writer thread, nothing stored in the size index). Timings on a shared 2-core
machine are noisy: each latency is the median over the queries, best of ``--repeat`` passes.
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from raycrawl.storage.fragment_index import FragmentIndex  # noqa: E402
from raycrawl.tasks.index_build import build_index, websim_versions  # noqa: E402
from raycrawl.tasks.index_update import IndexUpdater, UpdateClient  # noqa: E402
from raycrawl.tasks.query import QueryProcessor  # noqa: E402


def drop_identical_versions(versions: dict) -> tuple[dict, int]:
    """Versions without those that exactly repeat an earlier version of the same URL; and how many
    were dropped."""
    out, dropped = {}, 0
    for url, by_epoch in versions.items():
        seen: set[tuple[str, ...]] = set()
        for epoch in sorted(by_epoch):
            key = tuple(by_epoch[epoch])
            if key in seen:
                dropped += 1
                continue
            seen.add(key)
            out.setdefault(url, {})[epoch] = by_epoch[epoch]
    return out, dropped


def dir_bytes(d: Path) -> int:
    return sum(p.stat().st_size for p in d.rglob("*") if p.is_file())


def tantivy_index(path: Path, docs: list[tuple[str, str]], store_url: bool):
    """A one-segment tantivy index of (url, text) with a whitespace tokenizer and positions."""
    import tantivy

    sb = tantivy.SchemaBuilder()
    sb.add_text_field("body", stored=False, tokenizer_name="ws", index_option="position")
    if store_url:
        sb.add_text_field("url", stored=True, tokenizer_name="raw", index_option="basic")
    schema = sb.build()
    path.mkdir(parents=True, exist_ok=True)
    index = tantivy.Index(schema, path=str(path))
    index.register_tokenizer("ws", tantivy.TextAnalyzerBuilder(tantivy.Tokenizer.whitespace()).build())
    writer = index.writer(heap_size=1_000_000_000, num_threads=1)
    for url, body in docs:
        writer.add_document(tantivy.Document(body=body, url=url) if store_url else tantivy.Document(body=body))
    writer.commit()
    writer.wait_merging_threads()
    index.reload()
    return index, schema


def tantivy_and(index, schema, terms: list[str], k: int):
    import tantivy

    q = tantivy.Query.boolean_query([(tantivy.Occur.Must, tantivy.Query.term_query(schema, "body", t)) for t in terms])
    searcher = index.searcher()
    return searcher, searcher.search(q, k).hits


def timed(fn, queries, repeat: int) -> float:
    """Median seconds per query, best of ``repeat`` passes."""
    best = None
    for _ in range(repeat):
        times = []
        for q in queries:
            t0 = time.perf_counter()
            fn(q)
            times.append(time.perf_counter() - t0)
        med = statistics.median(times)
        best = med if best is None else min(best, med)
    return best


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--hosts", type=int, default=60)
    ap.add_argument("--ips", type=int, default=10)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--epochs", type=int, default=5)
    ap.add_argument("-w", type=int, default=100)
    ap.add_argument("-b", type=int, default=5)
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--repeat", type=int, default=5, help="timing passes per engine, taking turns (best counts)")
    ap.add_argument("--sweep", default="50,100,200,300", help="window sizes w for the Figs. 6.2-6.5 sweep "
                    "(empty: skip)")
    ap.add_argument("--keep-identical", action="store_true",
                    help="keep versions that exactly repeat an earlier one (the paper removed them)")
    args = ap.parse_args()
    rng = random.Random(args.seed)

    t0 = time.perf_counter()
    versions = websim_versions(args.hosts, args.ips, args.seed, args.epochs)
    read_s = time.perf_counter() - t0
    all_versions = sum(len(v) for v in versions.values())
    dropped = 0
    if not args.keep_identical:
        versions, dropped = drop_identical_versions(versions)
    n_versions = sum(len(v) for v in versions.values())
    print(f"websim {args.hosts} hosts, seed {args.seed}, epochs 0..{args.epochs - 1}: {len(versions)} pages, "
          f"{all_versions} versions, read from the model in {read_s:.1f} s; "
          + (f"{dropped} exact repeats of an earlier version of the same page removed (as the paper did), "
             f"{n_versions} versions measured" if not args.keep_identical else "exact repeats kept"))

    # ---------------------------------------------------------------- Table 6.1 shape
    indexes = {}
    print(f"\nTable 6.1 shape (w={args.w}, b={args.b}); ratios vs no sharing")
    print(f"{'policy':8s} {'fragments':>10s} {'ratio':>6s} {'positions':>10s} {'ratio':>6s} {'postings':>9s} "
          f"{'postings B':>11s} {'ratio':>6s} {'build s':>8s}")
    for pol in ("none", "local", "global"):
        t = time.perf_counter()
        ix = indexes[pol] = build_index(versions, pol, args.b, args.w)
        s = ix.stats
        base = indexes["none"].stats
        print(f"{pol:8s} {s['fragments']:10,d} {s['fragments'] / base['fragments']:6.3f} {s['positions']:10,d} "
              f"{s['positions'] / base['positions']:6.3f} {s['postings']:9,d} {s['postings_bytes']:11,d} "
              f"{s['postings_bytes'] / base['postings_bytes']:6.3f} {time.perf_counter() - t:8.1f}")
    g = indexes["global"]
    print(f"global sharing: {len(g.reuse)} fragments reused by other pages "
          f"(target positions ≤ 0.4× none: {g.stats['positions'] / indexes['none'].stats['positions']:.3f})")

    # ---------------------------------------------------------------- window sweep (Figs. 6.2-6.5 shape)
    ws = [int(x) for x in args.sweep.split(",") if x]
    if ws:
        print(f"\nwindow sweep (Figs. 6.4/6.5 shape, b={args.b}): fragments / positions as a fraction of no sharing")
        print(f"{'w':>5s} {'fragments none':>15s} {'local frag':>10s} {'local pos':>10s} {'global frag':>11s} "
              f"{'global pos':>10s}")
        for w in ws:
            st = {pol: build_index(versions, pol, args.b, w).stats for pol in ("none", "local", "global")}
            r = {pol: (st[pol]["fragments"] / st["none"]["fragments"], st[pol]["positions"] / st["none"]["positions"])
                 for pol in ("local", "global")}
            print(f"{w:5d} {st['none']['fragments']:15,d} {r['local'][0]:10.3f} {r['local'][1]:10.3f} "
                  f"{r['global'][0]:11.3f} {r['global'][1]:10.3f}")
        print("\ncumulative fragments / positions kept under local sharing, epochs 0..e (Figs. 6.2/6.3 shape), "
              "% of no sharing")
        print(f"{'w':>5s} " + " ".join(f"{'epoch ' + str(e):>13s}" for e in range(args.epochs)))
        for w in ws:
            cells = []
            for e in range(args.epochs):
                upto = {u: {k: v for k, v in by.items() if k <= e} for u, by in versions.items()}
                upto = {u: by for u, by in upto.items() if by}
                n, loc = (build_index(upto, pol, args.b, w).stats for pol in ("none", "local"))
                cells.append(f"{100 * loc['fragments'] / n['fragments']:5.1f}/{100 * loc['positions'] / n['positions']:5.1f}")
            print(f"{w:5d} " + " ".join(f"{c:>13s}" for c in cells))

    # ---------------------------------------------------------------- updates (Table 6.3 shape)
    up, client = IndexUpdater(args.b, args.w), UpdateClient(args.b, args.w)
    print("\nupdates, epoch by epoch (two-phase protocol: hashes → bit vector → missing fragments)")
    print(f"{'epoch':>5s} {'versions':>8s} {'new frags':>9s} {'new positions/version':>21s} "
          f"{'positions/version (standard)':>28s} {'bytes sent':>11s} {'full text bytes':>15s}")
    for e in range(args.epochs):
        sent0, full0, frags0, new_frags, new_pos, n, pos = client.bytes_sent, client.bytes_full, len(up.fragments), 0, 0, 0, 0
        for u in sorted(versions):
            if e in versions[u]:
                before = set(up.fragments)
                new_frags += client.push(up, u, e, versions[u][e])
                new_pos += sum(len(up.fragments[h]) for h in set(up.fragments) - before)
                n += 1
                pos += len(versions[u][e])
        assert len(up.fragments) - frags0 == new_frags
        print(f"{e:5d} {n:8d} {new_frags:9d} {new_pos / n:21.1f} {pos / n:28.1f} {client.bytes_sent - sent0:11,d} "
              f"{client.bytes_full - full0:15,d}")

    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        # ------------------------------------------------------------ index size vs tantivy
        ours = {}
        for pol, ix in indexes.items():
            ix.save(tmp / f"ours-{pol}")
            ours[pol] = FragmentIndex.sizes(tmp / f"ours-{pol}")
        docs = [(u, " ".join(versions[u][e])) for u in sorted(versions) for e in sorted(versions[u])]
        t = time.perf_counter()
        tix, tschema = tantivy_index(tmp / "tantivy", docs, store_url=False)
        t_build = time.perf_counter() - t
        tbytes = dir_bytes(tmp / "tantivy")
        print(f"\nindex size over all {n_versions} versions (bytes). What a query reads: tantivy's whole index "
              "(nothing stored); ours postings.bin + query.bin (dictionary, version df, version and fragment "
              "tables). Besides, ours: pages.msgpack (URLs, snippets, captures: the result page) and "
              "update.msgpack (the fragment hash table: updates only)")
        print(f"{'':34s} {'query reads':>12s} {'ratio':>7s} {'postings':>10s} {'tables':>9s} {'pages':>9s} {'update':>9s}")
        print(f"{'tantivy (positions, 1 segment: ' + str(tix.searcher().num_segments) + ')':34s} {tbytes:12,d}   1.000"
              f"   built in {t_build:.1f} s")
        for pol, size in ours.items():
            print(f"{'fragment index, ' + pol:34s} {size['query']:12,d} {size['query'] / tbytes:7.3f} "
                  f"{size['postings']:10,d} {size['query_tables']:9,d} {size['pages']:9,d} {size['update']:9,d}")

        # ------------------------------------------------------------ 2-term AND latency
        all_v = [(u, e) for u in versions for e in versions[u] if len(set(versions[u][e])) >= 2]
        queries = []
        for _ in range(args.queries):
            u, e = rng.choice(all_v)
            queries.append(rng.sample(sorted(set(versions[u][e])), 2))
        print(f"\n2-term AND queries over all versions, top 10 ({len(queries)} queries from random versions' terms); "
              "both indexes queried from their files on disk (tantivy's directory; ours loaded with "
              "FragmentIndex.load, postings.bin memory-mapped), page cache warm")
        engines = {"tantivy": lambda q: tantivy_and(tix, tschema, q, 10)}
        qps = {pol: QueryProcessor(FragmentIndex.load(tmp / f"ours-{pol}")) for pol in ("none", "local", "global")}
        for pol, qp in qps.items():
            qp.search(queries[0], 10)  # the compiled kernels load from numba's cache once per process
            engines[pol] = lambda q, qp=qp: qp.search(q, 10)
        # passes take turns (tantivy, none, local, global, tantivy, …): a slow spell of the machine
        # falls on every engine alike; each engine's best pass counts
        best: dict[str, float] = {}
        for _ in range(args.repeat):
            for name, fn in engines.items():
                best[name] = min(best.get(name, 1e9), timed(fn, queries, 1))
        t_tan = best["tantivy"]
        print(f"{'tantivy':24s} {t_tan * 1e3:9.3f} ms/query (median)   1.00")
        for pol, qp in qps.items():
            t_ours = best[pol]
            tickets = sum((qp.search(q, 10), qp.last_stats.tickets)[1] for q in queries[:50])
            print(f"{'fragment index, ' + pol:24s} {t_ours * 1e3:9.3f} ms/query (median) {t_ours / t_tan:6.1f}×"
                  + (f"   tickets/query {tickets / 50:.1f}" if pol == "global" else ""))

        # ------------------------------------------------------------ top-10 overlap, single version
        last = args.epochs - 1
        epoch_docs = [(u, " ".join(versions[u][last])) for u in sorted(versions) if last in versions[u]]
        eix, eschema = tantivy_index(tmp / "tantivy-epoch", epoch_docs, store_url=True)
        overlaps = []
        qp = QueryProcessor(g)
        for q in queries:
            searcher, hits = tantivy_and(eix, eschema, q, 10)
            theirs = {searcher.doc(a)["url"][0] for _, a in hits}
            mine = {h.url for h in qp.search(q, 10, epoch=last)}
            if theirs or mine:
                overlaps.append(len(theirs & mine) / max(len(theirs), len(mine)))
        print(f"\ntop-10 overlap with tantivy BM25 on epoch {last} only ({len(epoch_docs)} versions, "
              f"{len(overlaps)} 2-term AND queries with results): mean {statistics.mean(overlaps):.3f}, "
              f"exact match in {sum(o == 1.0 for o in overlaps)}/{len(overlaps)} (target ≥ 0.9)")


if __name__ == "__main__":
    main()
