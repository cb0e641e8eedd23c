"""An agent as a Ray actor, for crawls with several agents (actors/cluster/membership.py starts one per
node): the agent's loop (actors/cluster/agent.py) runs in the actor, its crew on the same node.

With ``agent_dir`` (no shared ``out``) the actor also moves its shards' files through the object
store (storage/shard_handoff.py): it brings the shards it starts with and those it takes, puts
away those it gives, and at the end of the run puts all of them away and uploads what else its
directory holds (the timeline, the operator log; WARC and link files went as each closed)."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

from raycrawl.actors import named
from raycrawl.actors.cluster.agent import Agent
from raycrawl.actors.cluster.periodic import fetch_due
from raycrawl.settings import Settings
from raycrawl.storage.crawl_dir import join_run, layout
from raycrawl.storage.out_store import OutStore
from raycrawl.storage.shard_handoff import ShardHandoff, holder_name


def actor_class():
    """An agent as a Ray actor, for crawls with several agents: the agent's loop runs in the actor
    (threaded, so ``run`` may block while the driver pauses and resumes it), its crew on the same
    node."""
    import ray

    # (threads: run and the driver's pause, give, take, resume; outcome() once an unreachable spell ends)
    @ray.remote(num_cpus=0, max_concurrency=16)

    @named
    class AgentActor:
        def __init__(self, settings: Settings, redis_url: str, name: str, shards: dict[int, str],
                     budget: int | None) -> None:
            self.run_lock = join_run(settings.out)  # storage/crawl_dir.py, "Workers"
            self.done, self.result = threading.Event(), {}
            self.agent = Agent(settings, redis_url, None, name=name, shards=shards, budget=budget)
            self.handoff = None
            if settings.agent_dir is not None:
                out = Path(settings.out)
                (layout(out).crawl_id).write_text(self.agent.f.meta()["crawl_id"] + "\n")
                self.handoff = ShardHandoff(OutStore(settings.out_store), self.agent.f, out, holder_name(name, out))

        def start(self) -> None:
            dead: list[int] = []
            if self.handoff is not None:
                dead = self.handoff.bring(self.agent.router.my_shards).taken_over
                if self.agent.s.dedup_index:  # the driver put the built table in the store
                    from raycrawl.storage.dedup_index import FILE

                    self.handoff.store.get(FILE, self.handoff.out / FILE)
                if self.agent.epoch:  # a pass of a periodic crawl: the driver put its due file there
                    fetch_due(self.handoff.store, self.handoff.out, self.agent.epoch)
            self.agent.start(replay=dead)

        def run(self) -> dict[str, Any]:
            report = self.agent.run(prepare=False)
            self.result = {"agent": self.agent.name, "pages": self.agent.run_pages, "stopped": report["stopped"]}
            self.done.set()
            return self.result

        def outcome(self) -> dict[str, Any]:
            """What run() returns, once it has (for a driver whose run() call was cut off)."""
            self.done.wait()
            return self.result

        def pause(self) -> bool:
            return self.agent.request_pause()

        def give(self, shards: list[int]) -> None:
            ray.get(self.agent.crew.sieve.give.remote(shards))
            if self.handoff is not None:
                self.handoff.put_away(shards)

        def take(self, shards: list[int]) -> None:
            dead = self.handoff.bring(shards).taken_over if self.handoff is not None else []
            ray.get(self.agent.crew.sieve.take.remote(shards, dead))

        def resume(self, shards: dict[int, str], budget: int | None) -> None:
            self.agent.resume(shards, budget)

        def stop(self) -> None:
            """End its loop at the next batch boundary, paused or not (the crawl stops: another
            agent failed, or the driver did)."""
            self.agent.stop_requested.set()
            self.agent.resumed.set()

        def leave(self, shards: dict[int, str]) -> None:
            """Paused, its shards given away: end its loop (with the new map it owns nothing, so
            close() puts nothing more away)."""
            self.agent.stop_requested.set()
            self.agent.resume(shards, 0)

        def close(self) -> None:
            self.agent.close()
            if self.handoff is not None:
                self.handoff.put_away(self.agent.router.my_shards)
                self.handoff.store.sync_up(self.handoff.out)

    return AgentActor
