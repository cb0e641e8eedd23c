"""Host shards moving between agents through the object store, so a cluster needs no shared
filesystem (``agent_dir`` with ``out_store``: docs/crawling.md, "Several agents without a shared OUT").

A shard's on-disk state is its sieve directory (``sieve/NN``: fingerprints, output queues, pending
log, duplicate store) and the virtual queues of its hosts (``virtualizer/<xxh3(host)>.q``). The
agent that owns a shard keeps that state in its own directory; when the shard moves (a join, the
end of a run), the giver *puts it away* — uploads every file under ``sieve/NN/…`` and
``virtualizer/NN/…`` in the store, under keys of its own (``name~ck<ns>``), confirms each key by
the store's listing at the local size, has Redis name them (``P sckpt``, refused once the giver is
fenced), deletes keys of the shard it did not write (an older state), and only then deletes its
local copy — and the taker *brings* it: downloads the keys Redis names into its own directory and
marks the shard as its own. (Keys of its own: a giver declared departed mid-upload overwrites
nothing its successor reads.)

Where each shard's latest state is lives in Redis, hash ``P shome`` (shard → ``store FILES BYTES``,
what the put-away confirmed, or the holder ``agent@host:dir``; absent: a shard with no state yet).
A store that no longer holds those files (an emptied bucket) is an error, never an empty shard. A
shard held by a live agent is never taken from an older copy: that would forget URLs seen since
and read its queues from offsets they do not reach.

A held shard outlives its holder all the same: the holder's sieve actor checkpoints it to keys of
their own every ``checkpoint_seconds`` (:class:`ShardCheckpoints`: its files, but the duplicate store),
and everything done to it since is in its log in Redis (storage/shard_log.py). When the holder
dies (fenced: actors/cluster/lease.py), the agent taking the shard brings the checkpoint, applies the
log's virtual-queue spills here and the sieve's entries in its sieve actor, and has the dead
holder's last acknowledged state. ``P sckpt`` names the last checkpoint's (or put-away's) keys;
the duplicate store comes from the last put-away, if any (each checkpoint names it again; older
claims only: a duplicate of a page claimed since is archived in full, never wrongly marked).
"""

from __future__ import annotations

import logging
import re
import shutil
import socket
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from raycrawl.errors import UserError
from raycrawl.policies.assignment import shard_of
from raycrawl.storage import shard_log
from raycrawl.storage.crawl_dir import layout, virtual_queue
from raycrawl.storage.dedup_store import FILE as DEDUP_NAME
from raycrawl.storage.out_store import OutStore, StoreError
from raycrawl.storage.redis_frontier import RedisFrontier

log = logging.getLogger(__name__)

IN_STORE = "store"
# ``orphan HOLDER``: a shard whose holder belonged to an earlier run (``--resume`` after an agent
# died or the run stopped short). The same agent on the same directory keeps its copy; anyone else
# (or it, its directory gone with its node) takes it over from its checkpoint and log.
ORPHAN = "orphan"
# A checkpoint's and a put-away's files are uploaded under keys of their own (``sieve/NN/name~ck<ns>``,
# :func:`_new_suffix`), never over the files Redis names (``P sckpt``): see :meth:`ShardCheckpoints._one`.
_CHECKPOINT = re.compile(r"~ck[0-9a-f]+$")


def _new_suffix() -> str:
    """The suffix of one upload's keys (what :data:`_CHECKPOINT` matches)."""
    return f"~ck{time.time_ns():x}"


def _in_store(home: bytes | None) -> tuple[int, int] | None:
    """(files, bytes) of a shard put away in the store, per its ``P shome`` value."""
    parts = (home or b"").decode().split()
    return (int(parts[1]), int(parts[2])) if len(parts) == 3 and parts[0] == IN_STORE else None


def holder_name(agent: str, out: Path) -> str:
    """Who holds a shard: the agent, its machine and its directory (a resumed agent of the same
    name on another machine does not have the files)."""
    return f"{agent}@{socket.gethostname()}:{out}"


@dataclass(frozen=True)
class Brought:
    files: int  # downloaded from the store
    taken_over: list[int]  # shards of a dead holder: their sieve logs are to be replayed


