"""The URL map: URL ⇄ node id, compressed (Guillaume, Latapy, Viennot, seed 002, §2).

Node ids are the ranks of the URLs in the lexicographic order of their **sort keys**, URLs
written with reversed host names (the paper's proposed improvement): pages of a site, and of
its sub-domains, get consecutive ids, which is what makes links local and the graph compress.

Sort key (``url_sort_key``), invertible by ``key_to_url``::

    http://www.example.test:8080/a?b   ->  test.example.www!:8080/a?b
    https://example.test/              ->  test.example!s/
    http://127.0.0.1/x                 ->  1.0.0.127!/x

host labels reversed, then ``!`` (which sorts before every host character, so a host's pages —
all schemes and ports — are contiguous and directly followed by its sub-domains), then ``s`` for
https, then ``:port`` if the URL has one, then path and query as they are. Anything else
(other schemes, odd authorities) gets the key ``~`` + URL, so every string has a key and the
map stays exact.

On disk (``PATH`` is a file): ``header | block index | blocks``. URLs (as keys) are cut into
blocks of ``block_size`` consecutive keys; a block front-codes its keys (γ-free varint
"common prefix length, suffix length, suffix bytes", the first key in full) and is then
zlib-compressed. The block index holds each block's file offset and its first key, so
``id_of`` binary-searches the first keys in memory and decompresses one block; ``url_of``
goes straight to block ``i // block_size``.
"""

from __future__ import annotations

import logging
import re

log = logging.getLogger(__name__)

_URL_RE = re.compile(r"^(https?)://([a-z0-9_.\-]+|\[[0-9a-f:.]+\])(?::(\d{1,5}))?(/[^#]*)?\Z")
_FALLBACK = "~"


def url_sort_key(url: str) -> str:
    """The reversed-host key whose lexicographic order defines node ids (see module doc)."""
    m = _URL_RE.match(url)
    if m is None:
        return _FALLBACK + url
    scheme, host, port, path = m.groups()
    if not host.startswith("["):
        host = ".".join(reversed(host.split(".")))
    key = host + ("!s" if scheme == "https" else "!")
    if port is not None:
        key += ":" + port
    return key + (path or "")


_KEY_RE = re.compile(r"^([a-z0-9_.\-]+|\[[0-9a-f:.]+\])!(s)?(?::(\d{1,5}))?(/.*)?\Z", re.S)


def key_to_url(key: str) -> str:
    """Inverse of ``url_sort_key``."""
    if key.startswith(_FALLBACK):
        return key[len(_FALLBACK):]
    m = _KEY_RE.match(key)
    if m is None:
        raise ValueError(f"not a URL sort key: {key!r}")
    host, https, port, path = m.groups()
    if not host.startswith("["):
        host = ".".join(reversed(host.split(".")))
    url = ("https://" if https else "http://") + host
    if port is not None:
        url += ":" + port
    return url + (path or "")
