"""Near-duplicate detection: sketching and LSH insert+query throughput, ours vs datasketch, plus
accuracy (MAE of the Jaccard estimate, precision/recall of clusters) on the same corpus.

    .venv/bin/python benchmarks/dedup.py               # 3,000 pages of 300 words, ~1 min
    .venv/bin/python benchmarks/dedup.py --docs 20000  # bigger

Everything runs on ONE core (RAYON_NUM_THREADS=1 for rensa) so "docs/s" are per-core figures.
Timings on a shared 2-core machine are noisy: each figure is the best of ``--repeat`` runs.
"""

from __future__ import annotations

import os

os.environ.setdefault("RAYON_NUM_THREADS", "1")  # per-core numbers: rensa must not fan out

import argparse
import math
import random
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from raycrawl.actors.visit.shingler import (  # noqa: E402
    CRAWL_NUM_PERM,
    CRAWL_SKETCH_BITS,
    NearDupIndex,
    exact_jaccard,
    shingle_hashes,
    shingle_hashes_of_tokens,
    sketch_matrix,
)
from raycrawl.tasks.dedup import cluster_texts, exact_jaccard_pairs, pair_metrics  # noqa: E402
from raycrawl.text import tokens  # noqa: E402


def make_corpus(n: int, words: int, seed: int):
    """Zipf pages; ~30% are mirrors (0–1 word edits) and ~10% near-misses (25–40 edits)."""
    rng = random.Random(seed)
    vocab = [f"w{i}q" for i in range(50000)]
    cum = np.cumsum(1 / np.arange(1, len(vocab) + 1))
    docs, labels, label = [], [], 0
    while len(docs) < n:
        idx = np.searchsorted(cum, np.array([rng.random() for _ in range(words)]) * cum[-1])
        base = [vocab[i] for i in idx]
        docs.append(" ".join(base))
        labels.append(label)
        for _ in range(rng.choice([0, 0, 1, 2])):
            w = list(base)
            for _ in range(rng.randrange(0, 2)):
                w[rng.randrange(words)] = rng.choice(vocab)
            docs.append(" ".join(w))
            labels.append(label)
        label += 1
        if rng.random() < 0.15:
            w = list(base)
            for _ in range(rng.randrange(25, 41)):
                w[rng.randrange(words)] = rng.choice(vocab)
            docs.append(" ".join(w))
            labels.append(label)
            label += 1
    return docs[:n], labels[:n]


def best_of(repeat: int, fn):
    best, out = math.inf, None
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - t0)
    return best, out


def numpy_minhash(shingles, num_perm: int, seed: int = 1) -> np.ndarray:
    """Our own numpy MinHash (multiply-shift: (a·x + b) >> 32, 64-bit arithmetic), for comparison."""
    rng = np.random.default_rng(seed)
    a = rng.integers(1, 2**63, num_perm, dtype=np.uint64) | np.uint64(1)
    b = rng.integers(0, 2**63, num_perm, dtype=np.uint64)
    out = np.empty((len(shingles), num_perm), dtype=np.uint32)
    with np.errstate(over="ignore"):
        for i, s in enumerate(shingles):
            out[i] = ((s[:, None] * a + b) >> np.uint64(32)).min(axis=0)
    return out


