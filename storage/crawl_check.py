"""The consistency check of a crawl directory and its Redis, run by ``--resume`` before the crawl
goes on and by ``raycrawl check OUT``: a resumed crawl either continues from state that agrees
with itself, or is refused with one line naming the damaged file and the choices. Never a silent
loss (a sieve shard whose queue vanished), never a silent re-crawl (a Redis rolled back).

What must agree, and why it can be checked:

* **Redis's AOF** (embedded Redis): the manifest and the files it names exist. Without the
  manifest, valkey would start an empty AOF over the old one.
* **Sieve shards** (``OUT/sieve/NN``, :mod:`storage.sieve_store`): ``meta.json`` is the commit
  point; ``fps.<gen>`` holds exactly ``fps`` fingerprints; ``queue`` is at least ``queue_bytes``
  long; the pending log is text the sieve wrote (UTF-8 lines). Redis's consumed offset of each
  shard's queue (``P soff:NN``) lies within the queue.
* **Duplicate stores** (``OUT/sieve/NN/duplicates.sqlite``, :mod:`storage.dedup_store`): each
  opens and passes SQLite's ``quick_check``. Its repair starts the shard's store empty: duplicates
  of pages seen before are then missed (archived in full), never invented.
* **Virtual queues** (``OUT/virtualizer``): each host's file reaches the end Redis committed
  (``P vend``).
* **Link records and WARC** (the archive): each link record's WARC pointer lies inside its file,
  and the last record each file is pointed at reads whole. Link records are written before a
  visit is committed in Redis, so there are at least as many records as committed pages
  (``pages``); and every URL with a record is committed, or was in flight at a crash, so the
  URLs with a record but no commit are at most those in Redis's in-flight set plus those left
  over from earlier resumes (``P meta`` ``unconfirmed``) plus one distributor batch (failures
  recorded just before their counters). A Redis that lost writes (an AOF cut or restored from an
  old copy) has fewer commits than that: refused.

Repairs (``raycrawl check OUT --repair``) are offered only where the crawl's own files hold the
truth: a sieve shard's ``meta.json`` and fingerprint file are rebuilt from its queue (every URL
that ever left the sieve), and pending-log lines the sieve cannot have written are dropped. For a
Redis behind the archive the "repair" is the user's explicit consent to the refetches (recorded as
``unconfirmed``), never a silent re-crawl.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from raycrawl.atomic import replace_bytes
from raycrawl.policies.front_queues import queue_of
from raycrawl.storage.crawl_dir import layout, virtual_queue
from raycrawl.storage.dedup_store import FILE as DEDUP_FILE
from raycrawl.storage.dedup_store import DedupShard, DedupStoreError
from raycrawl.storage.link_records import LINKS_SUBDIR, SUFFIX, read_link_file
from raycrawl.storage.sieve_store import ShardFiles, SieveStore, fingerprint

START_OVER = "or start over in a new --out (the archive already in OUT stays readable)"


@dataclass(frozen=True)
class Damage:
    path: Path          # the damaged file (or the Redis data directory)
    what: str           # what is wrong with it
    repair: str | None = None  # what ``raycrawl check --repair`` does about it (None: it cannot)
    kind: str = ""  # "behind": Redis lost commits (the repair accepts refetching them)

    def choices(self, out: Path | str = "OUT") -> str:
        if self.repair:
            return f"`raycrawl check {out} --repair` {self.repair}, {START_OVER}"
        return f"restore it from a backup, {START_OVER}"

    def line(self, out: Path | str = "OUT") -> str:
        return f"{self.path}: {self.what}; {self.choices(out)}"


@dataclass
class ArchiveScan:
    """What the link records say was fetched."""
    records: int = 0
    urls: int = 0  # distinct
    damages: list[Damage] = field(default_factory=list)


# --- Redis's AOF -------------------------------------------------------------------------------------
def check_aof(redis_dir: Path) -> list[Damage]:
    """The embedded Redis's AOF, before the server is started on it."""
    aof_dir = redis_dir / "appendonlydir"
    manifests = sorted(aof_dir.glob("*.manifest"))
    if not manifests:
        return [Damage(aof_dir, "the AOF manifest is missing: Redis would start an empty frontier over the old AOF")]
    missing = []
    for line in manifests[0].read_text(errors="replace").splitlines():
        words = line.split()
        if len(words) >= 2 and words[0] == "file" and not (aof_dir / words[1]).exists():
            missing.append(words[1])
    if missing:
        return [Damage(manifests[0], f"names AOF files that are missing ({', '.join(missing)})")]
    return []


# --- sieve shards ------------------------------------------------------------------------------------
def check_sieve(sieve_root: Path) -> list[Damage]:
    return [d for shard in sorted(sieve_root.glob("[0-9][0-9]")) for d in (*_check_shard(shard), *_check_dedup(shard))]


