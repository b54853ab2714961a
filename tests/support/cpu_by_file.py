"""CPU-seconds per test file, printed at the end of every pytest session (pytest.ini loads this plugin).

On the shared 2-core machines CI and development run on, wall times say more about the neighbours than about a
test; CPU-seconds do not. Each test's setup, call and teardown are measured with getrusage: the pytest process's
own CPU plus its children's (those waited for: the subprocesses a test runs, a server it stops). A child that
outlives its test (a worker pool) is charged to the test during which it is reaped, threads to whichever test is
running. The e2e's containers are mostly not counted: started under `unshare` in PID namespaces, they are not
reaped through pytest's children, so neither getrusage nor `/usr/bin/time` sees them (a run of e2e scenarios 1
and 8 on 1.26.1: 39 CPU-s counted); for tests/e2e read the scenarios' phases. The session's total includes
collection (imports, module-level renders)."""

from __future__ import annotations

import resource
import time
from collections import defaultdict
from collections.abc import Generator
from typing import Any

import pytest

SHOWN = 15  # files in the table; the total covers every one

_by_file: dict[str, float] = defaultdict(float)
_start: list[float] = []


def cpu_seconds() -> float:
    me, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + children.ru_utime + children.ru_stime


def pytest_sessionstart(session: pytest.Session) -> None:
    _start[:] = [cpu_seconds(), time.monotonic()]


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: Any) -> Generator[None, None, None]:
    before = cpu_seconds()
    yield
    _by_file[item.location[0]] += cpu_seconds() - before


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if not _by_file or not _start:
        return
    total, wall = cpu_seconds() - _start[0], time.monotonic() - _start[1]
    tr = terminalreporter
    tr.section("CPU-seconds by test file (tests/support/cpu_by_file.py)")
    for path, seconds in sorted(_by_file.items(), key=lambda kv: -kv[1])[:SHOWN]:
        tr.write_line(f"{seconds:8.1f}  {path}")
    tests = sum(_by_file.values())
    tr.write_line(
        f"{total:8.1f}  the session: {tests:.1f} in tests ({len(_by_file)} files), {total - tests:.1f} collecting and "
        f"between tests; {wall:.0f} s wall"
    )
