"""Run the shared-frontier Redis in the foreground (for a cluster head): ``python -m raycrawl.redis_daemon``."""

from __future__ import annotations

import argparse
import signal
import sys

from raycrawl.redis_server import EmbeddedRedis


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--dir", required=True, help="data directory (AOF lives here)")
    parser.add_argument("--port", type=int, default=6379)
    parser.add_argument("--bind", default="127.0.0.1", help="address to listen on (default loopback only)")
    args = parser.parse_args(argv)
    server = EmbeddedRedis(args.dir, port=args.port, bind=args.bind).start()
    print(server.url.replace("127.0.0.1", args.bind), flush=True)
    signal.signal(signal.SIGTERM, lambda *_: server.stop())
    try:
        server.proc.wait()
    except KeyboardInterrupt:
        server.stop()
    return server.proc.returncode or 0


if __name__ == "__main__":
    sys.exit(main())
