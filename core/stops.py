"""The one-line stops of a crawl (exit 2, no traceback) for failures that are not bugs: a full or
failing disk, a Redis that refuses writes, a Redis gone for longer than the crawl waits."""

from __future__ import annotations

import errno

from raycrawl.errors import CrawlStop, UserError
from raycrawl.redis_server import RedisLost

_DISK_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EIO, errno.EROFS, errno.EFBIG, errno.EACCES})


def storage_failure(exc: BaseException) -> UserError | None:
    """The one-line stop for a full or failing disk (or Redis refusing writes, or gone for good),
    wherever it struck:
    the driver, an actor (its OSError arrives wrapped by Ray), or Redis (MISCONF: AOF not writable;
    OOM: maxmemory). Everything committed before is durable; the rest is redone on --resume."""
    import redis

    exc = getattr(exc, "cause", None) or exc  # an actor's exception arrives wrapped in Ray's RayTaskError
    if isinstance(exc, CrawlStop):
        return exc
    # (a pipeline's error names the command first: "Command # N (...) of pipeline caused error: MISCONF ...")
    if isinstance(exc, redis.ResponseError) and ("MISCONF " in str(exc) or "OOM command not allowed" in str(exc)):
        return UserError(f"Redis refuses writes ({exc}); stopped with everything committed before: "
                         "free space or memory, then --resume")
    if isinstance(exc, RedisLost):
        return UserError(f"{exc}; stopped with everything committed before: once it answers again "
                         "(see its log), --resume continues the crawl")
    if isinstance(exc, OSError) and exc.errno in _DISK_ERRNOS:
        where = f": {exc.filename}" if exc.filename else ""
        return UserError(f"cannot write the crawl's files ({exc.strerror or exc}{where}); stopped with everything "
                         "committed before: free space or fix the disk, then --resume")
    return None
