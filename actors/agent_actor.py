"""An agent as a Ray actor, for crawls with several agents (actors/membership.py starts one per
node): the agent's loop (actors/agent.py) runs in the actor, its crew on the same node."""

from __future__ import annotations

from typing import Any

from raycrawl.actors import named
from raycrawl.actors.agent import Agent
from raycrawl.settings import Settings
from raycrawl.storage.crawl_dir import join_run


def actor_class():
    """An agent as a Ray actor, for crawls with several agents: the agent's loop runs in the actor
    (threaded, so ``run`` may block while the driver pauses and resumes it), its crew on the same
    node."""
    import ray

    @ray.remote(num_cpus=0, max_concurrency=4)

    @named
    class AgentActor:
        def __init__(self, settings: Settings, redis_url: str, name: str, shards: dict[int, str],
                     budget: int | None) -> None:
            self.run_lock = join_run(settings.out)  # storage/crawl_dir.py, "Workers"
            self.agent = Agent(settings, redis_url, None, name=name, shards=shards, budget=budget)

        def start(self) -> None:
            self.agent.start()

        def run(self) -> dict[str, Any]:
            report = self.agent.run(prepare=False)
            return {"agent": self.agent.name, "pages": self.agent.run_pages, "stopped": report["stopped"]}

        def pause(self) -> bool:
            return self.agent.request_pause()

        def give(self, shards: list[int]) -> None:
            ray.get(self.agent.crew.sieve.give.remote(shards))

        def take(self, shards: list[int]) -> None:
            ray.get(self.agent.crew.sieve.take.remote(shards))

        def resume(self, shards: dict[int, str], budget: int | None) -> None:
            self.agent.resume(shards, budget)

        def close(self) -> None:
            self.agent.close()

    return AgentActor
