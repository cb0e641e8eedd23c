"""The redundancy-aware fragment index of many versions of many pages (Zhang & Suel, seed 004 §5).

Each version's terms (``raycrawl.text.terms``) are cut by winnowing (``raycrawl.winnowing``) into
fragments identified by a 64-bit content hash. The **hash table** maps a fragment hash to its
fragID; only fragments not seen before (under the sharing policy) are indexed:

* ``none``   — every fragment of every version is indexed (a standard index, cut in pieces);
* ``local``  — a fragment is indexed once per page: re-used across that page's versions;
* ``global`` — a fragment is indexed once in the collection; its first page is its *primary page*
  and the **fragment reuse table** lists the other pages that use it.

Pages are added in docID order, all versions of a page together, so fragIDs are numbered by
(primary docID, ordinal): a page's fragments are adjacent in every inverted list.

On disk (``INDEX_DIR``): ``postings.bin`` (the inverted lists, see ``storage.postings``;
memory-mapped by :meth:`FragmentIndex.load`, so queries run from the file) and the tables
(``storage.index_tables``): ``query.bin`` with what a query reads besides the lists — the
**dictionary** (term → offset, bytes, fragment count; version df per epoch), the **doc/version
table** (per version: page, epoch, length, its fragIDs in order), the fragment table (primary page,
ordinal, length), the reuse table and the build parameters; ``pages.msgpack`` with the **page
table** (URL, PageRank, spam score, snippet, captures) the result page shows; ``update.msgpack``
with the hash table (``fragment hash → fragID``), only needed for updates, so
:meth:`FragmentIndexBuilder` could resume.
"""

from __future__ import annotations

import logging
import mmap
import os
from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

import msgpack
import numpy as np

from raycrawl.storage.index_tables import (
    PAGES_FILE,
    QUERY_FILE,
    UPDATE_FILE,
    decode_query_tables,
    encode_query_tables,
)
from raycrawl.storage.postings import PostingList, decode_list, encode_list
from raycrawl.winnowing import DEFAULT_B, DEFAULT_W, fragment_hash, fragments

log = logging.getLogger(__name__)

POLICIES = ("none", "local", "global")
FORMAT = "raycrawl-fragment-index/3"  # /2: skip tables; /3: f bit-packed, positions in their fragment's bits, compact tables in three files


@dataclass(slots=True)
class Version:
    """One version of a page: its epoch, length in terms and fragIDs in document order."""

    page: int
    epoch: int
    length: int
    frags: list[int]


