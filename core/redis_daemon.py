"""Run the shared-frontier Redis in the foreground (for a cluster head): ``python -m raycrawl.redis_daemon``.

Bound to loopback unless told otherwise, and then only with a password (``--requirepass-file``):
a frontier others can reach is a frontier others can write to (queue URLs the crawler fetches
from our addresses, block hosts, drop work). The password is handed to the server on its stdin,
so ``ps`` does not show it; the URL printed shows it as ``***``.
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading

from raycrawl.credentials import is_loopback, read_secret, scrub
from raycrawl.errors import UserError
from raycrawl.redis_server import EmbeddedRedis


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dir", required=True, help="data directory (AOF lives here)")
    parser.add_argument("--port", type=int, default=6379)
    parser.add_argument("--bind", default="127.0.0.1", help="address to listen on (default loopback only)")
    parser.add_argument("--requirepass-file", metavar="FILE",
                        help="file whose first line is the password clients must give (required with a "
                        "--bind other than loopback)")
    args = parser.parse_args(argv)
    try:
        password = read_secret(args.requirepass_file, "--requirepass-file") if args.requirepass_file else None
        if password is None and not all(is_loopback(a) for a in args.bind.split()):
            raise UserError(f"--bind {args.bind} is not loopback: give --requirepass-file FILE (clients then "
                            "use --redis-password-file with the same file)")
        server = EmbeddedRedis(args.dir, port=args.port, bind=args.bind, password=password).start()
    except UserError as exc:
        print(f"redis_daemon: error: {exc}", file=sys.stderr)
        return 2
    print(scrub(server.url).replace("127.0.0.1", args.bind.split()[0]), flush=True)
    # The handler only flags: stopping inside it would wait on the server while the interrupted
    # main thread's wait() holds the same process lock (a deadlock, measured).
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    try:
        while server.proc.poll() is None and not stop.wait(0.5):
            pass
    except KeyboardInterrupt:
        pass
    server.stop()
    return server.proc.returncode or 0


if __name__ == "__main__":
    sys.exit(main())
