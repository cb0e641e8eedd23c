"""The request log: one line per request the in-vitro web answered (or dropped).

Format (text, UTF-8, tab-separated, one header line starting with ``#``)::

    start  end  ip  host  target  status  bytes  peer

* ``start`` — wall-clock seconds (``time.time()``, 6 decimals) when the server began handling the
  request (request line and headers parsed);
* ``end`` — when the response went to the socket: stamped just before the final send for bodies
  up to 256 KiB (one send on loopback; stamping after it could be late by a scheduling quantum
  when the server process is descheduled while the client already has the answer), after the
  last byte was accepted for bigger bodies; for a dropped or hung connection, when the server
  gave up or the client went away;
* ``ip`` — the local address of the socket, i.e. the IP the client dialed;
* ``host`` — the Host header as sent (``-`` if none); ``target`` — path and query as sent;
* ``status`` — HTTP status, ``0`` when no response was sent (connection reset, hang);
* ``bytes`` — body bytes sent (compressed size for the gzip bomb);
* ``peer`` — the client's address (a proxy's, for a request that came through one). A v1 log
  has no such column (read as ``""``).

Lines are buffered in memory and appended to the file every second, on SIGUSR1 and on stop.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

HEADER = "# websim request log v2\tstart\tend\tip\thost\ttarget\tstatus\tbytes\tpeer\n"


@dataclass(frozen=True, slots=True)
class LoggedRequest:
    start: float
    end: float
    ip: str
    host: str
    target: str
    status: int
    bytes: int
    peer: str = ""


class RequestLogWriter:
    """Buffered appender; :meth:`flush` writes everything recorded so far."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self._buf: list[str] = []
        self.count = 0
        with open(self.path, "w", encoding="utf-8") as f:
            f.write(HEADER)

    def record(self, start: float, end: float, ip: str, host: str, target: str, status: int, nbytes: int,
               peer: str = "-") -> None:
        # Header values come from clients: keep one record per line whatever they sent.
        if not _clean(host):
            host = "".join(ch if ch.isprintable() and ch not in " \t" else "%" for ch in host) or "-"
        if not _clean(target):
            target = "".join(ch if ch.isprintable() and ch not in " \t" else "%" for ch in target) or "-"
        self._buf.append(f"{start:.6f}\t{end:.6f}\t{ip}\t{host}\t{target}\t{status}\t{nbytes}\t{peer}\n")
        self.count += 1

    def flush(self) -> None:
        if self._buf:
            buf, self._buf = self._buf, []
            with open(self.path, "a", encoding="utf-8") as f:
                f.writelines(buf)


def _clean(field: str) -> bool:
    return bool(field) and field.isprintable() and " " not in field and "\t" not in field


def read_request_log(path: str | Path) -> list[LoggedRequest]:
    """All records of a request log, in file order (which is completion order)."""
    out = []
    with open(path, encoding="utf-8") as f:
        first = f.readline()
        if not first.startswith("# websim request log"):
            raise ValueError(f"{path}: not a websim request log")
        for n, line in enumerate(f, start=2):
            parts = line.rstrip("\n").split("\t")
            if len(parts) not in (7, 8):
                raise ValueError(f"{path}:{n}: expected 8 tab-separated fields (7 in a v1 log), got {len(parts)}")
            out.append(LoggedRequest(float(parts[0]), float(parts[1]), parts[2], parts[3], parts[4],
                                     int(parts[5]), int(parts[6]), parts[7] if len(parts) == 8 else ""))
    return out


def now() -> float:
    return time.time()