def _check_dedup(shard: Path) -> list[Damage]:
    path = shard / DEDUP_FILE
    if not path.exists():
        return []
    what = None
    try:
        store = DedupShard(path)
        try:
            result = store.quick_check()
        finally:
            store.close()
        if result != "ok":
            what = f"fails SQLite's quick_check ({result[:200]})"
    except (DedupStoreError, sqlite3.DatabaseError) as exc:
        what = f"is not a duplicate store ({str(exc)[:200]})"
    return [Damage(path, what, "starts it empty (duplicates of earlier pages are then archived in full)")] if what else []


def _check_shard(shard: Path) -> list[Damage]:
    files = ShardFiles(shard)
    queues = files.level_queues()
    queue_size = sum(q.stat().st_size for q in queues.values())
    # A shard that ever committed has a meta.json, and its first commit removed pending.0. Queue bytes
    # or fingerprints next to pending.0 and no meta.json are a first flush that never committed (a
    # crash, a full disk): the store reopens it at generation 0, as the first flush found it.
    never_committed = files.pending(0).exists()
    if not files.meta.exists() and (queue_size or files.all_fps()) and not never_committed:
        return [Damage(files.meta, "is missing (the shard's commit point)", "rebuilds it from the shard's queue")]
    try:
        meta = files.read_meta()
        ends = files.read_ends()
    except (ValueError, KeyError, TypeError, UnicodeDecodeError, AttributeError):
        return [Damage(files.meta, "is not a sieve commit point", "rebuilds it from the shard's queue")]
    for level, committed in ends.items():
        path = files.level_queue(level)
        size = path.stat().st_size if path.exists() else 0
        if size < committed:
            return [Damage(path, f"is cut: {size} bytes, {committed} committed (URLs never crawled would be lost)")]
    fps_path = files.fps(meta["gen"])
    size = fps_path.stat().st_size if fps_path.exists() else 0
    if size != 8 * meta["fps"]:
        return [Damage(fps_path, f"holds {size // 8} fingerprints, {meta['fps']} committed",
                       "rebuilds it from the shard's queue")]
    pending = files.pending(meta["gen"])
    if pending.exists():
        data = pending.read_bytes()
        bad = _undecodable_lines(data[: data.rfind(b"\n") + 1])
        if bad:
            return [Damage(pending, f"has {bad} line(s) that are not URLs the sieve wrote (not UTF-8)",
                           "drops those lines")]
    return []


def _undecodable_lines(data: bytes) -> int:
    try:
        data.decode()
        return 0
    except UnicodeDecodeError:
        return sum(1 for line in data.split(b"\n") if not _decodes(line))


def _decodes(line: bytes) -> bool:
    try:
        line.decode()
        return True
    except UnicodeDecodeError:
        return False


def sieve_offsets_damage(sieve_root: Path, offsets: dict[int, int]) -> list[Damage]:
    """Redis's consumed offsets (``P soff:<queue>``) must lie within each front queue's committed bytes."""
    damages = []
    for qid, offset in sorted(offsets.items()):
        shard, level = queue_of(qid)
        files = ShardFiles(sieve_root / f"{shard:02d}")
        committed = files.read_ends().get(level, 0)
        if offset > committed:
            damages.append(Damage(files.level_queue(level),
                                  f"ends at byte {committed}, but Redis has distributed it up to byte {offset}"))
    return damages


# --- link records and WARC ---------------------------------------------------------------------------
def scan_archive(out: Path) -> ArchiveScan:
    scan = ArchiveScan()
    fps: list[int] = []
    furthest: dict[str, int] = {}  # WARC file → last offset a record points at
    past_end: dict[str, int] = {}
    warc_dir = layout(out).warc
    sizes: dict[str, int] = {}
    for path in sorted((out / LINKS_SUBDIR).glob(f"*{SUFFIX}")):
        for rec in read_link_file(path):
            scan.records += 1
            fps.append(fingerprint(rec.url))
            if rec.warc:
                name, offset = rec.warc
                if name not in sizes:
                    sizes[name] = (warc_dir / name).stat().st_size if (warc_dir / name).exists() else -1
                if offset >= sizes[name]:
                    past_end[name] = past_end.get(name, 0) + 1
                elif offset > furthest.get(name, -1):
                    furthest[name] = offset
    scan.urls = len(np.unique(np.array(fps, dtype=np.uint64)))
    for name, n in sorted(past_end.items()):
        what = "is missing" if sizes[name] < 0 else f"is cut at byte {sizes[name]}"
        scan.damages.append(Damage(warc_dir / name, f"{what}: {n} stored page(s) the link records point to are gone"))
    for name, offset in sorted(furthest.items()):
        if name not in past_end and not _record_whole(warc_dir / name, offset):
            scan.damages.append(Damage(warc_dir / name, f"is cut inside the record at byte {offset}"))
    return scan


def _record_whole(path: Path, offset: int) -> bool:
    from fastwarc.warc import ArchiveIterator

    try:
        with open(path, "rb") as f:
            f.seek(offset)
            for rec in ArchiveIterator(f, parse_http=False):
                return len(rec.reader.read()) == rec.content_length
    except (OSError, ValueError):
        return False
    return False


