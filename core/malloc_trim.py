"""Keep freed heap memory from piling up in every long-lived process of a crawl (glibc).

A crawl's processes allocate and free the same amounts all day — page bodies, the pickled batches
Ray moves between actors, parse trees — and glibc keeps what was freed inside its arenas: a fetch
actor held 75 MB of free chunks in two thread arenas beside a live Python heap of ~20 MB
(``malloc_info`` through gdb, benchmarks/RESULTS.md, issue 28), and its resident size crept up
over a crawl although its live data did not. Two causes, two remedies:

* glibc raises its mmap threshold each time a large block is freed (up to 32 MB), so after the
  first few multi-megabyte batches, every later one is carved out of an arena and leaves a hole
  there. ``mallopt(M_MMAP_THRESHOLD, 256 KiB)`` fixes the threshold: large blocks are mapped and
  unmapped whole.
* what is freed in the arenas stays mapped until the top of the arena is free. ``malloc_trim(0)``
  returns every free page of every arena; it walks them under their locks (milliseconds), once a
  minute.

``RAYCRAWL_MALLOC_TRIM`` sets the period in seconds (default 60; 0 turns both off). Elsewhere than
glibc (musl, macOS) there is nothing to call and nothing is done.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import threading

TRIM_ENV = "RAYCRAWL_MALLOC_TRIM"
_started = False


M_MMAP_THRESHOLD = -3
MMAP_THRESHOLD = 256 * 1024


def _libc():
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        libc.malloc_trim.argtypes, libc.malloc_trim.restype = [ctypes.c_size_t], ctypes.c_int
        libc.mallopt.argtypes, libc.mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    except (OSError, AttributeError):
        return None
    return libc


def start() -> None:
    """Trim this process's heap every ``RAYCRAWL_MALLOC_TRIM`` seconds, from a daemon thread."""
    global _started
    if _started:
        return
    _started = True
    try:
        every = float(os.environ.get(TRIM_ENV, "60"))
    except ValueError:
        every = 60.0
    libc = _libc() if every > 0 else None
    if libc is None:
        return
    libc.mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD)
    trim = libc.malloc_trim
    def loop() -> None:
        while not threading.Event().wait(every):
            trim(0)

    threading.Thread(target=loop, name="malloc-trim", daemon=True).start()
