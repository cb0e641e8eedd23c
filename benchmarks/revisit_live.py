"""A periodic crawl of an evolving web: do pages that change more often get revisited more often?
(issue 18, seed 001's periodic crawler)

1. websim serves epoch 0 of a web whose pages each change with a chance of their own per epoch
   (``--change-rates``: the manifest's ``change_p``); ``raycrawl crawl`` crawls it (pass 0).
2. For K = 1 … ``--passes``: websim is restarted at epoch K on the same port (the URLs stay the
   same) and ``raycrawl crawl --revisit`` runs pass K over the same crawl directory.
3. Per page crawled in pass 0 (an HTML page of a host that evolves), the number of passes that
   revisited it is compared with its true change rate: Spearman's rank correlation, and the mean
   revisits per change-rate quartile, side by side with what a uniform schedule (every page
   every pass) would spend.
4. Every pass's requests are audited against websim's request log and manifest (politeness,
   robots, no URL twice in a pass), and its archive against websim's bytes: a 304's
   server-not-modified revisit refers to a capture holding exactly the bytes websim serves at
   that epoch, an identical-payload revisit's digest is its referent's, and a changed page's new
   response holds exactly the bytes served.

    .venv/bin/python benchmarks/revisit_live.py
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from _crawl import crawl_cli as crawl  # noqa: E402 - benchmarks/ is on the path when run as a script


def check_pass(out: Path, epoch: int, params: dict, port: int) -> dict:
    """Pass ``epoch``'s archive against websim's ground truth: a 304's revisit refers to a capture
    holding exactly the bytes websim serves at this epoch; an identical-payload revisit's digest
    is its referent's; a full response (a changed or new page) holds exactly those bytes."""
    from raycrawl.storage.link_records import iter_link_records
    from raycrawl.storage.warc import read_record_at, sha1_b32, warc_date
    from raycrawl.websim.model import WebModel
    from raycrawl.websim.render import Renderer

    model = WebModel.generate(**params, epoch=epoch)
    renderer = Renderer(model, port)
    records = list(iter_link_records(out))
    full = {(r.url, warc_date(r.time)): r.warc for r in records if r.warc and not r.revisit_of}
    counts = {"not-modified": 0, "identical": 0, "full": 0, "violations": 0}
    for r in records:
        if r.epoch != epoch or r.status not in (200, 304) or epoch == 0:
            continue
        host = model.by_name[r.url.split("/")[2].rsplit(":", 1)[0]]
        page = host.pages.get("/" + r.url.split("/", 3)[3])
        if page is None or page.kind != "html":
            continue
        served = renderer.response(host, page).body
        ref = r.revisit_of
        if ref is None:
            counts["full"] += 1  # changed, or new
            body = read_record_at(out / "warc", *r.warc)[2]
        else:
            counts["not-modified" if r.status == 304 else "identical"] += 1
            pos = full.get(tuple(ref))
            body = read_record_at(out / "warc", *pos)[2] if pos else None
            if r.status == 200 and r.sha1 != sha1_b32(body or b""):
                counts["violations"] += 1
        counts["violations"] += body != served
    return counts


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--hosts", type=int, default=80)
    ap.add_argument("--ips", type=int, default=20)
    ap.add_argument("--pages", type=float, default=20.0, help="mean pages per host")
    ap.add_argument("--seed", type=int, default=5, help="websim seed")
    ap.add_argument("--passes", type=int, default=6, help="revisit passes after the first crawl")
    ap.add_argument("--max-pages", type=int, default=0, help="budget of the first crawl (0: the whole web)")
    ap.add_argument("--full-web", action="store_true",
                    help="websim's whole web (traps, faults, spam) instead of plain hosts only")
    ap.add_argument("--keep", type=Path, default=None, help="keep the crawl and websim files here")
    ap.add_argument("--host-delay", type=float, default=0.05)
    ap.add_argument("--ip-delay", type=float, default=0.01)
    args = ap.parse_args()

    from raycrawl.redis_server import free_port
    from raycrawl.websim import Websim
    from raycrawl.websim.audit import audit

    env = {**os.environ, "RAY_AUTH_MODE": os.environ.get("RAY_AUTH_MODE", "disabled")}
    port = free_port()
    with tempfile.TemporaryDirectory(prefix="revisit-live-") as tmp:
        if args.keep:
            tmp = str(args.keep)
        out = Path(tmp) / "crawl"
        violations = 0
        for k in range(args.passes + 1):
            with Websim(hosts=args.hosts, ips=args.ips, seed=args.seed, epoch=k, pages_per_host_mean=args.pages,
                        port=port, change_rates=True, out_dir=Path(tmp) / f"web{k}", clean=not args.full_web) as web:
                extra = ("--seeds", str(web.seeds_file), "--max-pages", str(args.max_pages)) if k == 0 else ("--revisit",)
                t0 = time.time()
                report = crawl(env, web, out, *extra, host_delay=args.host_delay, ip_delay=args.ip_delay)
                a = audit(web.requests(), web.manifest, args.host_delay, args.ip_delay)
                violations += len(a.violations)
                params = {"hosts": args.hosts, "ips": args.ips, "seed": args.seed, "pages_per_host_mean": args.pages,
                          "change_rates": True, "clean": not args.full_web}
                warc = check_pass(out, k, params, port)
                violations += warc["violations"]
                print(f"pass {k}: {report['pages']} pages so far, {time.time() - t0:.1f} s, revisits "
                      f"{report.get('revisits')}, audit violations {len(a.violations)}, WARC vs websim {warc}",
                      flush=True)
                if k == args.passes:
                    manifest = web.manifest
        print(json.dumps(analyse(out, manifest, args.passes), indent=2))
        print(f"audit + WARC violations (all passes): {violations}")
    return 0


