"""Archive of summaries vs gzip-compressed msgpack, and focused-crawl simulation (BFS vs best-first).

    .venv/bin/python benchmarks/summaries.py [--docs 100000] [--websim-hosts 600] [--budget-frac 0.25]

Part 1, on two collections — a websim web (topic-structured synthetic pages, words through the
text pipeline) and a synthetic Zipf collection (``--docs`` summaries, term ids Zipf(1.2), counts
Zipf(2)) — the same summaries are stored as

* our archive: δ/ζ3/ζ2/γ bit stream + Elias–Fano pointers (written with dsi-bitstream, decoded
  with the numba decoder), and
* the peer: msgpack of ``[length, term ids, counts]`` per summary, gzip -6 — as one stream for
  size and sequential decoding, and in gzip blocks of 64 summaries (+ a uint64 offset per block)
  for random access.

Reported: bits per summary (total and per term/count pair), pointer bits per summary, random
access latency (mean over random node ids, through the Python API), sequential decode speed.
Targets (issue 6): smaller than the peer, < 13 pointer bits/summary, ≥ 100k summaries/s, ≤ 50 µs.

Part 2, on the websim web: BFS and best-first replays (topic relevance, naive Bayes trained on 200
pages) with harvest rate at several points, replay speed in pages/min (target ≥ 100k on one
core), and a PNG of both curves; replay speed is also measured on the synthetic collection's
power-law graph (``--docs`` nodes).
"""

from __future__ import annotations

import argparse
import gzip
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

import msgpack
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from raycrawl.storage.summaries import SummaryArchive, SummaryBitWriter, build_archive  # noqa: E402
from raycrawl.tasks import relevance as relm  # noqa: E402
from raycrawl.tasks import simulate as sim  # noqa: E402

RESULTS = Path(__file__).parent / "results"
# Speeds are measured in process CPU time: this machine runs several jobs on 2 cores, and wall
# time would measure the contention. ``--wall`` switches to wall-clock time.
_clock = time.process_time


def synthetic_summaries(n: int, seed: int = 1, vocab: int = 300_000):
    """n summaries (length, ascending term ids by frequency rank, counts), Zipf everything."""
    rng = np.random.default_rng(seed)
    sizes = np.minimum(rng.lognormal(4.6, 0.8, n).astype(np.int64), 3000)
    docs = []
    for s in sizes.tolist():
        t = np.unique(np.minimum(rng.zipf(1.2, s), vocab) - 1)
        c = np.minimum(rng.zipf(2.0, len(t)), 10_000)
        docs.append((t, c))
    # Renumber by actual collection frequency, as the archive does.
    cf = np.zeros(vocab, np.int64)
    for t, c in docs:
        cf[t] += c
    order = np.argsort(-cf, kind="stable")
    rank = np.empty(vocab, np.int64)
    rank[order] = np.arange(vocab)
    out = []
    for t, c in docs:
        r = rank[t]
        o = np.argsort(r)
        out.append((int(c.sum() * 1.6), r[o], c[o]))
    n_terms = int((cf > 0).sum())
    return out, n_terms


def write_archive(base: Path, docs, n_terms: int, missing_rate: float = 0.02, seed: int = 2):
    rng = np.random.default_rng(seed)
    n = len(docs)
    nodes = int(n / (1 - missing_rate))
    ids = np.sort(rng.choice(nodes, n, replace=False))
    w = SummaryBitWriter(base, nodes)
    for node, (length, t, c) in zip(ids.tolist(), docs, strict=True):
        w.add(node, length, t, c)
    w.close([f"t{i}" for i in range(n_terms)], [1] * n_terms, [1] * n_terms, min_df=1)
    return ids