class ShardHandoff:
    """One agent's side of the moves: ``out`` is its own directory."""

    def __init__(self, store: OutStore, frontier: RedisFrontier, out: Path, holder: str) -> None:
        self.store, self.f, self.out, self.holder = store, frontier, Path(out), holder

    def _local_sieve(self, shard: int) -> Path:
        return layout(self.out).sieve / f"{shard:02d}"

    def _virtual_queues(self, shards: set[int]) -> dict[int, list[Path]]:
        return virtual_queues(self.f, self.out, shards)

    def _fenced(self, shards: set[int]) -> bool:
        """A holder declared departed puts nothing away: the agents that took its shards over hold
        them, from its last checkpoint and log. Its directory is left as it is."""
        if not self.f.is_fenced(self.holder.partition("@")[0]):
            return False
        log.warning("shards %s not put away: this agent was declared departed, and the agents that took them "
                    "over read its last checkpoint and log", sorted(shards))
        return True

    def bring(self, shards: Iterable[int]) -> Brought:
        """Make this agent's directory hold the latest state of ``shards``: what was downloaded, and
        the shards taken over from a dead holder, whose sieve logs the caller's sieve actor must
        replay."""
        shards = sorted(shards)
        if not shards:
            return Brought(0, [])
        homes = self.f.shard_homes(shards)
        reclaimed = [s for s, h in homes.items()  # the last run's holder on this very directory: its own
                     if h is not None and h.decode() == f"{ORPHAN} {self.holder}" and self._local_sieve(s).is_dir()]
        if reclaimed:
            self.f.set_shard_homes(dict.fromkeys(reclaimed, self.holder))
            homes.update({s: self.holder.encode() for s in reclaimed})
        foreign = {s: h.decode() for s, h in homes.items()
                   if h is not None and _in_store(h) is None and h.decode() != self.holder}
        dead = {s for s, h in foreign.items()
                if h.startswith(ORPHAN + " ") or self.f.is_fenced(h.partition("@")[0])}
        foreign = {s: h for s, h in foreign.items() if s not in dead}
        mine_lost = [s for s, h in homes.items() if h is not None and h.decode() == self.holder
                     and not self._local_sieve(s).is_dir()]
        if foreign or mine_lost:
            where = sorted(set(foreign.values())) or [self.holder]
            raise UserError(f"shards {sorted(foreign) or mine_lost}: their latest sieve and virtual queues are on the "
                            f"disk of {', '.join(where)}, not in the object store; bring that directory back "
                            "(--resume on the same machines)")
        wanted = [s for s, h in homes.items() if h is None or _in_store(h) is not None or s in dead]
        for s in wanted:  # a stale copy (an earlier ownership) goes first
            shutil.rmtree(self._local_sieve(s), ignore_errors=True)
        for paths in self._virtual_queues(set(wanted)).values():
            for p in paths:
                p.unlink(missing_ok=True)
        from_store = {s for s in wanted if homes[s] is not None}
        checkpoints = self.f.checkpoints(sorted(from_store))
        n = 0
        if from_store:
            listed = {k: size for k, size in _shards_listed(self.store).items() if _shard_key(k)[0] in from_store}
            plains = _by_shard({k: size for k, size in listed.items() if not _CHECKPOINT.search(k)})
            fetch: dict[str, int] = {}
            for s in sorted(from_store):
                plain = plains.get(s, {})
                if s in dead:  # its last checkpoint, exactly, with the duplicate store of its last put-away
                    manifest = checkpoints[s] or {}
                    there = [k for k, size in manifest.items() if listed.get(k) == size]
                    if len(there) != len(manifest):
                        raise UserError(f"shard {s}: the object store {self.store.url} holds {len(there)} of the "
                                        f"{len(manifest)} files of its last checkpoint: its sieve is lost from the store")
                    fetch.update(manifest)
                    if all(counted(k) for k in manifest):  # (put away by a raycrawl that used plain keys)
                        fetch.update({k: size for k, size in plain.items() if not counted(k)})
                    continue
                state, short = put_away_state(homes[s], checkpoints[s], plain, listed)
                if short:
                    raise UserError(f"shard {s}: the object store {self.store.url} holds {short}: its sieve is lost "
                                    "from the store")
                fetch.update(state)
            for key in fetch:
                shard, name = _shard_key(key)
                name = _CHECKPOINT.sub("", name)
                target = self._local_sieve(shard) / name if key.startswith("sieve/") else layout(self.out).virtualizer / name
                self.store.get(key, target)
                n += 1
        for s in wanted:
            self._local_sieve(s).mkdir(parents=True, exist_ok=True)
        if dead:
            self._replay_spills(sorted(dead))
        self.f.set_shard_homes(dict.fromkeys(wanted, self.holder))
        log.info("shards %s brought from the store (%d files)%s", sorted(from_store), n,
                 f"; {sorted(dead)} taken over from a dead holder's checkpoint and log" if dead else "")
        return Brought(n, sorted(dead))

    def _replay_spills(self, shards: list[int]) -> None:
        """The virtual-queue spills the shards' logs hold, written again at their ends (a dead
        holder's spills since its last checkpoint; the sieve's entries are its sieve actor's)."""
        for entries in self.f.shard_logs(shards).values():
            for entry in shard_log.parse(entries):
                if isinstance(entry, shard_log.Spilled):
                    path = virtual_queue(layout(self.out).virtualizer, entry.host)
                    path.parent.mkdir(parents=True, exist_ok=True)
                    with open(path, "ab") as f:
                        f.truncate(entry.end)
                        f.seek(entry.end)
                        f.write(entry.data)

    def put_away(self, shards: Iterable[int]) -> int:
        """Upload ``shards``' state (their sieves closed), confirm it, then delete the local copy;
        files uploaded. A store that refuses raises :class:`StoreError` with everything kept."""
        shards = set(shards)
        if not shards:
            return 0
        if self._fenced(shards):
            return 0
        files: dict[str, Path] = {}
        for s, queues in self._virtual_queues(shards).items():
            files.update(shard_files(self.out, s, queues))
        # Under keys of its own, as a checkpoint's: a holder declared departed while it uploads
        # overwrites nothing its successor reads (the put-away it took over, its duplicate store).
        suffix = _new_suffix()
        for key, path in files.items():
            self.store.put(path, key + suffix)
        held = _shards_listed(self.store)
        unconfirmed = [k for k, p in files.items() if held.get(k + suffix) != p.stat().st_size]
        if unconfirmed:
            raise StoreError(f"the object store {self.store.url} does not list {unconfirmed[0]} at its size "
                             f"after the upload; the shard stays in {self.out}")
        manifests: dict[int, dict[str, int]] = {s: {} for s in shards}
        for key, path in files.items():
            manifests[_shard_key(key)[0]][key + suffix] = path.stat().st_size
        for s, manifest in manifests.items():  # the shards' state is whole in the store: their logs go
            home = f"{IN_STORE} {len(manifest)} {sum(manifest.values())}"
            if not self.f.checkpointed(s, manifest, None, home=home):
                self._fenced(shards)  # (declared departed during the upload: refused, and said so)
                return 0
        # (only now: until Redis named the new files, the last checkpoint's were the shards' state)
        named = {k for manifest in manifests.values() for k in manifest}
        self.store.delete([k for k in held if k not in named and _shard_key(k)[0] in shards])
        for s in shards:
            shutil.rmtree(self._local_sieve(s), ignore_errors=True)
        for key, path in files.items():
            if key.startswith("virtualizer/"):
                path.unlink(missing_ok=True)
        log.info("shards %s put away in the store (%d files)", sorted(shards), len(files))
        return len(files)


