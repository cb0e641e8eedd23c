"""The fetch loop's own failure modes (its visits are exercised by the robots and crawl tests)."""

from __future__ import annotations

import pytest

from raycrawl.actors.fetch_loop import FetchLoop
from raycrawl.settings import Settings


async def test_a_crashed_loop_is_reported_not_waited_for(redis_url):
    """A bug inside the loop must reach the agent (through ``drain``), which then stops the crawl;
    before, the loop task died, its error went to a log, and the agent waited for visits forever."""
    loop = FetchLoop(Settings(allow_networks="127.0.0.0/8"), redis_url)

    def broken(*_args, **_kwargs):
        raise ValueError("a bug")

    loop.wb.release_and_acquire = broken
    await loop.start()
    with pytest.raises(RuntimeError, match="fetch loop crashed") as info:
        for _ in range(50):
            await loop.drain(10, 0.05)
    assert isinstance(info.value.__cause__, ValueError)
    loop._runner = None  # stop() would re-raise the crash
    await loop.stop()
