"""An agent's side of the operator's control plane (storage/operator_control.py): every agent
learns from it when the operator asked the crawl to stop; the lead agent (agent0) also sends the
seeds the operator added through the stages and the link router like any link, and copies the
operator's commands to ``OUT/operator.log``. A seed leaves the control plane's queue only once it
is durable in its sieve: a crash in between offers it again (the sieve drops the repeat)."""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable
from pathlib import Path
from urllib.parse import urlsplit

from raycrawl.storage.operator_control import ControlView

log = logging.getLogger(__name__)

POLL = 1.0
"""Seconds between an agent's looks at the control plane (commands apply within about 2 s)."""


class OperatorInbox:
    def __init__(self, view: ControlView, log_path: Path | None) -> None:
        """``view``: the agent's view of the control plane (storage/operator_control.py's control_view);
        ``log_path``: where the lead agent copies the operator's commands; None: not the lead."""
        self.control, self.view, self.log_path = view.control, view, log_path
        self.next_poll = 0.0
        self.logged = "0-0"
        if log_path is not None and log_path.exists():  # a resumed crawl: append what came since
            text = log_path.read_text(errors="replace")
            if text and not text.endswith("\n"):
                with open(log_path, "a") as f:
                    f.write("\n")  # the torn line ends here; the next command starts a line of its own
            for line in reversed(text.splitlines()):
                try:  # (a line torn by a kill is skipped: its command is copied again)
                    self.logged = json.loads(line)["id"]
                    break
                except (ValueError, KeyError, TypeError):
                    continue

    def stop_requested(self) -> bool:
        return self.view.current().stop

    def paused(self) -> bool:
        return self.view.current().paused

    def poll(self, judge: Callable[[str, str], str | None], deliver: Callable[[list[str]], bool]) -> int:
        """At most every :data:`POLL` seconds: route the operator's new seeds (``judge``: the stages'
        verdict, ``deliver``: to their owners' sieves, False if one is gone) and copy new commands
        to the log. Returns the seeds delivered."""
        now = time.monotonic()
        if now < self.next_poll:
            return 0
        self.next_poll = now + POLL
        if self.log_path is None:
            return 0
        self._copy_log()
        seeds = self.control.peek_seeds()
        kept = [u for u in seeds if judge(u, (urlsplit(u).hostname or "").lower()) is None]
        if kept and not deliver(kept):
            return 0  # an agent died: offered again once its shards have a new owner
        if seeds:
            self.control.drop_seeds(len(seeds))
            log.info("operator seeds: %d taken, %d in scope", len(seeds), len(kept))
        return len(kept)

    def _copy_log(self) -> None:
        rows = self.control.log_since(self.logged)
        if not rows:
            return
        with open(self.log_path, "a") as f:
            for i, fields in rows:
                when = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(float(fields.get("at", 0))))
                f.write(json.dumps({"id": i, "time": when, **fields}) + "\n")
        self.logged = rows[-1][0]
