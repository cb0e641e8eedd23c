"""User-facing errors: printed as one clear line by the CLI, never as a traceback."""

from __future__ import annotations


class UserError(Exception):
    """Bad input from the user (arguments, files, configuration). The CLI prints it and exits 2."""

    exit_code = 2


class CrawlStop(UserError):
    """A failure that stops the whole crawl with its one line, wherever it struck (not a bug, and
    not one agent's death): everything committed before is durable, ``--resume`` continues."""
