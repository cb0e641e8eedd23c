"""The render actor: an agent's browser (actors/visit/renderer.py) in a process of its own.

A browser's memory and crashes stay out of the crawl's processes: the renderer restarts its
browser after a crash, a hang or N renders, and Ray restarts the actor if its process dies (the
page it was rendering is then recorded as failed by the render stage, which gets the error). One
per agent, on the agent's node, started only when the crawl renders (``render`` not ``never``).
"""

from __future__ import annotations

from collections.abc import Mapping

from raycrawl.actors import named, per_batch
from raycrawl.actors.visit.renderer import Rendered, Renderer, Resource
from raycrawl.settings import Settings

JS_HEAP_MB = 1024


def renderer_of(settings: Settings) -> Renderer:
    """The renderer a crawl's settings ask for (its Chromium, time bound, user agent)."""
    # A page's scripts get a heap of their own size, so one that eats memory crashes its renderer
    # in a second, not after gigabytes (the renderer then starts a fresh browser).
    return Renderer(settings.chromium, timeout=settings.render_timeout, user_agent=settings.user_agent,
                    js_heap_mb=JS_HEAP_MB, screenshot=settings.render_screenshot, tabs=settings.render_tabs)


def actor_class():  # noqa: ANN201 - a Ray actor class, built lazily
    """The Ray actor shell (built lazily so importing this module does not import Ray)."""
    import ray

    # An async actor: Playwright's driver is asyncio; its renderer runs as many renders at once as
    # it has tabs (more calls wait inside it).
    @ray.remote(num_cpus=0, max_restarts=-1, max_task_retries=0, max_concurrency=64)
    @named
    class RenderActor:
        def __init__(self, settings: Settings) -> None:
            self.renderer = renderer_of(settings)

        @per_batch
        async def render(self, url: str, resources: Mapping[str, Resource]) -> Rendered:
            return await self.renderer.render(url, resources)

        async def close(self) -> None:
            await self.renderer.close()

    return RenderActor
