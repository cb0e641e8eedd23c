"""Servers: what politeness counts requests to, and the visit-state entries that name a URL on one.

A *server* is a URL's host name (``example.org``, ``127.0.0.1``, ``[::1]``), whatever its scheme and
port: ``http://example.org/``, ``https://example.org/`` and ``http://example.org:8080/`` are one
server, with one visit state, one next-fetch time and one Crawl-delay. A webmaster counts the
requests a host name receives, and a site answering on both schemes (mixed links, an http→https
migration) would otherwise be crawled at twice its delay. A non-default port shares the name's
schedule too: it is the same machine, or one behind the same name, and politeness errs on the side
of fewer requests. (Heritrix's default queues, keyed by SURT authority, share across schemes but
give a non-default port its own queue; we are stricter.)

robots.txt stays per *origin* (scheme, name, port), as RFC 9309 §2.3 says: the rules of
``https://example.org/robots.txt`` govern https URLs only.

An *entry* of a server's visit state is the URL without scheme and name: the path+query, behind a
short tag naming the origin when it is not http on port 80 — ``s`` for https, ``:<port>`` for a
non-default port. So ``http://a.test/x`` is ``/x`` on server ``a.test``, ``https://a.test/x?q`` is
``s/x?q`` and ``https://a.test:8443/`` is ``s:8443/``. A tag never contains ``/`` or ``!``, and a
path always starts with ``/``: the entry splits back unambiguously. The robots.txt marker of the
workbench (``!robots…``) carries the tag of the origin it fetches the rules of in the same way.
"""

from __future__ import annotations

SCHEMES = {"http": "", "https": "s"}


def split_server(url: str) -> tuple[str, str]:
    """(server, entry) of a canonical http(s) URL (``raycrawl.urls.canonicalize``'s form: a
    default port is never written, the path always starts with ``/``)."""
    scheme, _, rest = url.partition("://")
    cut = rest.find("/")
    if cut < 0:
        netloc, path = rest, "/"
    else:
        netloc, path = rest[:cut], rest[cut:]
    server, port = _split_port(netloc)
    return server, SCHEMES[scheme] + (":" + port if port else "") + path


def server_of(url: str) -> str:
    """The server (host name) of a canonical URL."""
    return split_server(url)[0]


def split_tag(entry: str) -> tuple[str, str]:
    """(origin tag, the rest: path+query or the robots marker) of a visit-state entry."""
    cut = min((i for i in (entry.find("/"), entry.find("!")) if i >= 0), default=len(entry))
    return entry[:cut], entry[cut:]


def origin_of(server: str, entry: str) -> tuple[str, str]:
    """(``scheme://name[:port]``, the rest: path+query or the robots marker) of a visit-state entry."""
    if entry[:1] in ("/", "!"):
        return "http://" + server, entry
    tag, rest = split_tag(entry)
    scheme = "https" if tag.startswith("s") else "http"
    port = tag.partition(":")[2]
    return f"{scheme}://{server}" + (f":{port}" if port else ""), rest


def name_of(server: str) -> str:
    """The name a resolver is asked for (an IPv6 literal without its brackets)."""
    return server[1:-1] if server.startswith("[") else server


def _split_port(netloc: str) -> tuple[str, str]:
    if netloc.endswith("]") or ":" not in netloc:
        return netloc, ""
    name, _, port = netloc.rpartition(":")
    return name, port


def url_of(server: str, entry: str) -> str:
    """The URL a visit-state entry of ``server`` names (a marker: its origin, then the marker)."""
    origin, rest = origin_of(server, entry)
    return origin + rest