class ShardCheckpoints:
    """The sieve actor's side of shards outliving their holder: every ``interval`` seconds, each
    owned shard whose log grew is checkpointed — its sieve files and its hosts' virtual queues
    uploaded under new keys (those changed since the last upload), confirmed by the store's listing,
    named in Redis with the log entries it holds dropped (one script, refused once the holder is
    fenced), and only then the keys it replaced deleted. Runs
    between the sieve actor's calls, so the sieve's files hold still; a virtual queue may grow
    meanwhile (the agent's spills), and then the spill's log entry, kept, is applied on top. A
    store that refuses is tried again at the next interval (the logs grow meanwhile)."""

    def __init__(self, store: OutStore, frontier: RedisFrontier, out: Path, interval: float) -> None:
        self.store, self.f, self.out, self.interval = store, frontier, Path(out), interval
        self.next = time.monotonic() + interval
        self.sent: dict[str, tuple[int, int, str]] = {}  # key → (size, mtime, store key) of its last upload

    def due(self) -> bool:
        return time.monotonic() >= self.next

    def run(self, shards: list[int]) -> int:
        """Checkpoint the owned ``shards`` whose logs grew; how many were."""
        self.next = time.monotonic() + self.interval
        logged = {s: n for s, n in self.f.shard_log_lengths(shards).items() if n}
        if not logged:
            return 0
        queues = virtual_queues(self.f, self.out, set(logged))
        try:
            held = _shards_listed(self.store)
            last = self.f.checkpoints(sorted(logged))  # (what each names now: ``last``, in :meth:`_upload`)
            manifests = {s: self._upload(s, queues[s], held, last[s]) for s in sorted(logged)}
            # One listing confirms every shard's uploads: a listing per shard made a round's LIST
            # requests 2 + 2 × its shards (66 for an agent of 32), and S3 bills LISTs by the request.
            listed = _by_shard(_shards_listed(self.store))
            for s in sorted(logged):
                self._record(s, manifests[s], logged[s], listed.get(s, {}))
        except StoreError as exc:
            log.warning("shard checkpoint not taken (%s); trying again in %.0f s", exc, self.interval)
            return 0
        return len(logged)

    def _upload(self, shard: int, queues: list[Path], held: dict[str, int], last: dict[str, int] | None) -> dict[str, int]:
        """Upload what changed of ``shard`` under new keys; the checkpoint's manifest (key → bytes)."""
        files = {k: p for k, p in shard_files(self.out, shard, queues).items()
                 if counted(k) and not k.endswith(".tmp")}
        suffix = _new_suffix()
        # The duplicate store of the shard's last put-away stays named: a takeover brings it.
        manifest = {k: n for k, n in (last or {}).items() if not counted(k)}
        for key, path in files.items():
            try:
                st = path.stat()
                size, mtime, stored = self.sent.get(key, (-1, 0, ""))
                if (size, mtime) == (st.st_size, st.st_mtime_ns) and held.get(stored) == size:
                    manifest[stored] = size
                    continue
                data = path.read_bytes()  # (a virtual queue may grow meanwhile: what was read is what counts)
            except FileNotFoundError:
                # The agent's virtualizer drained the queue meanwhile: Redis forgot it before its
                # file went (Virtualizer._delete_drained), its URLs are in Redis, and the shard's
                # state has no queue for it. The sieve's own files hold still: theirs is a fault.
                if key.startswith("virtualizer/"):
                    continue
                raise
            self.store.put_bytes(data, key + suffix)
            manifest[key + suffix] = len(data)
            self.sent[key] = ((len(data), st.st_mtime_ns) if len(data) == st.st_size else (-1, 0)) + (key + suffix,)
        return manifest

    def _record(self, shard: int, manifest: dict[str, int], logged: int, mine: dict[str, int]) -> None:
        """Have Redis name the shard's whole checkpoint once the store lists it (``mine``: the
        shard's keys → bytes in the listing), then delete what it replaced: a holder dying at any
        point leaves the last checkpoint Redis names whole."""
        wrong = [k for k, size in manifest.items() if mine.get(k) != size]
        if wrong:
            raise StoreError(f"the object store {self.store.url} does not list {wrong[0]} at its size after the upload")
        if not self.f.checkpointed(shard, manifest, logged):
            log.warning("shard %d: checkpoint not recorded: this agent was declared departed", shard)
            return
        self.store.delete([k for k in mine if k not in manifest and counted(k)])


