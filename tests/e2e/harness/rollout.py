"""A rolling update, as the StatefulSet controller does it for a later render of the same
stack whose pod template changed (`pulumi up` after an edit of one pool).

What it does, as kube-controller-manager's StatefulSet controller (updateStrategy
RollingUpdate, pkg/controller/statefulset/stateful_set_control.go, without the
MaxUnavailableStatefulSet feature gate):

- From the highest ordinal down to `rollingUpdate.partition` (default 0), one pod at a
  time: a pod not at the update revision (its `controller-revision-hash` label) is
  deleted; once it is gone (graceful deletion: SIGTERM to every container,
  SIGKILL after the template's `terminationGracePeriodSeconds`, default 30) the
  controller creates the pod of that ordinal again from the new template (same name,
  same claims; the harness keeps its network namespace and address, see cluster.py);
  the next ordinal is deleted only once this one is available: Running and Ready for
  `minReadySeconds` (default 0).
- `updateStrategy.type: OnDelete` updates nothing by itself, and a `maxUnavailable` other
  than 1 needs the feature gate: both are refused, as is any other kind of workload.

PodDisruptionBudgets are not consulted by the controller (they bind evictions); a test
checks them against what this rollout does (scenarios.py, scenario 11).
"""

from __future__ import annotations

import copy
import threading
import time
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any, Optional

from tests.e2e.harness.host import HarnessError, NotReady
from tests.e2e.harness.pods import Pod
from tests.e2e.harness.workload_pods import pods_for
from tests.support.manifests import WORKLOAD_KINDS

if TYPE_CHECKING:
    from tests.e2e.harness.cluster import Cluster
    from tests.e2e.harness.jobs import Job

DEFAULT_GRACE = 30  # terminationGracePeriodSeconds unset


def changed_workloads(cluster: Cluster, manifests: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """The long-running workloads of a later render whose spec changed."""
    out = []
    for m in manifests:
        old = cluster.objects.get((m["kind"], m["metadata"]["name"]))
        if m["kind"] in WORKLOAD_KINDS and m["kind"] != "Job" and old is not None and old["spec"] != m["spec"]:
            out.append(m)
    return out


def _strategy(w: dict[str, Any]) -> int:
    """The update partition, after refusing what is not emulated."""
    name = f"{w['kind']} {w['metadata']['name']}"
    if w["kind"] != "StatefulSet":
        raise HarnessError(f"{name} changed: only a StatefulSet's rolling update is emulated")
    strategy = w["spec"].get("updateStrategy", {})
    if strategy.get("type", "RollingUpdate") != "RollingUpdate":
        raise HarnessError(f"{name}: updateStrategy {strategy.get('type')} is not emulated")
    rolling = strategy.get("rollingUpdate", {})
    if rolling.get("maxUnavailable", 1) != 1:
        raise HarnessError(f"{name}: maxUnavailable needs the MaxUnavailableStatefulSet feature gate, not emulated")
    return int(rolling.get("partition", 0))


def rolling_update(
    cluster: Cluster,
    manifests: list[dict[str, Any]],
    timeout: float,
    event: Optional[Callable[[str], None]] = None,
    before_roll: Optional[Callable[[list[Job]], None]] = None,
    first: Iterable[str] = (),
) -> list[str]:
    """Apply a later render in which StatefulSets changed (everything else as
    Cluster.update) and roll each StatefulSet's pods that are not at its update revision,
    as its controller would, each StatefulSet within `timeout`.

    The StatefulSets named in `first` roll before the others, as Pulumi orders a stack
    whose other workloads wait for them (it waits for a StatefulSet's rollout before what
    depends on it): if one gets stuck, nothing after it happens (`pulumi up` fails there).
    Then `before_roll` gets the Jobs the update created (not started), then the other
    StatefulSets roll at once. Controllers are independent: one whose pod never becomes
    available stops only its own rollout, and NotReady names every stuck one. A later
    render rolls what an earlier one left behind. Returns the pods replaced, in order;
    `event` hears each step."""
    changed = changed_workloads(cluster, manifests)
    for w in changed:
        _strategy(w)
    for w in changed:  # the API server takes the new spec; Cluster.update does the rest
        cluster.objects[(w["kind"], w["metadata"]["name"])] = copy.deepcopy(w)
    jobs = cluster.update(manifests)
    replaced: list[str] = []
    lock = threading.Lock()  # one pod replaced at a time: the cluster's DNS and pod table are shared
    statefulsets = [w for w in manifests if w["kind"] == "StatefulSet"]
    early = [w for w in statefulsets if w["metadata"]["name"] in set(first)]
    _roll(cluster, early, timeout, event, replaced, lock)
    if before_roll is not None:  # what Pulumi creates before the workloads that wait for it: a Job, say
        before_roll(jobs)
    _roll(cluster, [w for w in statefulsets if w not in early], timeout, event, replaced, lock)
    return replaced


def _roll(
    cluster: Cluster,
    workloads: list[dict[str, Any]],
    timeout: float,
    event: Optional[Callable[[str], None]],
    replaced: list[str],
    lock: threading.Lock,
) -> None:
    """The StatefulSet controllers of `workloads`, at once; NotReady names the stuck ones."""
    stuck: list[str] = []

    def control(w: dict[str, Any]) -> None:  # one StatefulSet's controller
        partition = _strategy(w)
        fresh = {p.name: p for p in pods_for(cluster, w)}
        deadline = time.monotonic() + timeout
        try:
            for k in range(w["spec"].get("replicas", 1) - 1, partition - 1, -1):
                name = f"{w['metadata']['name']}-{k}"
                old = cluster.pods[name]
                new = fresh[name]
                if old.labels.get("controller-revision-hash") == new.labels["controller-revision-hash"]:
                    # Already updated (by an earlier rollout): the controller still waits for it to be available.
                    _wait_available(cluster, old, int(w["spec"].get("minReadySeconds", 0)), deadline, event)
                    continue
                with lock:
                    _replace(cluster, old, new, event)
                    replaced.append(name)
                _wait_available(cluster, new, int(w["spec"].get("minReadySeconds", 0)), deadline, event)
        except NotReady as exc:
            stuck.append(str(exc))

    threads = [
        threading.Thread(target=control, args=(w,), name=f"rollout/{w['metadata']['name']}", daemon=True)
        for w in workloads
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if stuck:
        raise NotReady("\n".join(stuck))


def _replace(cluster: Cluster, old: Pod, new: Pod, event: Optional[Callable[[str], None]]) -> None:
    grace = float(old.spec.get("terminationGracePeriodSeconds", DEFAULT_GRACE))
    if event:
        event(f"deleting {old.name}")
    old.terminate(grace)
    old.remove_volumes()
    new.ip = old.ip  # the sandbox (network namespace) is kept: see cluster.py
    cluster.pods[new.name] = new
    cluster.write_dns()
    new.prepare_volumes()
    new.start()
    if event:
        event(f"created {new.name}")


def _wait_available(
    cluster: Cluster, pod: Pod, min_ready: int, deadline: float, event: Optional[Callable[[str], None]]
) -> None:
    ready_since: Optional[float] = None
    while time.monotonic() < deadline:
        if pod.is_ready():
            ready_since = ready_since or time.monotonic()
            if time.monotonic() - ready_since >= min_ready:
                if event:
                    event(f"{pod.name} available")
                return
        else:
            ready_since = None
        time.sleep(0.2)
    raise NotReady(f"{pod.name} not available within the rollout's bound:\n{pod.describe()}\n{cluster.logs([pod])}")
