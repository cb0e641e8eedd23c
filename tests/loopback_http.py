"""An aiohttp application served on a free loopback port, for tests that need a real server."""

from __future__ import annotations

from aiohttp import web


async def serve(app: web.Application, **runner_options) -> tuple[web.AppRunner, int]:
    """Start ``app`` on 127.0.0.1 (a free port); the caller ends it with ``await runner.cleanup()``."""
    runner = web.AppRunner(app, **runner_options)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    return runner, site._server.sockets[0].getsockname()[1]