def measure_archive(name: str, base: Path, rows: list):
    a = SummaryArchive.open(base)
    st = a.stats()
    d = a.decode_all()  # warm the numba decoder (and its cache)
    docs = [(int(d.lengths[i]), d.term_ids[d.offsets[i]:d.offsets[i + 1]].tolist(),
             d.counts[d.offsets[i]:d.offsets[i + 1]].tolist()) for i in range(len(d.doc_ids))]
    n = len(docs)
    # Ours: sequential.
    reps = 3
    t0 = _clock()
    for _ in range(reps):
        a.decode_all()
    ours_seq = n * reps / (_clock() - t0)
    # Ours: random access through the Python API.
    rng = np.random.default_rng(0)
    probe = rng.choice(d.doc_ids, min(20_000, n)).tolist()
    t0 = _clock()
    for node in probe:
        a.get(node)
    ours_ra = (_clock() - t0) / len(probe) * 1e6
    # Peer: msgpack + gzip, one stream.
    packed = msgpack.packb(docs)
    gz = gzip.compress(packed, compresslevel=6)
    t0 = _clock()
    for _ in range(reps):
        msgpack.unpackb(gzip.decompress(gz))
    peer_seq = n * reps / (_clock() - t0)
    # Peer: blocks of 64 for random access.
    block = 64
    blobs = [gzip.compress(msgpack.packb(docs[i:i + block]), compresslevel=6) for i in range(0, n, block)]
    offs = np.cumsum([0] + [len(b) for b in blobs])
    data = b"".join(blobs)
    pos = {int(node): i for i, node in enumerate(d.doc_ids.tolist())}
    t0 = _clock()
    for node in probe:
        i = pos[node]
        b = i // block
        msgpack.unpackb(gzip.decompress(data[offs[b]:offs[b + 1]]))[i % block]
    peer_ra = (_clock() - t0) / len(probe) * 1e6
    pairs = st["pairs"]
    ours_bits = st["bits_per_summary"]
    rows.append((name, n, pairs / n, ours_bits, len(gz) * 8 / n, ours_bits * n / pairs, len(gz) * 8 / pairs,
                 st["pointer_bits_per_summary"], 64 * len(offs) / n, ours_ra, peer_ra, ours_seq, peer_seq,
                 len(data) * 8 / n))
    return a


def print_archive_rows(rows):
    print("\n== archive of summaries vs msgpack+gzip (same summaries, same run) ==")
    for (name, n, avg_pairs, ob, pb, obp, pbp, optr, pptr, ora, pra, oseq, pseq, pblk) in rows:
        print(f"\n[{name}] {n:,} summaries, {avg_pairs:.1f} pairs/summary")
        print(f"{'':34}{'archive':>14}{'msgpack+gzip':>16}{'ratio':>9}")
        print(f"{'bits/summary (data)':34}{ob:14.1f}{pb:16.1f}{ob / pb:9.3f}")
        print(f"{'bits/term-count pair':34}{obp:14.2f}{pbp:16.2f}{obp / pbp:9.3f}")
        print(f"{'  (blocked-64 peer, bits/summary)':34}{'':14}{pblk:16.1f}{ob / pblk:9.3f}")
        print(f"{'pointer bits/summary':34}{optr:14.2f}{pptr:16.2f}{optr / pptr:9.3f}")
        print(f"{'random access, µs/summary':34}{ora:14.2f}{pra:16.2f}{ora / pra:9.3f}")
        print(f"{'sequential decode, summaries/s':34}{oseq:14,.0f}{pseq:16,.0f}{oseq / pseq:9.2f}")