# --- the archive against Redis -----------------------------------------------------------------------
def counts_damage(out: Path, scan: ArchiveScan, committed: int, in_flight: int, unconfirmed: int) -> list[Damage]:
    if scan.records < committed:
        return [Damage(out / LINKS_SUBDIR, f"holds {scan.records} link records, but Redis committed {committed} "
                                           "pages: link records were lost (a file cut or deleted?)")]
    allowed = in_flight + unconfirmed
    if scan.urls - committed > allowed:
        lost = scan.urls - committed - allowed
        return [Damage(layout(out).redis, f"Redis is behind the archive: {scan.urls - committed} fetched URLs have no "
                                      f"commit, at most {allowed} can be in flight (its AOF lost writes: cut, "
                                      "an old copy, or a disk that filled under it); resuming would fetch them again",
                       f"accepts fetching again up to {lost} archived URLs (their first copies stay in the archive)",
                       kind="behind")]
    return []


def virtualizer_damage(out: Path, frontier) -> list[Damage]:
    """Each host's virtual queue on disk reaches the end Redis committed for it (``P vend``)."""
    damages = []
    for host, end in frontier.virtual_queue_ends():
        path = virtual_queue(layout(out).virtualizer, host)
        size = path.stat().st_size if path.exists() else -1
        if size < end:
            what = "is missing" if size < 0 else f"is cut: {size} bytes, {end} committed"
            damages.append(Damage(path, f"{what} (URLs of {host} waiting on disk would be lost)"))
    return damages


def check_files(out: Path, embedded_redis: bool) -> list[Damage]:
    """The checks that need no Redis: run before a resumed crawl starts anything."""
    aof = check_aof(layout(out).redis) if embedded_redis and (layout(out).crawl_id).exists() else []
    return aof + check_sieve(layout(out).sieve)


def check_against_redis(out: Path, frontier) -> tuple[list[Damage], int]:
    """The archive and the sieve against the crawl's Redis (a :class:`storage.redis_frontier.RedisFrontier`),
    before its in-flight URLs are put back. Returns the damages and the URLs fetched but not
    committed (to be stored as ``unconfirmed`` once the resume goes ahead)."""
    offsets = frontier.all_sieve_offsets()
    scan = scan_archive(out)
    committed = int(frontier.stats().get("pages", 0))
    in_flight, unconfirmed = frontier.uncommitted()
    # The commits first: a Redis that lost writes makes the rest look damaged too.
    damages = [*counts_damage(out, scan, committed, in_flight, unconfirmed), *sieve_offsets_damage(layout(out).sieve, offsets),
               *virtualizer_damage(out, frontier), *scan.damages]
    return damages, max(0, scan.urls - committed)


def refusal(damages: list[Damage], out: Path, what: str = "--resume refused") -> str:
    more = f" (and {len(damages) - 1} more: see `raycrawl check {out}`)" if len(damages) > 1 else ""
    return f"{what}: {damages[0].line(out)}{more}"


# --- repairs -------------------------------------------------------------------------------------------
def repair(damages: list[Damage]) -> list[str]:
    """Carry out the repairs the damages offer; returns what was done, one line each."""
    done = []
    for d in damages:
        if d.repair is None or d.kind == "behind":  # (that one is consent, given in Redis by the caller)
            continue
        shard = d.path.parent
        if d.path.name == DEDUP_FILE:
            for part in shard.glob(DEDUP_FILE + "*"):
                part.unlink()
            done.append(f"{d.path}: started empty")
        elif d.path.name.startswith("pending."):
            data = d.path.read_bytes()
            end = data.rfind(b"\n") + 1
            lines = [line for line in data[:end].split(b"\n")[:-1] if _decodes(line)]
            replace_bytes(d.path, b"".join(line + b"\n" for line in lines))
            done.append(f"{d.path}: dropped the lines that were not UTF-8")
        else:
            n = rebuild_shard(shard)
            done.append(f"{shard}: meta.json and fingerprints rebuilt from the queue ({n} URLs)")
    return done


def rebuild_shard(shard: Path) -> int:
    """Rebuild a sieve shard's commit point from its queues (every priority level's): the
    fingerprint store is exactly the fingerprints of the URLs in the queues; the newest pending log
    is kept (the sieve replays it)."""
    files = ShardFiles(shard)
    urls: list[str] = []
    ends: dict[int, int] = {0: 0}
    for level, path in files.level_queues().items():
        data = path.read_bytes()
        ends[level] = data.rfind(b"\n") + 1
        urls += data[: ends[level]].decode(errors="replace").splitlines()
    fps = np.unique(np.fromiter((fingerprint(u) for u in urls), dtype=np.uint64, count=len(urls)))
    gen = max(files.pending_gens(), default=0)
    replace_bytes(files.fps(gen), fps.astype("<u8").tobytes())
    for stale in files.all_fps():
        if stale != files.fps(gen):
            stale.unlink()
    files.pending(gen).touch()
    try:  # the pass whose revisits are queued already (a damaged meta: the queues hold them anyway)
        requeued = files.read_requeued()
    except (ValueError, TypeError, UnicodeDecodeError, AttributeError):
        requeued = 0
    files.write_meta(gen, len(fps), ends, requeued)
    SieveStore(shard).close()  # truncates the queues to the commit point, as a reopen would
    return len(urls)

