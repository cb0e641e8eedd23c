"""What Redis holds of a crawl's frontier, host by host, for a test's failure message: a crawl that
does not end with URLs queued shows which view holds them and why no agent takes them (the keys
of storage/lua/*.lua: ``P`` the crawl's prefix, each view's ``active``/``ent:IP``/``wb``/``virt``)."""

from __future__ import annotations

import time


def frontier_dump(r, prefix: str = "rc:", limit: int = 40) -> str:
    def s(x) -> str:
        return x.decode() if isinstance(x, bytes) else str(x)

    now = time.time()
    views = sorted(s(v) for v in r.smembers(prefix + "views"))
    lines = [f"now {now:.1f}; views {views}; queued {s(r.get(prefix + 'queued'))}; "
             f"hbusy {r.hlen(prefix + 'hbusy')}; ibusy {sorted(s(i) for i in r.smembers(prefix + 'ibusy'))}; "
             f"inflight {r.hlen(prefix + 'inflight')}"]
    for v in views:
        wb = [(s(ip), round(score - now, 1)) for ip, score in r.zrange(v + "wb", 0, -1, withscores=True)]
        lines.append(f"view {v}: fenced {r.exists(v + 'fenced')}, active {r.scard(v + 'active')}, "
                     f"virt {sum(int(x) for x in r.hvals(v + 'virt'))}, wb (ip, due in s) {wb}")
    active = [(v, s(h)) for v in views for h in r.smembers(v + "active")]
    for v, host in sorted(active)[:limit]:
        ip = s(r.hget(prefix + "hostip", host))
        ents = {w: r.zscore(w + "ent:" + ip, host) for w in views}
        lines.append(
            f"  {host} active in {v}: owner {s(r.hget(prefix + 'howner', host))}, ip {ip}, "
            f"vs {r.llen(prefix + 'vs:' + host)}, busy {s(r.hget(prefix + 'hbusy', host))}, "
            f"hnext {s(r.hget(prefix + 'hnext', host))}, inext {s(r.hget(prefix + 'inext', ip))}, "
            f"in ent of {[w for w, sc in ents.items() if sc is not None]}, virt {s(r.hget(v + 'virt', host))}")
    return "\n".join(lines)