def virtual_queues(frontier: RedisFrontier, out: Path, shards: set[int]) -> dict[int, list[Path]]:
    """The local virtual-queue files of the hosts of ``shards`` that have one in Redis."""
    found: dict[int, list[Path]] = {s: [] for s in shards}
    for host, _ in frontier.virtual_queue_ends():
        if (s := shard_of(host)) in found:
            found[s].append(virtual_queue(layout(out).virtualizer, host))
    return found


def shard_files(out: Path, shard: int, queues: list[Path]) -> dict[str, Path]:
    """Store key → local file of a shard's state in ``out``: its sieve directory and the virtual
    queues ``queues`` (those that exist)."""
    root = layout(out).sieve / f"{shard:02d}"
    files = {f"sieve/{shard:02d}/{p.relative_to(root).as_posix()}": p
             for p in (sorted(root.rglob("*")) if root.is_dir() else ()) if p.is_file()}
    files.update({f"virtualizer/{shard:02d}/{p.name}": p for p in queues if p.is_file()})
    return files


def orphan_holders(f: RedisFrontier) -> list[int]:
    """A new run (``--resume``) names its agents afresh: shards still held by the last run's agents
    (an agent died, or the run stopped short of putting them away) become orphans, taken over from
    their checkpoints and logs by whoever gets them."""
    held = {s: h.decode() for s, h in f.shard_homes().items()
            if _in_store(h) is None and not h.startswith(ORPHAN.encode())}
    f.set_shard_homes({s: f"{ORPHAN} {h}" for s, h in held.items()})
    return sorted(held)


