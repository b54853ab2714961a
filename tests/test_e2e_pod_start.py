"""The e2e harness's pod start (tests/e2e/harness/pods.py): the main containers start once every init
container succeeded, whenever its two events land. An init container that exits 0 sets `succeeded`, then
`finished`; both may land between the harness's timed-out wait and its test for a failure, which it once
read as a failed init container and never started the SuperLink (the CI run of 71d10c5)."""

from __future__ import annotations

import threading
from types import SimpleNamespace

from tests.e2e.harness.pods import Pod


class _SucceedsDuringTheWait(threading.Event):
    """`succeeded` of an init container that exits 0 just as the harness's wait times out."""

    def __init__(self, finished: threading.Event):
        super().__init__()
        self._finished = finished
        self._first = True

    def wait(self, timeout: float | None = None) -> bool:
        if self._first:  # the wait times out; then the container exits 0: succeeded, then finished
            self._first = False
            self.set()
            self._finished.set()
            return False
        return super().wait(timeout)


def _pod(init_succeeded: bool) -> tuple[SimpleNamespace, list[str]]:
    started: list[str] = []
    finished = threading.Event()
    init = SimpleNamespace(start=lambda: None, finished=finished)
    if init_succeeded:
        init.succeeded = _SucceedsDuringTheWait(finished)
    else:
        init.succeeded = threading.Event()
        finished.set()  # exited, not 0, and will not run again: the pod failed
    main = SimpleNamespace(start=lambda: started.append("superlink"))
    return SimpleNamespace(init_containers=[init], containers=[main], _stopping=threading.Event()), started


def test_the_main_containers_start_when_the_init_container_succeeds_during_the_wait() -> None:
    pod, started = _pod(init_succeeded=True)
    Pod._run_init(pod)  # type: ignore[arg-type]
    assert started == ["superlink"]


def test_a_failed_init_container_starts_nothing() -> None:
    pod, started = _pod(init_succeeded=False)
    Pod._run_init(pod)  # type: ignore[arg-type]
    assert started == []