def analyse(out: Path, manifest, passes: int) -> dict:
    from scipy.stats import spearmanr

    from raycrawl.storage.crawl_epochs import histories

    hs = histories(out)
    rates, visits, fresh, changes = [], [], [], []
    for url, page in manifest.pages.items():
        h = hs.get(url)
        if h is None or not h.visits or h.visits[0].epoch != 0 or page["kind"] != "html":
            continue
        if manifest.hosts[page["host"]]["role"] not in ("plain", "keyword_stuffing"):
            continue
        rates.append(page["change_p"])
        visits.append(sum(1 for v in h.visits if v.epoch > 0))
        fresh.append(sorted({v.epoch for v in h.visits}))
        changes.append(set(page["changed"]))
    rates_a, visits_a = np.array(rates), np.array(visits)
    rho = spearmanr(rates_a, visits_a).statistic
    qs = np.quantile(rates_a, [0.25, 0.5, 0.75])
    bins = np.digitize(rates_a, qs)
    # Freshness (Cho & Garcia-Molina): the share of (page, pass) pairs after which the archive holds
    # the page's current version, i.e. no change since its last visit. A uniform schedule with the
    # same number of fetches visits every page every `every` passes, staggered.
    every = max(1, round(len(rates) * passes / max(1, int(visits_a.sum()))))

    def freshness(visit_sets) -> float:
        ok = [not any(last < c <= k for c in ch) for vs, ch in zip(visit_sets, changes, strict=True)
              for k in range(1, passes + 1) for last in [max(e for e in vs if e <= k)]]
        return round(float(np.mean(ok)), 3)

    uniform_same = [sorted({0} | {k for k in range(1, passes + 1) if (k + i) % every == 0}) for i in range(len(rates))]
    return {"pages": len(rates), "passes": passes, "spearman_rate_vs_revisits": round(float(rho), 3),
            "freshness": freshness(fresh), "freshness_uniform_same_fetches": freshness(uniform_same),
            "uniform_interval_same_fetches": every, "freshness_never_revisited": freshness([[0]] * len(rates)),
            "mean_revisits_by_rate_quartile": [round(float(visits_a[bins == b].mean()), 2) for b in range(4)],
            "quartile_rate_ranges": [round(float(x), 3) for x in qs],
            "revisits": int(visits_a.sum()), "uniform_revisits": len(rates) * passes}


if __name__ == "__main__":
    raise SystemExit(main())
