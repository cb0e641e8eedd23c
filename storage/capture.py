"""A page's last capture, as a periodic crawl's next pass needs it (storage/crawl_epochs.py
derives it from the link records; ``P prior`` in Redis holds it, in the form written here)."""

from __future__ import annotations

import json
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Capture:
    """A page's last stored content: the record a revisit refers to and the validators a
    conditional GET sends."""

    url: str       # the URL whose response record holds the bytes (this page, or what it duplicates)
    date: str      # that record's WARC-Date
    sha1: str      # its payload digest ("sha1:BASE32")
    etag: str | None
    modified: str | None

    def encode(self) -> str:
        """Its stored form (``P prior``: storage/redis_frontier.py), a JSON array."""
        return json.dumps([self.url, self.date, self.sha1, self.etag, self.modified])

    @classmethod
    def decode(cls, raw: str | bytes) -> Capture:
        return cls(*json.loads(raw))