def websim_accuracy(hosts: int, seed: int, threshold: float) -> None:
    """Precision/recall of duplicate pairs against websim's manifest clusters (near + exact)."""
    from itertools import combinations

    try:
        from raycrawl.websim.manifest import build_records
        from raycrawl.websim.model import WebModel
        from raycrawl.websim.render import Renderer
    except ImportError:
        print("websim not available: ground-truth section skipped")
        return
    from raycrawl.tasks.dedup import UnionFind
    from raycrawl.text import visible_text

    model = WebModel.generate(hosts=hosts, ips=20, seed=seed)
    renderer = Renderer(model, 8080)
    records = build_records(model, renderer)
    urls, texts = [], []
    for host in model.hosts:
        for page in host.pages.values():
            if page.kind == "html" and page.removed_in is None:
                urls.append(renderer.url(host.name, page.path))
                texts.append(visible_text(renderer.html(host, page)))
    pos = {u: i for i, u in enumerate(urls)}

    def pairs(groups):
        return {tuple(sorted(p)) for g in groups for p in combinations(g, 2)}

    truth_uf, misses = UnionFind(len(urls)), []
    kinds: dict[str, int] = {}
    for c in (r for r in records if r["type"] == "cluster"):
        kinds[c["kind"]] = kinds.get(c["kind"], 0) + 1
        m = [pos[u] for u in c["urls"] if u in pos]
        if c["kind"] == "near_miss":
            misses.append(m)
        else:
            for x in m[1:]:
                truth_uf.union(m[0], x)
    truth, miss_pairs = pairs(truth_uf.groups().values()), pairs(misses)
    print()
    print(f"websim ground truth: {hosts} hosts (seed {seed}), {len(urls)} HTML pages, clusters {kinds}; "
          f"{len(truth)} duplicate pairs, {len(miss_pairs)} near-miss pairs")

    def report(name, predicted):
        m = pair_metrics(predicted, truth)
        print(f"  {name:52s} precision {m['precision']:.4f}  recall {m['recall']:.4f}  "
              f"near-misses flagged {len(predicted & miss_pairs)}")

    for perm, bits in ((512, 8), (256, 16), (128, 32)):
        index = NearDupIndex(num_perm=perm, sketch_bits=bits, threshold=threshold)
        reps = []
        for s in range(0, len(urls), 100):
            reps += index.check_and_add(list(zip(urls[s : s + 100], texts[s : s + 100], strict=True)))
        uf = UnionFind(len(urls))
        for i, rep in enumerate(reps):
            if rep is not None:
                uf.union(i, pos[rep])
        default = " (default)" if perm == 512 else ""
        report(f"crawl-time NearDupIndex, {perm} perms × {bits} bits{default}", pairs(uf.groups().values()))
    docs = list(zip(urls, texts, strict=True))
    report("post-crawl, exact confirmation (default)", cluster_texts(docs, threshold).pair_set())
    report("post-crawl, 128-perm estimate only", cluster_texts(docs, threshold, confirm="estimate").pair_set())
    exact = UnionFind(len(urls))
    for (a, b), j in exact_jaccard_pairs(texts).items():
        if j >= threshold:
            exact.union(a, b)
    report(f"exact Jaccard ≥ {threshold} of all pairs (reference)", pairs(exact.groups().values()))


