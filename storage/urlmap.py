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

On disk (``PATH`` is a file)::

    header | token vocabulary | deflate preset dictionary | blocks | block index

Keys are cut into blocks of ``block_size`` consecutive keys. Within a block each key is
front-coded against the previous one — ``varint(common prefix)`` (backed off to a token
boundary) then its remaining **tokens** (runs of letters, runs of digits, single other bytes):
``varint(rank + 2)`` for a token of the map's vocabulary (tokens seen at least twice, ranked
by frequency, so frequent ones take one byte), ``1, varint(length), bytes`` for a rare token,
``0`` to end the key. Each block is then raw-deflated with a preset dictionary sampled from the
map's own encoded blocks. Small blocks cannot learn a site's vocabulary by themselves (generic
compression of 32 URLs gets ~11 bytes/URL on websim URLs, whole-file gzip ~8.7); the shared
vocabulary and dictionary give it to them (~6 bytes/URL). The block index holds each block's
offset and first key, so ``id_of`` binary-searches the first keys in memory and inflates one
block, ``url_of`` goes straight to block ``i // block_size``; both decode only up to the key.
"""

from __future__ import annotations

import bisect
import logging
import random
import re
import struct
import zlib
from collections.abc import Iterable, Iterator
from pathlib import Path

from raycrawl.errors import UserError

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


# ---- the compressed map ------------------------------------------------------------------------

MAGIC = b"RCURLMAP"
VERSION = 2
# magic, version, block_size, n, vocabulary length, dictionary length, index offset, index length
_HEADER = struct.Struct("<8sIIQIIQQ")
DEFAULT_BLOCK_SIZE = 32
ZLIB_LEVEL = 9
DICT_SIZE = 32768  # deflate's window: a larger preset dictionary could not be referenced
_TOKEN = re.compile(rb"[a-z]+|[0-9]+|[^a-z0-9]", re.S)


def _token_lcp(prev: bytes, key: bytes) -> int:
    """Common prefix length, backed off so that it never splits a letter or digit run."""
    lcp = 0
    limit = min(len(prev), len(key))
    while lcp < limit and prev[lcp] == key[lcp]:
        lcp += 1
    while 0 < lcp < len(key) and _same_run(key[lcp - 1], key[lcp]):
        lcp -= 1
    return lcp


def _same_run(a: int, b: int) -> bool:
    return (97 <= a <= 122 and 97 <= b <= 122) or (48 <= a <= 57 and 48 <= b <= 57)


def _tokenised(keys: list[bytes], prev: bytes = b"") -> list[tuple[int, list[bytes]]]:
    out = []
    for k in keys:
        lcp = _token_lcp(prev, k)
        out.append((lcp, _TOKEN.findall(k, lcp)))
        prev = k
    return out


def _encode_block(entries: list[tuple[int, list[bytes]]], rank: dict[bytes, int]) -> bytes:
    out = bytearray()
    for lcp, toks in entries:
        _varint(lcp, out)
        for t in toks:
            r = rank.get(t)
            if r is None:
                out.append(1)
                _varint(len(t), out)
                out += t
            else:
                _varint(r + 2, out)
        out.append(0)
    return bytes(out)


def _decode_block(data: bytes, count: int, vocab: list[bytes], first: bytes,
                  stop: bytes | None = None) -> list[bytes]:
    """The first ``count`` keys of a block whose first key (kept in the block index) is
    ``first`` and whose other keys are in ``data`` (stopping at the first key ``>= stop``)."""
    keys = [first]
    prev = first
    pos = 0
    if stop is not None and first >= stop:
        return keys
    for _ in range(count - 1):
        lcp = data[pos]
        pos += 1
        if lcp & 0x80:
            lcp, pos = _read_varint_tail(data, pos, lcp)
        parts = [prev[:lcp]]
        while True:
            t = data[pos]
            pos += 1
            if t & 0x80:
                t, pos = _read_varint_tail(data, pos, t)
            if t >= 2:
                parts.append(vocab[t - 2])
            elif t == 1:
                ln = data[pos]
                pos += 1
                if ln & 0x80:
                    ln, pos = _read_varint_tail(data, pos, ln)
                parts.append(data[pos : pos + ln])
                pos += ln
            else:
                break
        prev = b"".join(parts)
        keys.append(prev)
        if stop is not None and prev >= stop:
            break
    return keys


def _varint(v: int, out: bytearray) -> None:
    while v >= 0x80:
        out.append((v & 0x7F) | 0x80)
        v >>= 7
    out.append(v)


def _front_code(keys: list[bytes]) -> bytes:
    """``varint(lcp) varint(len(suffix)) suffix`` per key (lcp with the previous key, 0 first)."""
    out = bytearray()
    prev = b""
    for k in keys:
        lcp = 0
        limit = min(len(prev), len(k))
        while lcp < limit and prev[lcp] == k[lcp]:
            lcp += 1
        _varint(lcp, out)
        _varint(len(k) - lcp, out)
        out += k[lcp:]
        prev = k
    return bytes(out)


def _front_decode(data: bytes, count: int, stop: bytes | None = None) -> list[bytes]:
    """The first ``count`` keys of a front-coded block (all, or up to ``stop`` when given)."""
    keys: list[bytes] = []
    prev = b""
    pos = 0
    for _ in range(count):
        lcp = data[pos]
        pos += 1
        if lcp & 0x80:
            lcp, pos = _read_varint_tail(data, pos, lcp)
        ln = data[pos]
        pos += 1
        if ln & 0x80:
            ln, pos = _read_varint_tail(data, pos, ln)
        prev = prev[:lcp] + data[pos : pos + ln]
        pos += ln
        keys.append(prev)
        if stop is not None and prev >= stop:
            break
    return keys


def _read_varint_tail(data: bytes, pos: int, first: int) -> tuple[int, int]:
    v = first & 0x7F
    shift = 7
    while True:
        b = data[pos]
        pos += 1
        v |= (b & 0x7F) << shift
        if not b & 0x80:
            return v, pos
        shift += 7


class UrlMap:
    """URL ⇄ node id over a file written by ``UrlMap.build`` (layout in the module doc).

    Ids are ``0 .. len-1`` in sort-key order. Lookups decompress one block (``block_size``
    URLs); the block index (first key and offset of every block) is held in memory."""

    def __init__(self, path: Path, data: bytes, block_size: int, n: int, vocab: list[bytes], zdict: bytes,
                 first_keys: list[bytes], offsets: list[int]) -> None:
        self.path = path
        self._vocab = vocab
        self._zdict = zdict
        self._data = data
        self.block_size = block_size
        self._n = n
        self._first = first_keys
        self._offsets = offsets  # nblocks + 1 entries: block i is data[offsets[i]:offsets[i+1]]
        self._cache_id = -1
        self._cache = b""

    # ---- building ------------------------------------------------------------------------

    @classmethod
    def build(cls, urls: Iterable[str], path: str | Path, block_size: int = DEFAULT_BLOCK_SIZE) -> UrlMap:
        """Write the map of the distinct ``urls`` to ``path`` and open it.

        Duplicates are merged; ids are ranks in ``url_sort_key`` order. Written to a temporary
        file and renamed, so a crash never leaves a half-written map under ``path``."""
        if block_size < 1:
            raise ValueError("block_size must be >= 1")
        keys = sorted({url_sort_key(u).encode("utf-8") for u in urls})
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        # A block's first key lives in the block index (in memory when open): the block codes the
        # others, front-coded from it, so every block decodes on its own.
        blocks = [_tokenised(keys[b + 1 : b + block_size], keys[b]) for b in range(0, len(keys), block_size)]
        counts: dict[bytes, int] = {}
        for entries in blocks:
            for _, toks in entries:
                for t in toks:
                    counts[t] = counts.get(t, 0) + 1
        vocab = sorted((t for t, c in counts.items() if c >= 2), key=lambda t: (-counts[t], t))
        rank = {t: i for i, t in enumerate(vocab)}
        vocab_raw = bytearray()
        _varint(len(vocab), vocab_raw)
        for t in vocab:
            _varint(len(t), vocab_raw)
            vocab_raw += t
        vocab_z = zlib.compress(bytes(vocab_raw), ZLIB_LEVEL)
        coded = [_encode_block(entries, rank) for entries in blocks]
        # Preset dictionary: a deterministic sample of encoded blocks, so deflate finds the
        # common token-id patterns even in a block of a few URLs.
        sample = random.Random(0).sample(coded, min(len(coded), 1 + DICT_SIZE // 16))
        zdict = b"".join(sample)[-DICT_SIZE:]
        start = _HEADER.size + len(vocab_z) + len(zdict)
        body = bytearray()
        index = bytearray()
        offsets = []
        for block in coded:
            offsets.append(start + len(body))
            # Raw deflate (wbits -15): no per-block header or checksum.
            c = zlib.compressobj(ZLIB_LEVEL, zlib.DEFLATED, -15, 9, zlib.Z_DEFAULT_STRATEGY, zdict) \
                if zdict else zlib.compressobj(ZLIB_LEVEL, zlib.DEFLATED, -15, 9)
            body += c.compress(block) + c.flush()
        offsets.append(start + len(body))
        _varint(len(offsets), index)
        prev = 0
        for off in offsets:
            _varint(off - prev, index)
            prev = off
        index += _front_code([keys[b] for b in range(0, len(keys), block_size)])
        index_z = zlib.compress(bytes(index), ZLIB_LEVEL)
        header = _HEADER.pack(MAGIC, VERSION, block_size, len(keys), len(vocab_z), len(zdict), start + len(body),
                              len(index_z))
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_bytes(header + vocab_z + zdict + bytes(body) + index_z)
        tmp.replace(path)
        log.info("url map %s: %d URLs, %d bytes (%.2f bytes/URL)", path, len(keys),
                 tmp_size := path.stat().st_size, tmp_size / max(1, len(keys)))
        return cls.open(path)

    @classmethod
    def open(cls, path: str | Path) -> UrlMap:
        """Open a map file. Raises ``UserError`` if it is missing, truncated or corrupt."""
        path = Path(path)
        try:
            data = path.read_bytes()
        except OSError as e:
            raise UserError(f"cannot read URL map {path}: {e.strerror or e}") from e
        if len(data) < _HEADER.size:
            raise UserError(f"URL map {path} is truncated")
        magic, version, block_size, n, vocab_len, dict_len, index_off, index_len = _HEADER.unpack_from(data)
        if magic != MAGIC or version != VERSION:
            raise UserError(f"{path} is not a raycrawl URL map of version {VERSION}: rebuild it (raycrawl graph build)")
        if index_off + index_len != len(data):
            raise UserError(f"URL map {path} is truncated or corrupt (size mismatch)")
        try:
            index = zlib.decompress(data[index_off:])
            nblocks_plus, pos = _read_varint_tail(index, 1, index[0]) if index[0] & 0x80 else (index[0], 1)
            offsets = []
            acc = 0
            for _ in range(nblocks_plus):
                v = index[pos]
                pos += 1
                if v & 0x80:
                    v, pos = _read_varint_tail(index, pos, v)
                acc += v
                offsets.append(acc)
            first = _front_decode(index[pos:], nblocks_plus - 1)
        except (zlib.error, IndexError) as e:
            raise UserError(f"URL map {path} is corrupt: {e}") from e
        if len(first) != (n + block_size - 1) // block_size or offsets[-1] != index_off:
            raise UserError(f"URL map {path} is corrupt (block index does not match)")
        try:
            raw = zlib.decompress(data[_HEADER.size : _HEADER.size + vocab_len])
            count, pos = _read_varint_tail(raw, 1, raw[0]) if raw[0] & 0x80 else (raw[0], 1)
            vocab = []
            for _ in range(count):
                ln = raw[pos]
                pos += 1
                if ln & 0x80:
                    ln, pos = _read_varint_tail(raw, pos, ln)
                vocab.append(raw[pos : pos + ln])
                pos += ln
        except (zlib.error, IndexError) as e:
            raise UserError(f"URL map {path} is corrupt (vocabulary): {e}") from e
        zdict = data[_HEADER.size + vocab_len : _HEADER.size + vocab_len + dict_len]
        return cls(path, data, block_size, n, vocab, zdict, first, offsets)

    # ---- access --------------------------------------------------------------------------

    def __len__(self) -> int:
        return self._n

    def _raw_block(self, b: int) -> bytes:
        """Block ``b`` inflated (the last one is cached: sequential lookups reuse it)."""
        if b != self._cache_id:
            try:
                d = zlib.decompressobj(-15, self._zdict) if self._zdict else zlib.decompressobj(-15)
                raw = d.decompress(self._data[self._offsets[b] : self._offsets[b + 1]])
            except zlib.error as e:
                raise UserError(f"URL map {self.path}: block {b} is corrupt: {e}") from e
            self._cache_id, self._cache = b, raw
        return self._cache

    def _keys(self, b: int, count: int, stop: bytes | None = None) -> list[bytes]:
        try:
            keys = _decode_block(self._raw_block(b), count, self._vocab, self._first[b], stop)
        except IndexError as e:
            raise UserError(f"URL map {self.path}: block {b} is corrupt: {e}") from e
        if stop is None and len(keys) != count:
            raise UserError(f"URL map {self.path}: block {b} is corrupt (too few URLs)")
        return keys

    def _block_len(self, b: int) -> int:
        return min(self.block_size, self._n - b * self.block_size)

    def url_of(self, i: int) -> str:
        """The URL with id ``i``. Raises IndexError if ``i`` is not in ``[0, len)``."""
        if not 0 <= i < self._n:
            raise IndexError(f"URL id {i} out of range [0, {self._n})")
        b, j = divmod(i, self.block_size)
        # Front coding is sequential: decode only up to the wanted key.
        return key_to_url(self._keys(b, j + 1)[j].decode("utf-8"))

    def id_of(self, url: str) -> int:
        """The id of ``url``, or -1 if it is not in the map."""
        key = url_sort_key(url).encode("utf-8")
        b = bisect.bisect_right(self._first, key) - 1
        if b < 0:
            return -1
        keys = self._keys(b, self._block_len(b), stop=key)
        if keys and keys[-1] == key:
            return b * self.block_size + len(keys) - 1
        return -1

    def __iter__(self) -> Iterator[str]:
        """URLs in id order."""
        for b in range(len(self._first)):
            for k in self._keys(b, self._block_len(b)):
                yield key_to_url(k.decode("utf-8"))

    def __contains__(self, url: object) -> bool:
        return isinstance(url, str) and self.id_of(url) >= 0

    @property
    def size_bytes(self) -> int:
        return len(self._data)
