"""The ``raycrawl`` console entry point.

Each sub-command lives in its own module ``raycrawl.commands.<name>`` exposing
``register(subparsers)``; the module must import heavy dependencies (Ray, numpy…) inside
its handlers so that ``raycrawl --help`` stays fast. A handler returns an exit code (or None).
"""

from __future__ import annotations

import argparse
import importlib
import logging
import os
import sys

from raycrawl.credentials import scrub, scrub_logs
from raycrawl.errors import UserError

# Order here is the order shown in --help.
COMMANDS = (
    "crawl",
    "settings",
    "demo",
    "url",
    "robots",
    "links",
    "websim",
    "status",
    "ctl",
    "console",
    "check",
    "log",
    "dedup",
    "graph",
    "summaries",
    "simulate",
    "rank",
    "spam",
    "index",
    "search",
    "serve",
    "warc",
)

log = logging.getLogger("raycrawl")


class _Parser(argparse.ArgumentParser):
    """argparse with a one-line error (the usage is one ``--help`` away), exit 2 as usual."""

    def error(self, message: str):  # type: ignore[override]
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="raycrawl",
        description="A BUbiNG-class web crawler and web-analytics pipeline on Ray and Redis.",
    )
    from raycrawl import __version__

    parser.add_argument("--version", action="version", version=f"raycrawl {__version__}")
    _logging_options(parser, "")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMANDS:  # a module that fails to import is a broken install: the error shows
        importlib.import_module(f"raycrawl.commands.{name}").register(sub)
    for leaf in _leaves(sub):  # `raycrawl crawl … -v` works as `raycrawl -v crawl …` does
        _logging_options(leaf, "_sub")
    return parser


def _logging_options(parser: argparse.ArgumentParser, suffix: str) -> None:
    # A sub-command's copies write to their own dests (argparse lets a sub-parser's defaults
    # overwrite the main parser's values); main() adds them up.
    default = argparse.SUPPRESS if suffix else None
    parser.add_argument("-v", "--verbose", action="count", dest="verbose" + suffix,
                        default=argparse.SUPPRESS if suffix else 0, help="more logging (-vv for debug)")
    parser.add_argument("--log-file", dest="log_file" + suffix, default=default, metavar="FILE",
                        help="also write the log to FILE (appended)")


def _leaves(sub: argparse._SubParsersAction) -> list[argparse.ArgumentParser]:
    out = []
    for parser in dict.fromkeys(sub.choices.values()):
        nested = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
        out.extend(_leaves(nested[0]) if nested else [parser])
    return out


def _local_copies(args: argparse.Namespace) -> list[tuple[str, object]]:
    """Replace each crawl directory given as an ``s3://`` URL (core/argtypes.py) by a local copy of
    the stored crawl (storage/out_store.py); the (URL, copy) pairs."""
    from raycrawl.argtypes import StoreURL

    stored = []
    for name, value in vars(args).items():
        if isinstance(value, StoreURL):
            from raycrawl.storage.out_store import local_copy

            setattr(args, name, local_copy(value))
            stored.append((str(value), getattr(args, name)))
    return stored


def _put_back(stored: list[tuple[str, object]]) -> None:
    """Upload what a command wrote into the local copies (a graph, an index…) to their stores."""
    from raycrawl.storage.out_store import OutStore

    for url, local in stored:
        files, _ = OutStore(url).sync_up(local)
        if files:
            print(f"{files} new or changed files uploaded to {url}", file=sys.stderr)


def main(argv: list[str] | None = None) -> int:
    # Local clusters we start ourselves listen on loopback only; a user joining a secured cluster
    # sets RAY_AUTH_MODE (and its token) in the environment, which we never override.
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    parser = build_parser()
    args = parser.parse_args(argv)
    verbose = args.verbose + getattr(args, "verbose_sub", 0)
    log_file = getattr(args, "log_file_sub", None) or args.log_file
    level = logging.WARNING - 10 * min(verbose, 2)
    fmt = "%(asctime)s %(levelname)s %(name)s: %(message)s"
    logging.basicConfig(level=level, format=fmt)
    scrub_logs()  # no credential in a log line (core/credentials.py)
    # The actors of a Ray this process starts inherit it (actors.actor_logging). Their default,
    # WARNING, is left unset: forwarded to a joined cluster (core/ray_start.py) it gives the job a
    # runtime_env, and Ray then starts every worker through its setup_worker.py, which imports ray
    # once more before the worker does (~0.5 CPU-s and as long a wait per actor, measured).
    if level == logging.WARNING:
        os.environ.pop("RAYCRAWL_LOG_LEVEL", None)
    else:
        os.environ["RAYCRAWL_LOG_LEVEL"] = logging.getLevelName(level)
    if log_file:
        try:
            handler = logging.FileHandler(log_file)
        except OSError as exc:
            print(f"raycrawl: error: cannot write the log file {log_file}: {exc.strerror or exc}", file=sys.stderr)
            return 2
        handler.setFormatter(logging.Formatter(fmt))
        logging.getLogger().addHandler(handler)
        logging.getLogger().setLevel(level)
        scrub_logs()
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        stored = _local_copies(args)
        code = args.func(args)
        if code in (0, None):
            _put_back(stored)
    except UserError as exc:
        print(f"raycrawl {args.command}: error: {scrub(str(exc))}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print(f"raycrawl {args.command}: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        # `raycrawl graph export DIR | head` closes stdout early: not an error.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    return int(code or 0)


if __name__ == "__main__":
    sys.exit(main())
