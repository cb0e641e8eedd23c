"""The object store a crawl's outputs are shipped to (``--out-store s3://bucket/prefix``).

``OUT`` stays the crawl's working directory on local disk; the store receives every file of it a
reader may need, each under ``prefix/`` with its path relative to ``OUT`` (``warc/…``, ``links/…``,
``crawl.log``, ``report.json``, an analysis's ``graph/``…; not :data:`LOCAL_ONLY`):

* a WARC or link-record file as soon as its writer closes it (size rotation, ``warc_max_bytes``),
  by the store actor's :class:`Shipper`, in the background: a slow or absent store never holds up
  fetching;
* everything else, and whatever is still missing, by the driver at the end of every run
  (:meth:`OutStore.sync_up`). If the store refuses, the crawl stops with one line and the files
  stay in ``OUT``: ``--resume`` uploads them once the store answers.

Nothing is ever deleted locally: a file is *confirmed* when the store lists its key with the local
size after a put that returned, and the next sync uploads whatever is not confirmed. Readers
(``graph build s3://…`` and the other analysis commands) mirror the store into a local cache
(:func:`local_copy`) and put their outputs back.

Credentials and endpoints come from the environment as AWS's own tools read them
(``AWS_ACCESS_KEY_ID``/``AWS_SECRET_ACCESS_KEY``/``AWS_SESSION_TOKEN``, ``AWS_REGION``,
``AWS_ENDPOINT_URL`` for an S3-compatible server, ``AWS_ALLOW_HTTP=true`` for one without TLS) or
from the VM's instance role; none is ever a flag. The client is obstore (Rust's ``object_store``):
one wheel with no system library, multipart uploads and retries built in, and it releases the GIL,
so uploads run beside the store actor's writes.
"""

from __future__ import annotations

import hashlib
import logging
import os
import queue
import threading
import time
from pathlib import Path

from raycrawl.argtypes import check_store_url
from raycrawl.errors import UserError

log = logging.getLogger(__name__)

# Everything under OUT is shipped but what only a running crawl uses (its Redis, sieve and
# virtualizer, the URLs of its Redis and dashboard, the lock files: every dot file) and unfinished
# .tmp files.
LOCAL_ONLY = ("redis", "sieve", "virtualizer", "redis-url", "dashboard-url")
CACHE_ENV = "RAYCRAWL_STORE_CACHE"


class StoreError(UserError):
    """The object store refused or could not be reached; the files concerned stay in OUT."""


def shipped_files(out: Path) -> dict[str, Path]:
    """key -> local path of every file under ``out`` that belongs in the store."""
    files = {}
    for p in sorted(out.iterdir()) if out.is_dir() else ():
        if p.name in LOCAL_ONLY or p.name.startswith("."):
            continue
        for f in [p] if p.is_file() else sorted(p.rglob("*")):
            if f.is_file() and not f.name.endswith(".tmp"):
                files[f.relative_to(out).as_posix()] = f
    return files


def allow_http(env: dict[str, str] | os._Environ) -> bool:
    """Whether the client may speak plain HTTP: ``AWS_ALLOW_HTTP`` if set, else whether the endpoint
    (``AWS_ENDPOINT_URL``) is an ``http://`` one — AWS's own tools take such an endpoint as given
    (MinIO, Ceph or moto without TLS), where obstore alone refuses it with "builder error". Client
    options given to obstore replace those it would read from the environment, so both are read here."""
    given = env.get("AWS_ALLOW_HTTP", "").strip().lower()
    if given:
        return given in ("1", "true", "yes")
    return (env.get("AWS_ENDPOINT_URL") or env.get("AWS_ENDPOINT") or "").lower().startswith("http://")