@dataclass
class FragmentIndex:
    """An index in memory. Built by :class:`FragmentIndexBuilder`, stored by :meth:`save`."""

    policy: str
    b: int
    w: int
    urls: list[str]
    pagerank: list[float | None]
    spam: list[float | None]
    versions: list[Version]
    page_versions: list[list[int]]          # docID → version ids, in epoch order
    frag_page: np.ndarray                    # fragID → primary docID
    frag_ordinal: np.ndarray                 # fragID → ordinal inside its primary page
    frag_len: np.ndarray                     # fragID → words
    reuse: dict[int, list[int]]              # fragID → other docIDs using it (global only)
    hash_table: dict[int, int]               # fragment hash → fragID (policy none: empty)
    dictionary: dict[str, tuple[int, int, int]]  # term → (offset, nbytes, postings)
    version_df: dict[str, dict[int, int]]    # term → {epoch: versions containing it}
    postings_blob: bytes | mmap.mmap = b""  # memory-mapped when loaded from disk
    stats: dict = field(default_factory=dict)
    snippets: list[str] = field(default_factory=list)  # docID → start of the latest version's visible text
    # docID → its archived captures, one per version: [epoch, crawl dir, WARC file, offset, time, title]
    captures: list[list[list]] = field(default_factory=list)

    # ------------------------------------------------------------------ access
    @property
    def epochs(self) -> list[int]:
        return sorted({v.epoch for v in self.versions})

    def postings(self, term: str, with_positions: bool = False) -> PostingList | None:
        """The decoded inverted list of ``term`` (None when the term is not indexed)."""
        entry = self.dictionary.get(term)
        if entry is None:
            return None
        off, nbytes, _ = entry
        return decode_list(np.frombuffer(self.postings_blob, dtype=np.uint8, count=nbytes, offset=off),
                           with_positions, self.frag_len)

    def shared_mask(self) -> np.ndarray:
        """shared[fragID] = the fragment is used by pages other than its primary one (cached)."""
        mask = getattr(self, "_shared", None)
        if mask is None or mask.size != self.frag_page.size:
            mask = np.zeros(self.frag_page.size, dtype=bool)
            if self.reuse:
                mask[np.fromiter(self.reuse.keys(), np.int64, len(self.reuse))] = True
            self._shared = mask
        return mask

    def scope_stats(self, epoch: int | None) -> tuple[int, float]:
        """(number of versions, average version length) over all versions or one epoch's (cached)."""
        cache = self.__dict__.setdefault("_scope_stats", {})
        if epoch not in cache:
            lens = [v.length for v in self.versions if epoch is None or v.epoch == epoch]
            cache[epoch] = (len(lens), float(np.mean(lens)) if lens else 0.0)
        return cache[epoch]

    def df(self, term: str, epoch: int | None) -> int:
        """Versions holding ``term``: all of them, or one epoch's (the totals computed once: a
        query asks for them per term)."""
        if epoch is not None:
            return self.version_df.get(term, {}).get(epoch, 0)
        totals = self.__dict__.get("_df_all")
        if totals is None:
            totals = self._df_all = {t: sum(by.values()) for t, by in self.version_df.items()}
        return totals.get(term, 0)

    # ------------------------------------------------------------------ disk
    def save(self, out_dir: str | Path) -> Path:
        """Write ``postings.bin`` and the tables (``storage.index_tables``: ``query.bin``,
        ``pages.msgpack``, ``update.msgpack``) into ``out_dir`` (tmp files, then rename)."""
        out = Path(out_dir)
        out.mkdir(parents=True, exist_ok=True)
        pages = {"format": FORMAT, "urls": self.urls, "pagerank": self.pagerank, "spam": self.spam,
                 "snippets": self.snippets, "captures": self.captures}
        update = {"hash_keys": np.fromiter(self.hash_table.keys(), np.int64, len(self.hash_table)).tobytes(),
                  "hash_vals": np.fromiter(self.hash_table.values(), np.int64, len(self.hash_table)).tobytes()}
        query = msgpack.packb({"format": FORMAT, **encode_query_tables(self)})
        # query.bin last: its presence (with the format) is what makes a directory an index
        for name, data in (("postings.bin", self.postings_blob), (PAGES_FILE, msgpack.packb(pages)),
                           (UPDATE_FILE, msgpack.packb(update)), (QUERY_FILE, query)):
            tmp = out / (name + ".tmp")
            tmp.write_bytes(data)
            tmp.replace(out / name)
        return out

    @staticmethod
    def sizes(index_dir: str | Path) -> dict[str, int]:
        """Bytes on disk of what a query reads (``postings.bin`` + ``query.bin``) and of the rest."""
        d = Path(index_dir)
        size = {name: (d / name).stat().st_size for name in ("postings.bin", QUERY_FILE, PAGES_FILE, UPDATE_FILE)}
        return {"query": size["postings.bin"] + size[QUERY_FILE], "postings": size["postings.bin"],
                "query_tables": size[QUERY_FILE], "pages": size[PAGES_FILE], "update": size[UPDATE_FILE]}

    @classmethod
    def load(cls, index_dir: str | Path) -> FragmentIndex:
        """Read an index written by :meth:`save`; ``FileNotFoundError``/``ValueError`` when absent or foreign."""
        d = Path(index_dir)
        try:
            head = msgpack.unpackb((d / QUERY_FILE).read_bytes(), strict_map_key=False)
        except (ValueError, msgpack.UnpackException) as exc:
            raise ValueError(f"{d} is not a {FORMAT} index ({exc})") from None
        if not isinstance(head, dict) or head.get("format") != FORMAT:
            raise ValueError(f"{d} is not a {FORMAT} index")
        q = decode_query_tables(head)
        p = msgpack.unpackb((d / PAGES_FILE).read_bytes(), strict_map_key=False)
        u = msgpack.unpackb((d / UPDATE_FILE).read_bytes(), strict_map_key=False)
        versions = [Version(pg, e, n, f) for pg, e, n, f in q["versions"]]
        page_versions: list[list[int]] = [[] for _ in p["urls"]]
        for i, v in enumerate(versions):
            page_versions[v.page].append(i)
        keys = np.frombuffer(u["hash_keys"], dtype=np.int64)
        vals = np.frombuffer(u["hash_vals"], dtype=np.int64)
        return cls(
            policy=q["policy"], b=q["b"], w=q["w"], urls=p["urls"], pagerank=p["pagerank"], spam=p["spam"],
            versions=versions, page_versions=page_versions, frag_page=q["frag_page"],
            frag_ordinal=q["frag_ordinal"], frag_len=q["frag_len"], reuse=q["reuse"],
            hash_table=dict(zip(keys.tolist(), vals.tolist(), strict=True)),
            dictionary=q["dictionary"], version_df=q["version_df"],
            postings_blob=_map(d / "postings.bin"), stats=q["stats"],
            snippets=p.get("snippets", []), captures=p.get("captures", []),
        )


def _map(path: Path) -> bytes | mmap.mmap:
    """The postings file memory-mapped read-only: queries read the lists they touch from the page
    cache, so an index larger than memory can be queried and opening one costs no read of it."""
    with open(path, "rb") as f:
        if os.fstat(f.fileno()).st_size == 0:
            return b""  # mmap cannot map an empty file
        return mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)


