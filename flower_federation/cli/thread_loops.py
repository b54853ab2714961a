"""Event loops of the Pulumi SDK's mock monitor threads, closed at the interpreter's exit.

A user's mocks call `offline.placeholder_outputs` on the mock monitor's executor threads, where the SDK gives each
thread an event loop that nobody closes. Left to the garbage collector at exit, a loop whose self-pipe socket was
finalized first prints `Exception ignored in: BaseEventLoop.__del__ ... Invalid file descriptor: -1` after the
program's own output (a failing test's report, 1 run in 7 measured). Closed by an atexit hook instead, while
everything it holds is still there. `render` closes its own threads' loops after each run (offline.py)."""

from __future__ import annotations

import asyncio
import atexit

_loops: set[asyncio.AbstractEventLoop] = set()


def close_at_exit(loop: asyncio.AbstractEventLoop) -> None:
    if not _loops:
        atexit.register(_close)
    _loops.add(loop)


def _close() -> None:
    for loop in _loops:
        if not loop.is_running() and not loop.is_closed():
            loop.close()
    _loops.clear()