def missing_from_store(f: RedisFrontier, store: OutStore) -> list[str]:
    """What the store lacks of the shards put away (checked before a ``--resume``, whatever node is
    gone): each must be there at the count and bytes its put-away confirmed. (A shard an agent still
    held is checked when it is brought: its holder's directory may have it.)"""
    manifests = f.checkpoints(f.checkpointed_shards())  # (refuses records it cannot read)
    raw = {s: h for s, h in f.shard_homes().items() if _in_store(h) is not None}
    if not raw:
        return []
    listed = _shards_listed(store)
    plain = _by_shard({k: size for k, size in listed.items() if not _CHECKPOINT.search(k)})
    shorts = {s: put_away_state(home, manifests.get(s), plain.get(s, {}), listed)[1] for s, home in raw.items()}
    return [f"shard {s}: {short}" for s, short in sorted(shorts.items()) if short]


def put_away_state(home: bytes | None, manifest: dict[str, int] | None, plain: dict[str, int],
                   listed: dict[str, int]) -> tuple[dict[str, int], str | None]:
    """The store keys (→ bytes) of a shard put away — those its manifest names when it names the
    files and bytes ``P shome`` confirmed (as a put-away writes it), else the shard's plain keys
    (put away by a raycrawl before put-aways had keys of their own) — and, when the store's
    listing ``listed`` lacks any of them, what it holds of them (None when whole)."""
    files, size = _in_store(home) or (0, 0)
    state = manifest if manifest and (len(manifest), sum(manifest.values())) == (files, size) else plain
    there = [n for k, n in state.items() if listed.get(k) == n]
    if (len(there), sum(there)) == (files, size):
        return state, None
    return state, f"{len(there)} of its {files} files ({sum(there)} of {size} bytes)"


def counted(key: str) -> bool:
    """Keys a checkpoint holds and a takeover checks: all of a shard's but its duplicate store
    (SQLite's files: a copy taken while it is written would not be one)."""
    return DEDUP_NAME not in key.rsplit("/", 1)[-1]


def _shards_listed(store: OutStore) -> dict[str, int]:
    """Every key (→ bytes) the store holds of the shards' state: their sieves and virtual queues."""
    return {**store.listing("sieve/"), **store.listing("virtualizer/")}


def _by_shard(listed: dict[str, int]) -> dict[int, dict[str, int]]:
    """The shards' keys (→ bytes) of a listing, grouped by shard."""
    out: dict[int, dict[str, int]] = {}
    for k, size in listed.items():
        out.setdefault(_shard_key(k)[0], {})[k] = size
    return out


def _shard_key(key: str) -> tuple[int, str]:
    """``sieve/NN/rest`` or ``virtualizer/NN/rest`` → (NN, rest)."""
    _, shard, rest = key.split("/", 2)
    return int(shard), rest
