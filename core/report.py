"""The crawl report (``DIR/report.json``): what was fetched, what went wrong, how fast.

Built from the crawl counters in Redis (``P stats``), so it covers every run of a resumed crawl.
Fields:

=================== ===========================================================================
``pages``           link records written: every URL the crawl dealt with (fetched or failed)
``by_status``       pages by HTTP status ("0" = no response: see ``errors``)
``by_type``         pages with a response, by media type
``duplicates``      ``exact`` (same content digest as an earlier page), ``near`` (MinHash)
``bytes``           body bytes received (after decompression) of pages and robots.txt
``errors``          pages by error kind: dns, connect, timeout, reset, too-large, bomb, robots,
                    forbidden-network, bad-response, http-4xx, http-5xx, …
``filtered``        links rejected before the sieve, by filter; ``max-urls-per-host`` too
``robots_fetches``  robots.txt exchanges; ``retries``: transient failures fetched again
``robots_errors``   robots.txt exchanges by error kind (a host whose robots.txt is unreachable or
                    5xx is off limits: its pages count as error ``robots-unavailable``)
``elapsed_s``       wall time of this run; ``pages_per_s`` = pages of this run / elapsed_s
``stopped``         "frontier empty", "budget spent", "interrupted" (Ctrl-C, SIGTERM) or "stopped" (raycrawl ctl stop)
=================== ===========================================================================
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from raycrawl.atomic import replacing


def _group(stats: dict[str, int], prefix: str) -> dict[str, int]:
    return {k[len(prefix):]: v for k, v in sorted(stats.items()) if k.startswith(prefix) and v}


def build_report(stats: dict[str, int], *, elapsed: float, run_pages: int, stopped: str,
                 frontier: dict[str, int] | None = None, extra: dict[str, Any] | None = None) -> dict[str, Any]:
    report: dict[str, Any] = {
        "pages": stats.get("pages", 0),
        "by_status": _group(stats, "status:"),
        "by_type": _group(stats, "ctype:"),
        "duplicates": {"exact": stats.get("dup:exact", 0), "near": stats.get("dup:near", 0)},
        "bytes": stats.get("bytes", 0),
        "errors": _group(stats, "error:"),
        "filtered": _group(stats, "filtered:"),
        "robots_fetches": stats.get("robots", 0),
        "robots_errors": _group(stats, "robots_error:"),
        "redirects": stats.get("redirects", 0),
        "retries": stats.get("retries", 0),
        "proxy_failures": stats.get("proxy_failures", 0),  # requests a proxy failed (put back, tried again)
        "session_exchanges": stats.get("session_exchanges", 0),  # form logins and login walls (archived)
        "recovered": stats.get("recovered", 0),
        "virtualized": stats.get("virtualized", 0),
        "links_followed": stats.get("links", 0),
        "revisits": _group(stats, "revisit:"),
        "rendered": stats.get("rendered", 0),
        "render": _group(stats, "render:"),
        "elapsed_s": round(elapsed, 3),
        "pages_per_s": round(run_pages / elapsed, 2) if elapsed > 0 else 0.0,
        "stopped": stopped,
    }
    if frontier is not None:
        report["frontier"] = frontier
    if extra:
        report.update(extra)
    return report


def write_report(path: str | Path, report: dict[str, Any]) -> None:
    """Atomically replace ``path`` with the report (JSON)."""
    path = Path(path)
    with replacing(path) as tmp:
        tmp.write_text(json.dumps(report, indent=2, sort_keys=False) + "\n")


def format_report(report: dict[str, Any]) -> str:
    """A few human-readable lines."""
    lines = [
        f"pages {report['pages']}  ({report['pages_per_s']} pages/s over {report['elapsed_s']} s; "
        f"stopped: {report['stopped']})",
        "status  " + "  ".join(f"{k}:{v}" for k, v in report["by_status"].items()),
        "types   " + "  ".join(f"{k}:{v}" for k, v in report["by_type"].items()),
        f"dups    exact:{report['duplicates']['exact']}  near:{report['duplicates']['near']}   "
        f"bytes {report['bytes']}  robots.txt {report['robots_fetches']}  retries {report['retries']}",
        "errors  " + ("  ".join(f"{k}:{v}" for k, v in report["errors"].items()) or "none"),
        "robots.txt errors  " + ("  ".join(f"{k}:{v}" for k, v in report.get("robots_errors", {}).items()) or "none"),
        "filtered " + ("  ".join(f"{k}:{v}" for k, v in report["filtered"].items()) or "none"),
    ]
    if report.get("rendered") or report.get("render"):
        lines.append(f"rendered {report.get('rendered', 0)}  " + "  ".join(
            f"{k}:{v}" for k, v in report.get("render", {}).items()))
    if report.get("pass"):
        lines.append(f"pass {report['pass']}  revisits (all passes) " + "  ".join(
            f"{k}:{v}" for k, v in report.get("revisits", {}).items()))
    return "\n".join(lines)
