"""A Redis Lua script that survives a Redis restart, alone or inside a pipeline.

redis-py's ``Script`` sends ``EVALSHA``. Called directly, it reloads the script when a restarted
Redis (empty script cache) answers ``NOSCRIPT``. In a pipeline it does not: redis-py checks the
pipeline's scripts once (``SCRIPT EXISTS``) before sending it, and the client's retry then sends the
same ``EVALSHA`` to the restarted server. The pipeline fails, and a ``MULTI`` transaction is worse:
Redis does not roll back, so the transaction's other commands apply without the script. A refill of
a virtual queue moved its offset on disk and never put the URLs in the visit state; they were lost.
So in a pipeline the script goes as ``EVAL`` with its source, which a restarted server runs as is.
Called directly, a server that restarted again between the reload and the second ``EVALSHA`` (one
that exits at each write: a full disk) answers ``NOSCRIPT`` twice; then it too gets the source.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import redis


class LuaScript:
    def __init__(self, client: redis.Redis, source: str) -> None:
        self.source = source
        self._script = client.register_script(source)

    def __call__(self, keys: Sequence[object] = (), args: Sequence[object] = (),
                 client: redis.Redis | redis.client.Pipeline | None = None) -> Any:
        """Run on ``client`` (default: the client it was made with); in a pipeline, queue it there."""
        if isinstance(client, redis.client.Pipeline):
            return client.eval(self.source, len(keys), *keys, *args)
        try:
            return self._script(keys=list(keys), args=list(args), client=client)
        except redis.exceptions.NoScriptError:
            return (client or self._script.registered_client).eval(self.source, len(keys), *keys, *args)