def crawl_suppression(hosts: int, seed: int, delay: float, max_pages: int, per_host: int | None = None) -> None:
    """Crawl the same websim twice with ``raycrawl``'s agent — near-duplicate link suppression on,
    then off — and count the pages fetched, overall and on duplicate-carrying hosts."""
    from raycrawl.actors.cluster.driver import run_crawl
    from raycrawl.settings import build_settings
    from raycrawl.storage.link_records import iter_link_records
    from raycrawl.tasks.dedup import cluster_crawl
    from raycrawl.websim import Websim

    print()
    print(f"crawl over websim ({hosts} hosts, seed {seed}; host/IP delay {delay} s; budget {max_pages or 'none'}; "
          f"URLs per host {per_host or 'default'})")
    with tempfile.TemporaryDirectory() as tmp, Websim(hosts=hosts, ips=10, seed=seed, out_dir=Path(tmp) / "web") as web:
        manifest = web.manifest
        role = {h: rec["role"] for h, rec in manifest.hosts.items()}
        dns_ip, dns_port = web.dns_address
        for near in (True, False):
            out = Path(tmp) / f"crawl-{'on' if near else 'off'}"
            settings = build_settings(
                seeds=str(web.seeds_file), out=str(out), dns_server=f"{dns_ip}:{dns_port}",
                allow_networks="127.0.0.0/8", host_delay=delay, ip_delay=delay, max_pages=max_pages,
                near_dup=near, max_urls_per_host=per_host,
            )
            t0 = time.perf_counter()
            report = run_crawl(settings)
            took = time.perf_counter() - t0
            by_role: dict[str, int] = {}
            near_flagged = 0
            for rec in iter_link_records(out):
                r = role.get(manifest.host_name(rec.url), "?")
                by_role[r] = by_role.get(r, 0) + 1
                near_flagged += rec.dup_kind == "near"
            dup_hosts = {k: v for k, v in sorted(by_role.items()) if k in ("mirror", "near_miss", "exact_mirror", "session")}
            summary = cluster_crawl(out)
            print(f"  near-dup suppression {'ON ' if near else 'OFF'}: {report.get('pages')} pages fetched in {took:.0f} s; "
                  f"near-dups flagged at crawl time {near_flagged}; pages on duplicate hosts {dup_hosts}; "
                  f"post-crawl: {summary['clusters']} clusters, {summary['duplicate_pages']} duplicate pages")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--docs", type=int, default=3000)
    ap.add_argument("--words", type=int, default=300)
    ap.add_argument("--num-perm", type=int, default=128)
    ap.add_argument("--threshold", type=float, default=0.9)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--batch", type=int, default=100, help="pages per check_and_add call (crawl-time batches)")
    ap.add_argument("--websim-hosts", type=int, default=400, help="hosts of the websim ground-truth web (0: skip)")
    ap.add_argument("--websim-seed", type=int, default=3)
    ap.add_argument("--crawl-hosts", type=int, default=0,
                    help="also crawl a websim of this many hosts with near-dup suppression on and off (minutes)")
    ap.add_argument("--crawl-delay", type=float, default=0.05, help="host and IP delay of those crawls")
    ap.add_argument("--crawl-max-pages", type=int, default=0)
    ap.add_argument("--crawl-max-urls-per-host", type=int, default=None,
                    help="bounds websim's infinite trap hosts so a crawl without a budget ends")
    ap.add_argument("--only-crawl", action="store_true", help="run only the crawl comparison")
    args = ap.parse_args()

    if args.only_crawl:
        crawl_suppression(args.crawl_hosts or 60, args.websim_seed, args.crawl_delay, args.crawl_max_pages,
                          args.crawl_max_urls_per_host)
        return
    import datasketch

    P, n = args.num_perm, args.docs
    docs, labels = make_corpus(n, args.words, seed=1)
    rows = []

    def row(name, seconds, peer=None):
        rows.append((name, n / seconds, peer))

    # --- sketching -------------------------------------------------------------------------
    t_tok, toks = best_of(args.repeat, lambda: [tokens(d) for d in docs])
    t_sh, shingles = best_of(args.repeat, lambda: [shingle_hashes_of_tokens(t) for t in toks])
    t_rensa, sk = best_of(args.repeat, lambda: sketch_matrix(shingles, P))
    t_np, _ = best_of(1, lambda: numpy_minhash(shingles, P))
    t_512, sk512 = best_of(args.repeat, lambda: sketch_matrix(shingles, CRAWL_NUM_PERM))

    def ds_strings():
        out = []
        for t in toks:
            m = datasketch.MinHash(num_perm=P)
            m.update_batch([" ".join(t[i : i + 4]).encode() for i in range(len(t) - 3)])
            out.append(m)
        return out

    def ds_hashed():
        out = []
        for s in shingles:
            m = datasketch.MinHash(num_perm=P, hashfunc=int, scheme="affine64")
            m.update_batch(s.tolist())
            out.append(m)
        return out

    t_ds, ds_sketches = best_of(args.repeat, ds_strings)
    t_ds_h, _ = best_of(args.repeat, ds_hashed)

    def rensa_strings():
        import rensa

        out = []
        for t in toks:
            m = rensa.RMinHash(num_perm=P, seed=1)
            m.update([" ".join(t[i : i + 4]) for i in range(len(t) - 3)])
            out.append(m)
        return out

    t_rs, _ = best_of(args.repeat, rensa_strings)

    print(f"corpus: {n} pages × {args.words} words (Zipf), {P} permutations, 1 core; best of {args.repeat}")
    print()
    print(f"{'sketching (tokens → sketch)':58s} {'docs/s':>10s}")
    ours_total = n / (t_sh + t_rensa)
    ds_total = n / t_ds
    print(f"{'  ours: xxh3 shingles (numpy) + rensa flat matrix':58s} {ours_total:10,.0f}")
    print(f"{'  datasketch MinHash.update_batch (sha1 of shingles)':58s} {ds_total:10,.0f}   ours/ds = {ours_total / ds_total:.1f}×")
    print(f"{'  rensa RMinHash.update, one object per page':58s} {n / t_rs:10,.0f}")
    print(f"{'sketching only (same 64-bit shingle hashes in)':58s}")
    print(f"{'  ours: rensa flat matrix':58s} {n / t_rensa:10,.0f}")
    print(f"{'  datasketch (hashfunc=identity)':58s} {n / t_ds_h:10,.0f}   ours/ds = {t_ds_h / t_rensa:.1f}×")
    print(f"{'  own numpy multiply-shift MinHash':58s} {n / t_np:10,.0f}   rensa/numpy = {t_np / t_rensa:.1f}×")
    print(f"{'  ours: rensa, 512 permutations (crawl-time default)':58s} {n / t_512:10,.0f}")
    print(f"{'text → tokens (raycrawl.text.tokens, shared by all)':58s} {n / t_tok:10,.0f}")
    print(f"{'full text → sketch, ours (tokens + shingles + rensa)':58s} {n / (t_tok + t_sh + t_rensa):10,.0f}")

    # --- LSH insert + query (crawl-time: query, add if new) -------------------------------
    urls = [f"http://p{i}.test/" for i in range(n)]
    nonempty = np.ones(n, dtype=bool)

    def ours_memory(perm=P, bits=32, sketches=sk):
        index = NearDupIndex(num_perm=perm, sketch_bits=bits, threshold=args.threshold)
        out = []
        for s in range(0, n, args.batch):
            out += index.check_and_add_sketches(urls[s : s + args.batch], sketches[s : s + args.batch], nonempty[s : s + args.batch])
        return out

    def datasketch_lsh():
        lsh = datasketch.MinHashLSH(threshold=args.threshold, num_perm=P)
        out = []
        for i, m in enumerate(ds_sketches):
            hits = lsh.query(m)
            best = None
            for h in hits:
                j = m.jaccard(ds_sketches[h])
                if j >= args.threshold and (best is None or j > best[0]):
                    best = (j, h)
            if best is None:
                lsh.insert(i, m)
            out.append(urls[best[1]] if best else None)
        return out

    t_mem, ours_res = best_of(args.repeat, ours_memory)
    t_mem512, _ = best_of(args.repeat, lambda: ours_memory(CRAWL_NUM_PERM, CRAWL_SKETCH_BITS, sk512))
    t_dsl, ds_res = best_of(args.repeat, datasketch_lsh)

    from raycrawl.actors.visit.duplicates import ShardedDuplicates, ask_local
    from raycrawl.actors.visit.shingler import near_dup_meta
    from raycrawl.policies.assignment import SHARDS
    from raycrawl.storage.dedup_store import DedupShards

    with tempfile.TemporaryDirectory() as tmp:
        counter = iter(range(10**6))
        roots: list[Path] = []

        def ours_disk():
            # Crawl-time defaults (512 permutations × 8 bits), over the 64 shard files a crawl keeps.
            roots.append(Path(tmp) / f"run{next(counter)}")
            stores = DedupShards(roots[-1], range(SHARDS))
            stores.set_meta(near_dup_meta())
            index = NearDupIndex(store=ShardedDuplicates(ask_local(stores)), threshold=args.threshold)
            out = []
            for s in range(0, n, args.batch):
                out += index.check_and_add_sketches(urls[s : s + args.batch], sk512[s : s + args.batch], nonempty[s : s + args.batch])
            reps = stores.counts()["rep"]
            stores.close()
            return out, reps

        t_red, (red_res, reps) = best_of(args.repeat, ours_disk)
        per_rep = sum(f.stat().st_size for f in roots[-1].rglob("*.sqlite*")) / max(reps, 1)

    print()
    print(f"{'LSH insert+query (threshold ' + str(args.threshold) + ', batches of ' + str(args.batch) + ')':58s} {'docs/s':>10s}")
    print(f"{'  ours NearDupIndex, in memory, 128 × 32 bits':58s} {n / t_mem:10,.0f}   ours/ds = {t_dsl / t_mem:.1f}×")
    print(f"{'  ours NearDupIndex, in memory, 512 × 8 bits (default)':58s} {n / t_mem512:10,.0f}   ours/ds = {t_dsl / t_mem512:.1f}×")
    print(f"{'  ours NearDupIndex, 64 shard files on disk, 512 × 8 bits':58s} {n / t_red:10,.0f}   ours/ds = {t_dsl / t_red:.1f}×")
    print(f"{'  datasketch MinHashLSH query + insert':58s} {n / t_dsl:10,.0f}")
    print(f"  near-duplicates flagged: ours {sum(r is not None for r in ours_res)}, "
          f"on disk {sum(r is not None for r in red_res)}, datasketch {sum(r is not None for r in ds_res)}")
    print(f"  disk per representative: {per_rep:,.0f} B, 64 shard files ({reps} representatives; sketch alone "
          f"{CRAWL_NUM_PERM * CRAWL_SKETCH_BITS // 8} B)")

    # --- accuracy ---------------------------------------------------------------------------
    print()
    rng = random.Random(2)
    errs, bounds = [], []
    pairs = exact_jaccard_pairs(docs[: min(n, 3000)])
    sample = list(pairs.items())
    rng.shuffle(sample)
    for (i, j), true in sample[:3000]:
        est = float(np.count_nonzero(sk[i] == sk[j])) / P
        errs.append(abs(est - true))
        bounds.append(math.sqrt(true * (1 - true) / P))
    print(f"Jaccard estimate on {len(errs)} pairs sharing a shingle: MAE {np.mean(errs):.4f}, "
          f"theoretical sqrt(J(1-J)/P) mean {np.mean(bounds):.4f} (E|err| ≈ 0.8 × that)")
    m = min(n, 3000)
    t_cl, result = best_of(1, lambda: cluster_texts([(urls[i], docs[i]) for i in range(m)], args.threshold, P))
    predicted = result.pair_set()
    by = {}
    for i in range(m):
        by.setdefault(labels[i], []).append(i)
    truth = {(a, b) for mem in by.values() for ai, a in enumerate(mem) for b in mem[ai + 1 :]}
    exact = {p for p, j in pairs.items() if j >= args.threshold}
    vt, ve = pair_metrics(predicted, truth), pair_metrics(predicted, exact)
    print(f"post-crawl clustering of {m} pages in {t_cl:.2f} s: {len(result.clusters)} clusters")
    print(f"  vs generator ground truth : precision {vt['precision']:.4f}  recall {vt['recall']:.4f}  ({vt['true_pairs']} true pairs)")
    print(f"  vs exact Jaccard ≥ {args.threshold}   : precision {ve['precision']:.4f}  recall {ve['recall']:.4f}  ({ve['true_pairs']} pairs)")
    if args.websim_hosts:
        websim_accuracy(args.websim_hosts, args.websim_seed, args.threshold)
    if args.crawl_hosts:
        crawl_suppression(args.crawl_hosts, args.websim_seed, args.crawl_delay, args.crawl_max_pages,
                          args.crawl_max_urls_per_host)
    # Sanity: the shared helper and the benchmark agree on what a shingle set is.
    assert exact_jaccard(set(shingle_hashes(docs[0]).tolist()), set(shingles[0].tolist())) == 1.0


if __name__ == "__main__":
    main()
