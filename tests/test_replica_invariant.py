"""Cost flat in replicas (issue 36): a pool of 10,000 replicas without node authentication renders the same
objects as a pool of one, and must cost the same. Timing cannot hold that on a shared machine, so this counts
work: every line of `flower_federation` executed in the render (the plan, the builders, the invariants, the Pulumi
program's registrations under the mocks, the YAML), by module and thread alike, and the size of what was built
(objects, and every list's and mapping's elements in them). A loop over replicas anywhere in our code, even one
that builds nothing it keeps (the invariants' per-pod label dicts were one: 160,000 dicts for `make bench`'s
16 x 10,000 row), changes the line count. Its negative control injects such a loop into a builder.

Node keys are real per-replica resources (one pulumi-tls key per replica), so the stacks have no node auth, as
the bench's `replicas-*` rows (bench/stacks.py). Two pools, not the bench's sixteen: every pool renders through
the same code, and each traced render costs a tenth of a second per pool."""

from __future__ import annotations

import collections
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from types import FrameType
from typing import Any, Optional

import pytest

import flower_federation
from bench import stacks
from flower_federation.builders import supernodes
from flower_federation.cli import offline
from flower_federation.kube.documents import dump_all

PACKAGE = str(Path(flower_federation.__file__).parent)
# The offline runner closes the event loops of the mock monitor's executor threads, as many as the executor
# happened to start: its line count varies from run to run, with nothing of the render in it.
HARNESS = str(Path(offline.__file__))
POOLS = 2
FEW, MANY = 1, 10_000

Trace = Callable[[FrameType, str, Any], Optional[Callable[..., Any]]]


def lines_executed(fn: Callable[[], None]) -> collections.Counter[str]:
    """Lines of our package executed while `fn` runs, by file, in every thread (the program runs on its own)."""
    lines: collections.Counter[str] = collections.Counter()

    def local(frame: FrameType, event: str, _: Any) -> Trace:
        if event == "line":  # CPython reports a line again on each jump back to it: loop iterations count
            lines[frame.f_code.co_filename] += 1
        return local

    def start(frame: FrameType, event: str, _: Any) -> Optional[Trace]:
        name = frame.f_code.co_filename
        return local if name.startswith(PACKAGE) and name != HARNESS else None

    sys.settrace(start)
    threading.settrace(start)
    try:
        fn()
    finally:
        sys.settrace(None)
        threading.settrace(None)  # type: ignore[arg-type]
    return lines


def elements(value: Any) -> int:
    """Every list's and mapping's elements, nested: the size of what was built."""
    if isinstance(value, dict):
        return len(value) + sum(elements(v) for v in value.values())
    if isinstance(value, list):
        return len(value) + sum(elements(v) for v in value)
    return 0


def work(replicas: int, pools: int = POOLS) -> tuple[collections.Counter[str], int, int]:
    """(lines executed by file, objects, elements) of rendering the bench's stack with `replicas` per pool."""
    config = {"flower-federation:federation": stacks.federation(pools, replicas, node_auth=False)}
    built: list[Any] = []

    def render() -> None:
        objects = offline.run_program(config, "bench").manifests()
        dump_all(objects)
        built.extend(objects)

    lines = lines_executed(render)
    return lines, len(built), elements(built)


@pytest.fixture(scope="module")
def warm() -> None:
    """Once per process, untraced: what the first render caches (typing hints, the label maps) is no per-render work."""
    work(FEW)


def differences(few: collections.Counter[str], many: collections.Counter[str]) -> dict[str, tuple[int, int]]:
    return {Path(f).name: (few[f], many[f]) for f in sorted(set(few) | set(many)) if few[f] != many[f]}


def test_ten_thousand_replicas_cost_the_work_of_one(warm: None) -> None:
    lines_few, objects_few, size_few = work(FEW)
    lines_many, objects_many, size_many = work(MANY)
    assert (objects_many, size_many) == (objects_few, size_few)
    assert differences(lines_few, lines_many) == {}
    assert sum(lines_few.values()) > 5_000  # the render was traced: the plan, builders and program ran


def test_negative_control_a_loop_over_replicas_in_a_builder_is_counted(
    warm: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A pool's builder that walks its replicas and keeps nothing: the objects are the same, the work is not."""
    injected = (
        "def objects(plan, pool, _original=_original):\n"
        "    for _ in range(pool.replicas or 0):\n"
        "        pass\n"
        "    return _original(plan, pool)\n"
    )
    namespace: dict[str, Any] = {"_original": supernodes.objects}
    exec(compile(injected, supernodes.__file__, "exec"), namespace)  # counted as a line of builders/supernodes.py
    monkeypatch.setattr(supernodes, "objects", namespace["objects"])
    lines_few, objects_few, size_few = work(FEW, pools=1)  # one pool is enough to show it, at half the cost
    lines_many, objects_many, size_many = work(MANY, pools=1)
    assert (objects_many, size_many) == (objects_few, size_few)
    few, many = differences(lines_few, lines_many)["supernodes.py"]
    assert many - few >= MANY - FEW