def synthetic_graph(n: int, seed: int = 3):
    """Power-law host sizes and out-degrees, 80% of links inside the host (near pages)."""
    rng = np.random.default_rng(seed)
    sizes = np.maximum(1, (rng.pareto(1.3, n // 20) * 8).astype(np.int64))
    sizes = sizes[np.cumsum(sizes) <= n]
    sizes = np.append(sizes, n - sizes.sum()) if sizes.sum() < n else sizes
    host = np.repeat(np.arange(len(sizes)), sizes)[:n]
    start = np.repeat(np.cumsum(sizes) - sizes, sizes)[:n]
    deg = np.minimum((rng.pareto(1.6, n) * 6).astype(np.int64) + 1, 500)
    src = np.repeat(np.arange(n), deg)
    local = rng.random(len(src)) < 0.8
    dst = np.where(local, start[src] + (rng.integers(0, 1 << 30, len(src)) % sizes[host[src]]),
                   np.minimum(rng.zipf(1.5, len(src)) - 1, n - 1))
    o = np.lexsort((dst, src))
    indptr = np.zeros(n + 1, np.int64)
    np.cumsum(np.bincount(src, minlength=n), out=indptr[1:])
    return sim.Collection(indptr, dst[o], host)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--docs", type=int, default=100_000, help="synthetic summaries / graph nodes")
    ap.add_argument("--websim-hosts", type=int, default=600, help="hosts of the websim web")
    ap.add_argument("--budget-frac", type=float, default=0.25, help="replay budget, fraction of websim pages")
    ap.add_argument("--png", type=Path, default=RESULTS / "summaries_harvest.png")
    ap.add_argument("--wall", action="store_true", help="time with the wall clock instead of CPU time")
    args = ap.parse_args()
    global _clock
    if args.wall:
        _clock = time.perf_counter
    print(f"timing: {'wall clock' if args.wall else 'process CPU time'}")
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        # -- websim collection ------------------------------------------------------------------
        from raycrawl.websim.model import WebModel

        t0 = _clock()
        model = WebModel.generate(hosts=args.websim_hosts, ips=50, seed=7)
        coll, records, labels = sim.websim_corpus(model)
        t_corpus = _clock() - t0
        t0 = _clock()
        build_archive(records, tmp / "ws" / "summaries", coll.id_of, coll.num_nodes, min_df=20)
        t_build = _clock() - t0
        print(f"websim web: {args.websim_hosts} hosts, {coll.num_nodes:,} HTML pages, {len(coll.indices):,} arcs "
              f"(model+render {t_corpus:.1f} s); archive built in {t_build:.1f} s (two passes, min_df 20)")
        ws_archive = measure_archive(f"websim, {args.websim_hosts} hosts", tmp / "ws" / "summaries", rows)
        # -- synthetic Zipf collection ------------------------------------------------------------
        t0 = _clock()
        docs, n_terms = synthetic_summaries(args.docs)
        t_gen = _clock() - t0
        t0 = _clock()
        write_archive(tmp / "syn" / "summaries", docs, n_terms)
        t_write = _clock() - t0
        print(f"synthetic: {args.docs:,} summaries generated in {t_gen:.1f} s, written in {t_write:.1f} s "
              f"({sum(len(t) for _, t, _ in docs) / t_write:,.0f} pairs/s through dsi-bitstream)")
        syn_archive = measure_archive(f"synthetic Zipf, {args.docs:,}", tmp / "syn" / "summaries", rows)
        print_archive_rows(rows)

        # -- simulation -----------------------------------------------------------------------------
        print("\n== focused-crawl simulation on the websim web (BFS vs best-first, same run) ==")
        decoded = ws_archive.decode_all()
        counts = Counter(labels.tolist())
        topic = counts.most_common(6)[5][0]  # a mid-sized topic
        rel = relm.topic_model(decoded, coll.num_nodes, list(ws_archive.terms), labels, topic, train=200)
        print(f"topic {topic!r}: {rel.info['relevant']:,} relevant pages of {coll.num_nodes:,} "
              f"({rel.info['relevant'] / coll.num_nodes:.1%}); naive Bayes held-out accuracy "
              f"{rel.info['held_out_accuracy']:.4f}")
        seeds = sim.websim_seeds(model, coll)
        budget = int(coll.num_nodes * args.budget_frac)
        curves = [sim.simulate(coll, rel, p, budget, seeds) for p in sim.POLICIES]
        marks = [0.05, 0.1, 0.25, 0.5, 1.0]
        print(f"{'pages fetched':>14}" + "".join(f"{c.policy:>14}" for c in curves) + f"{'ratio':>9}")
        for m in marks:
            k = max(0, int(len(curves[0].pages) * m) - 1)
            hr = [c.harvest_rate[min(k, len(c.pages) - 1)] for c in curves]
            print(f"{int(curves[0].pages[k]):>14,}" + "".join(f"{h:14.3f}" for h in hr) + f"{hr[1] / max(hr[0], 1e-9):9.2f}")
        print(f"{'mean harvest':>14}" + "".join(f"{c.harvest_rate.mean():14.3f}" for c in curves))
        print(f"{'pages/min':>14}" + "".join(f"{c.pages_per_minute:14,.0f}" for c in curves))
        args.png.parent.mkdir(parents=True, exist_ok=True)
        sim.write_results(curves, rel, tmp / "simout", title=f"websim {args.websim_hosts} hosts, topic {topic}")
        args.png.write_bytes((tmp / "simout" / "harvest.png").read_bytes())
        (args.png.with_suffix(".tsv")).write_text((tmp / "simout" / "harvest.tsv").read_text())
        print(f"curves: {args.png} and {args.png.with_suffix('.tsv')}")

        # Replay speed at scale: the synthetic power-law graph with a term query over its summaries.
        g = synthetic_graph(syn_archive.num_nodes)
        sd = syn_archive.decode_all()
        rel2 = relm.term_query(sd, syn_archive.num_nodes, syn_archive.term_id, ["t50"])
        for p in sim.POLICIES:
            c = sim.simulate(g, rel2, p, syn_archive.num_nodes, [0, 1, 2, 3, 4])
            print(f"synthetic graph {g.num_nodes:,} nodes / {len(g.indices):,} arcs, {p}: {c.fetched:,} pages "
                  f"replayed in {c.elapsed_s:.2f} s = {c.pages_per_minute:,.0f} pages/min (one core)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