class FragmentIndexBuilder:
    """Adds pages (each with all its versions) in docID order and produces a :class:`FragmentIndex`.

    Contract: :meth:`add_page` is called once per URL; the docID is the call's rank. Versions of a
    page must come in epoch order (the first version seen makes a fragment's primary copy).
    """

    def __init__(self, policy: str = "global", b: int = DEFAULT_B, w: int = DEFAULT_W) -> None:
        if policy not in POLICIES:
            raise ValueError(f"unknown sharing policy {policy!r} (one of {', '.join(POLICIES)})")
        self.policy, self.b, self.w = policy, b, w
        self.urls: list[str] = []
        self.pagerank: list[float | None] = []
        self.spam: list[float | None] = []
        self.versions: list[Version] = []
        self.page_versions: list[list[int]] = []
        self.frag_page: list[int] = []
        self.frag_ordinal: list[int] = []
        self.frag_len: list[int] = []
        self.reuse: dict[int, list[int]] = {}
        self.hash_table: dict[int, int] = {}
        # term → parallel lists (fragIDs, f, positions); fragIDs arrive in increasing order.
        self._lists: dict[str, tuple[list[int], list[int], list[int]]] = defaultdict(lambda: ([], [], []))
        self._version_df: dict[str, Counter] = defaultdict(Counter)
        self.fragments_seen = 0
        self.positions_seen = 0

    def add_page(self, url: str, versions: Iterable[tuple[int, list[str]]], pagerank: float | None = None,
                 spam: float | None = None) -> int:
        """Index ``url``'s versions ``[(epoch, terms)]`` (epochs increasing); returns its docID."""
        doc = len(self.urls)
        self.urls.append(url)
        self.pagerank.append(pagerank)
        self.spam.append(spam)
        self.page_versions.append([])
        local: dict[int, int] = {}
        ordinal = 0
        last_epoch = None
        for epoch, words in versions:
            assert last_epoch is None or epoch > last_epoch, "versions must come in increasing epoch order"
            last_epoch = epoch
            frag_ids = []
            for frag in fragments(words, self.b, self.w):
                self.fragments_seen += 1
                self.positions_seen += len(frag)
                h = fragment_hash(frag)
                fid = None
                if self.policy == "local":
                    fid = local.get(h)
                elif self.policy == "global":
                    fid = self.hash_table.get(h)
                    if fid is not None and self.frag_page[fid] != doc:
                        users = self.reuse.setdefault(fid, [])
                        if not users or users[-1] != doc:
                            users.append(doc)
                if fid is None:
                    fid = self._new_fragment(doc, ordinal, frag)
                    ordinal += 1
                    if self.policy == "local":
                        local[h] = fid
                    elif self.policy == "global":
                        self.hash_table[h] = fid
                frag_ids.append(fid)
            for t in set(words):
                self._version_df[t][epoch] += 1
            self.page_versions[doc].append(len(self.versions))
            self.versions.append(Version(doc, epoch, len(words), frag_ids))
        return doc

    def _new_fragment(self, doc: int, ordinal: int, words: list[str]) -> int:
        fid = len(self.frag_page)
        self.frag_page.append(doc)
        self.frag_ordinal.append(ordinal)
        self.frag_len.append(len(words))
        where: dict[str, list[int]] = defaultdict(list)
        for p, t in enumerate(words):
            where[t].append(p)
        for t, ps in where.items():
            frags, freqs, positions = self._lists[t]
            frags.append(fid)
            freqs.append(len(ps))
            positions.extend(ps)
        return fid

    def finish(self) -> FragmentIndex:
        """Compress the lists and return the index (the builder is spent afterwards)."""
        blob = bytearray()
        dictionary: dict[str, tuple[int, int, int]] = {}
        frag_len = np.array(self.frag_len, dtype=np.int64)
        for t in sorted(self._lists):
            frags, freqs, positions = self._lists[t]
            data = encode_list(np.array(frags), np.array(freqs), np.array(positions), frag_len[frags])
            dictionary[t] = (len(blob), len(data), len(frags))
            blob += data
        stats = {
            "policy": self.policy, "b": self.b, "w": self.w, "pages": len(self.urls),
            "versions": len(self.versions), "fragments_total": self.fragments_seen,
            "positions_total": self.positions_seen, "fragments": int(frag_len.size),
            "positions": int(frag_len.sum()), "postings": int(sum(e[2] for e in dictionary.values())),
            "terms": len(dictionary), "postings_bytes": len(blob),
            "reused_fragments": len(self.reuse),
        }
        log.info("fragment index (%s): %d pages, %d versions, %d/%d fragments, %d/%d positions, %d bytes",
                 self.policy, stats["pages"], stats["versions"], stats["fragments"], stats["fragments_total"],
                 stats["positions"], stats["positions_total"], len(blob))
        return FragmentIndex(
            policy=self.policy, b=self.b, w=self.w, urls=self.urls, pagerank=self.pagerank, spam=self.spam,
            versions=self.versions, page_versions=self.page_versions,
            frag_page=np.array(self.frag_page, dtype=np.int64),
            frag_ordinal=np.array(self.frag_ordinal, dtype=np.int64), frag_len=frag_len,
            reuse=self.reuse, hash_table=self.hash_table, dictionary=dictionary,
            version_df={t: dict(c) for t, c in self._version_df.items()},
            postings_blob=bytes(blob), stats=stats,
        )