class OutStore:
    """One crawl's place in an object store: ``s3://bucket/prefix``."""

    def __init__(self, url: str) -> None:
        from datetime import timedelta

        from obstore.store import from_url

        self.url = check_store_url(url)
        options = {"connect_timeout": "5s", "timeout": "120s", "allow_http": allow_http(os.environ)}
        try:
            self.store = from_url(self.url, client_options=options,
                                  retry_config={"max_retries": 3, "backoff": {"init_backoff": timedelta(seconds=0.2)},
                                                "retry_timeout": timedelta(seconds=15)})
        except Exception as exc:  # obstore's configuration errors (bad region, bad endpoint)
            raise StoreError(f"cannot use the object store {self.url}: {_first_line(exc)}") from None

    def _call(self, what: str, fn, *args):
        import obstore

        try:
            return fn(*args)
        except (obstore.exceptions.BaseError, OSError) as exc:
            raise StoreError(f"the object store {self.url} refused to {what}: {_first_line(exc)}") from None

    def listing(self, under: str | None = None) -> dict[str, int]:
        """key -> size of every object under the prefix (and under ``under``, e.g. ``"sieve/"``)."""
        import obstore

        def walk() -> dict[str, int]:
            return {m["path"]: m["size"] for batch in obstore.list(self.store, prefix=under, chunk_size=1000)
                    for m in batch}

        return self._call("list its objects", walk)

    def put(self, path: Path, key: str) -> None:
        import obstore

        self._call(f"store {key}", obstore.put, self.store, key, path)

    def put_bytes(self, data: bytes, key: str) -> None:
        import obstore

        self._call(f"store {key}", obstore.put, self.store, key, data)

    def delete(self, keys: list[str]) -> None:
        import obstore

        if keys:
            self._call(f"delete {keys[0]}…", obstore.delete, self.store, keys)

    def get(self, key: str, path: Path) -> None:
        """Download ``key`` to ``path`` (written whole to a temporary name, then renamed)."""
        import obstore

        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(path.name + ".tmp")

        def fetch() -> None:
            with open(tmp, "wb") as f:
                for chunk in obstore.get(self.store, key):
                    f.write(chunk)

        self._call(f"return {key}", fetch)
        os.replace(tmp, path)

    def pending(self, out: Path) -> dict[str, Path]:
        """The shipped files of ``out`` the store does not hold at their local size."""
        held = self.listing()
        return {k: p for k, p in shipped_files(out).items() if held.get(k) != p.stat().st_size}

    def sync_up(self, out: Path, attempts: int = 3, pause: float = 2.0) -> tuple[int, int]:
        """Upload every pending file of ``out``; (files, bytes) uploaded. Tries ``attempts`` times
        (each with the client's own retries) before the one-line :class:`StoreError`."""
        done = size = 0
        for attempt in range(attempts):
            try:
                for key, path in self.pending(out).items():
                    self.put(path, key)
                    done += 1
                    size += path.stat().st_size
                return done, size
            except StoreError as exc:
                if attempt == attempts - 1:
                    raise StoreError(f"{exc}; the crawl's files stay in {out}: once the store answers, "
                                     "--resume --out-store … uploads them") from None
                log.warning("%s; trying again in %.0f s", exc, pause)
                time.sleep(pause)
        return done, size

    def sync_down(self, local: Path, skip: tuple[str, ...] = (), under: str | None = None) -> int:
        """Make ``local`` hold every object of the store (``under``: of that part, e.g. ``"links/"``)
        at its size but a running crawl's own state (:data:`LOCAL_ONLY`: the sieve shards and
        virtual queues that move between agents through the store, storage/shard_handoff.py) and
        the parts named in ``skip``; files downloaded."""
        n = 0
        for key, size in self.listing(under).items():
            path = local / key
            if ".." in Path(key).parts:
                raise StoreError(f"the object store {self.url} holds an unsafe key: {key!r}")
            if key.split("/", 1)[0] in LOCAL_ONLY + skip:
                continue
            if not (path.is_file() and path.stat().st_size == size):
                self.get(key, path)
                n += 1
        return n


def cache_dir(url: str) -> Path:
    """Where :func:`local_copy` mirrors ``url``: ``$RAYCRAWL_STORE_CACHE`` (default
    ``~/.cache/raycrawl/stores``) / a name derived from the URL."""
    url = check_store_url(url)
    root = Path(os.environ.get(CACHE_ENV) or Path.home() / ".cache" / "raycrawl" / "stores")
    tail = url[len("s3://"):].replace("/", "_")[:80]
    return root / f"{tail}-{hashlib.sha1(url.encode()).hexdigest()[:10]}"


def local_copy(url: str) -> Path:
    """A local directory holding the crawl stored at ``url`` (downloaded what it lacked)."""
    store = OutStore(url)
    local = cache_dir(url)
    local.mkdir(parents=True, exist_ok=True)
    n = store.sync_down(local)
    if not (local / "links").is_dir() and not (local / "warc").is_dir():
        raise UserError(f"{url}: no crawl there (no warc/ or links/ objects)")
    log.info("%s: %d objects downloaded to %s", url, n, local)
    return local


class Shipper:
    """Uploads closed files of a writer's ``OUT`` in a background thread, in the order they
    closed; a failed upload waits (doubling up to a minute) and is tried again, so a store that
    goes away holds nothing up: the driver's final :meth:`OutStore.sync_up` reports what is left.

    A writer that groups its files in numbered *pieces* (actors/visit/store_writer.py: the records of a
    few seconds) marks the end of each with :meth:`piece_done`; :attr:`shipped` is then the last
    piece whose every file is in the store (uploads keep the order of closing)."""

    MAX_PAUSE = 60.0

    def __init__(self, url: str, out: Path) -> None:
        self.store = OutStore(url)
        self.out = out
        self.q: queue.Queue[Path | int | None] = queue.Queue()
        self.shipped = 0
        self._changed = threading.Condition()
        self.thread = threading.Thread(target=self._run, name="shipper", daemon=True)
        self.thread.start()

    def closed(self, path: Path) -> None:
        self.q.put(path)

    def piece_done(self, piece: int) -> None:
        """Every file of ``piece`` was handed to :meth:`closed`."""
        self.q.put(piece)

    def wait_shipped(self, piece: int, timeout: float | None = None) -> int:
        """Wait until ``piece`` is in the store (or ``timeout`` s); the last piece that is."""
        with self._changed:
            self._changed.wait_for(lambda: self.shipped >= piece, timeout)
            return self.shipped

    def _run(self) -> None:
        pause = 1.0
        while (item := self.q.get()) is not None:
            if isinstance(item, int):
                with self._changed:
                    self.shipped = item
                    self._changed.notify_all()
                continue
            key = item.relative_to(self.out).as_posix()
            while True:
                try:
                    self.store.put(item, key)
                    pause = 1.0
                    break
                except StoreError as exc:
                    log.warning("%s; trying again in %.0f s", exc, pause)
                    time.sleep(pause)
                    pause = min(pause * 2, self.MAX_PAUSE)
                except FileNotFoundError:
                    log.error("%s vanished before its upload", item)
                    break

    def close(self, wait: float = 5.0) -> None:
        """Stop after the queued uploads, waiting at most ``wait`` seconds (the driver's final
        sync uploads whatever is left)."""
        self.q.put(None)
        self.thread.join(wait)


def _first_line(exc: BaseException) -> str:
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0]
