"""Fault scenarios (issue 11, section 2), on the federations of scenarios.py, both Flower
versions. Each asserts the federated run's outcome and that nothing was lost: the
registered nodes and every earlier run, with its details, as `flwr ls` and `flwr
supernode list` show them after the fault.

  8. The SuperLink's container is killed while a run trains (the kubelet restarts it):
     Flower reports that run finished (failed: its ServerApp died with the container, or
     completed), never left running; the next run completes.
 10. Process isolation: a ClientApp SuperExec sidecar is killed while its ClientApp
     trains: the kubelet restarts it, the interrupted run still finishes, the next run
     has every SuperNode again, its ClientApps in the SuperExec sidecars.
 11. A rolling update of pool `a` (its nodeConfig edited, the stack rendered again with
     its state kept): only that pool's StatefulSet changes; its pods are replaced as the
     StatefulSet controller does (harness/rollout.py); pool `b` never disconnects; pool
     `a` never has more pods unavailable, nor more SuperNodes offline in the SuperLink,
     than its PodDisruptionBudget allows; the next run sees the new node config.
 12. Network partition: the SuperNodes and the SuperLink lose each other for 60 s (their
     pods' links cut at the node's bridge; the kubelet still probes them), then the
     partition heals: the SuperLink saw every node go offline, every node comes back
     online by itself, a run started after healing completes.

(Scenario 17, a stopped SuperNode healed by its liveness probe, is liveness.py's;
scenario 7, the SuperExec hop, appio.py's; 9 is no scenario: test_9 checks that
nothing is left behind.)

Timeouts come from Flower's own timers, identical in 1.26.1 and 1.41.0 (read from the
installed packages; flwr/common/constant.py unless said):

- A SuperNode sends a heartbeat every (HEARTBEAT_DEFAULT_INTERVAL 30 s -
  HEARTBEAT_CALL_TIMEOUT 5 s) x (HEARTBEAT_BASE_MULTIPLIER 0.8 +- 0.1) = 17.5-22.5 s
  (flwr/supercore/heartbeat.py, HeartbeatSender._run). A failed one is retried with
  exponential back-off 1, 2, 4 ... capped at 20 s, each wait drawn uniformly below that
  cap (full jitter; RetryInvoker's default), without limit.
- The SuperLink holds a node online until its last heartbeat + HEARTBEAT_PATIENCE 2 x
  30 s = 60 s (linkstate acknowledge_node_heartbeat / activate_node); a heartbeat after
  that brings it back online.
- A heartbeat call times out after 5 s in the gRPC era (grpc_rere_client/connection.py);
  in the HTTP era after the Fleet client's 30 s (supercore/protobuf/client.py,
  ProtobufClient timeout=30.0).
- Every other Fleet call is retried on connection errors with the same back-off,
  capped at MAX_RETRY_DELAY 20 s, full jitter, without limit (make_simple_grpc_retry_invoker,
  make_simple_http_retry_invoker); `--max-retries`/`--max-wait-time` only make it give up.
- A ServerApp (and a ClientApp, toward its SuperNode) heartbeats the same way; its
  token expires 60 s (2 x 30 s) after the last one, and the next state access marks the
  run finished:failed, "No heartbeat received from the run" (1.26: corestate
  _cleanup_expired_tokens; 1.41: "... from the task", _cleanup_expired_task_tokens).

None of these has a flag: Flower 1.26.1 and 1.41.0 take no heartbeat or retry interval
on any command line (`flower-superlink/supernode/superexec --help`), so the test stacks
cannot lower them; the scenarios wait only as long as these timers require, and overlap
the waits with other work where they can (scenario 8 runs the next run meanwhile).
"""

from __future__ import annotations

import copy
import threading
import time
from typing import Any, Optional

from tests.e2e import scenarios as base
from tests.e2e.harness.rollout import changed_workloads, rolling_update
from tests.e2e.kills import KillWhileTraining
from tests.e2e.rendering import NAME
from tests.e2e.stack import Federation

HEARTBEAT_INTERVAL = 30.0  # HEARTBEAT_DEFAULT_INTERVAL
HEARTBEAT_PATIENCE = 2  # HEARTBEAT_PATIENCE
NODE_EXPIRY = HEARTBEAT_PATIENCE * HEARTBEAT_INTERVAL  # 60 s: online_until after a heartbeat
RUN_EXPIRY = HEARTBEAT_PATIENCE * HEARTBEAT_INTERVAL  # 60 s: an app's token after its heartbeat
RETRY_CAP = 20.0  # MAX_RETRY_DELAY and the heartbeat sender's max_delay
HTTP_CALL_TIMEOUT = 30.0  # HTTP era: the Fleet client's request timeout

PARTITION_SECONDS = 60.0  # the partition
# After healing, a SuperNode is back online at its next heartbeat: its retry wait (at most
# RETRY_CAP) after the call in flight fails (at most HTTP_CALL_TIMEOUT), plus one call.
# Twice that covers a stalled TCP connection's retransmission and a loaded machine.
RECONNECT_TIMEOUT = 2 * (RETRY_CAP + HTTP_CALL_TIMEOUT)
STATUS_MARGIN = 20.0  # after RUN_EXPIRY: CLI calls on a loaded machine
ROLLOUT_TIMEOUT = 240.0
WATCH_EVERY = 0.25


# --- what must not be lost ------------------------------------------------------------------


class Kept:
    """The registered nodes and every run with its details, as the CLI lists them."""

    def __init__(self, fed: Federation):
        self.runs = {str(r["run-id"]): r for r in fed.runs()}
        self.nodes = sorted(str(n["node-id"]) for n in fed.supernodes())

    def check(self, fed: Federation, settled: Optional[str] = None) -> dict[str, dict[str, Any]]:
        """Everything kept is still there, unchanged (a run that was still going, or
        `settled`, may only have finished since); returns the runs added since."""
        runs = {str(r["run-id"]): r for r in fed.runs()}
        for rid, before in self.runs.items():
            after = runs.get(rid)
            assert after is not None, f"run {rid} ({before['status']}) is no longer listed: {sorted(runs)}"
            if before["status"].startswith("finished") and rid != settled:
                assert after == before, f"run {rid} changed: {before} -> {after}"
        nodes = sorted(str(n["node-id"]) for n in fed.supernodes())
        assert nodes == self.nodes, f"registered nodes changed: {self.nodes} -> {nodes}"
        return {rid: r for rid, r in runs.items() if rid not in self.runs}


# --- node ids ------------------------------------------------------------------------------------


def node_ids(fed: Federation, pods: list[str]) -> dict[str, str]:
    ids = {pod: base.node_id_from_log(fed, pod) for pod in pods}
    assert all(ids.values()), f"a SuperNode logged no node id: {ids}"
    return {pod: str(nid) for pod, nid in ids.items()}


# --- 12. network partition ------------------------------------------------------------------


def scenario_12(fed: Federation, memo: dict) -> None:
    fed.wait_ready(base.READY_TIMEOUT)
    expected = base.expected_clients(fed.rendered.raw)
    kept = Kept(fed)
    pods = fed.supernodes_pods
    ids = node_ids(fed, [p.name for p in pods])
    restarts = {p.name: p.containers[0].restarts for p in pods}

    fed.cluster.partition([fed.superlink, *pods])
    cut = time.monotonic()
    try:
        offline_after: dict[str, float] = {}
        while time.monotonic() - cut < PARTITION_SECONDS:
            for nid, online in (fed.node_states() or {}).items():
                if not online:
                    offline_after.setdefault(nid, time.monotonic() - cut)
            time.sleep(1)
        # Every node's last heartbeat came before the cut, so its online_until (+60 s)
        # is over by now: the SuperLink must see them all offline (the negative control).
        at_heal = fed.node_states()
    finally:
        fed.cluster.heal()
    healed = time.monotonic()
    fed.phase("partition", healed - cut)
    assert at_heal is not None, "the SuperLink's state could not be read"
    online = sorted(nid for nid, up in at_heal.items() if up)
    assert not online, f"still online in the SuperLink after {PARTITION_SECONDS:.0f}s cut off: {online}"
    fed.phase(
        "offline after " + "/".join(f"{offline_after.get(n, PARTITION_SECONDS):.0f}" for n in sorted(ids.values())),
        0,
    )

    fed.wait_ready(RECONNECT_TIMEOUT)
    fed.phase("all online after healing", time.monotonic() - healed)
    assert node_ids(fed, list(ids)) == ids, "a SuperNode came back as another node"
    for pod in restarts:
        again = fed.cluster.pod(pod).containers[0].restarts - restarts[pod]
        if again:
            fed.incident(f"{pod} restarted {again}x during the partition")

    result = fed.run_app()
    base.assert_completed(result, expected)
    new = kept.check(fed)
    assert list(new) == [base.run_id(result)], f"runs added: {sorted(new)}"
    assert new[str(base.run_id(result))]["status"] == "finished:completed", new


# --- 8. SuperLink restarted mid-run ---------------------------------------------------------


def scenario_8(fed: Federation, memo: dict) -> None:
    fed.wait_ready(base.READY_TIMEOUT)
    expected = base.expected_clients(fed.rendered.raw)
    kept = Kept(fed)
    # The SuperLink dies once a ClientApp trains anywhere.
    kill = KillWhileTraining(fed, fed.superlink.containers[0], {p.name for p in fed.supernodes_pods})

    interrupted = fed.run_app({"num-server-rounds": 2, "train-seconds": 5.0, "round-timeout": 30.0}, during=kill)
    assert interrupted.during_error is None, interrupted.during_error
    fed.phase(f"flwr run ended ({interrupted.summary()})", 0)

    kill.wait_restarted()
    fed.wait_ready(base.READY_TIMEOUT)  # the SuperNodes reconnect by themselves
    fed.phase("SuperLink back, every node online", kill.since())

    result = fed.run_app()
    base.assert_completed(result, expected)
    rid = str(base.run_id(result))

    # The interrupted run: Flower settles it once its ServerApp's token lapses (at most
    # RUN_EXPIRY after its last heartbeat, which came before the kill); never left running.
    assert kill.at is not None
    bound = kill.at + RUN_EXPIRY + STATUS_MARGIN
    while True:
        new = kept.check(fed)
        assert rid in new and len(new) == 2, f"runs added: {sorted(new)}, expected the interrupted one and {rid}"
        (gone,) = [r for r in new.values() if str(r["run-id"]) != rid]
        if gone["status"].startswith("finished") or time.monotonic() > bound:
            break
        time.sleep(5)
    assert gone["status"] in ("finished:failed", "finished:completed"), (
        f"the run interrupted by the SuperLink restart is still {gone['status']} "
        f"{kill.since():.0f}s after the kill: {gone}"
    )
    assert new[rid]["status"] == "finished:completed", new[rid]
    fed.phase(f"interrupted run {gone['status']} by {kill.since():.0f}s after the kill", 0)


# --- 10. ClientApp SuperExec killed (process isolation) --------------------------------------


def scenario_10(fed: Federation, memo: dict) -> None:
    fed.wait_ready(base.READY_TIMEOUT)
    expected = base.expected_clients(fed.rendered.raw)
    kept = Kept(fed)
    victim_pod = f"{NAME}-supernode-a-1"
    node_id = base.node_id_from_log(fed, victim_pod)
    victim = fed.cluster.pod(victim_pod).container("superexec-clientapp")
    kill = KillWhileTraining(fed, victim, {victim_pod}, "superexec-clientapp")

    # The run does not hang on the lost ClientApp: it finishes, with or without that pod
    # (its restarted SuperExec may still run it). The round ends once the other pods
    # replied (round-quorum), with a-1 if its reply came by then.
    survivors = {pod: v for pod, v in expected.items() if pod != victim_pod}
    interrupted = fed.run_app(
        {"num-server-rounds": 1, "train-seconds": 3.0, "round-quorum": base.quorum(survivors)},
        during=kill,
    )
    assert interrupted.during_error is None, interrupted.during_error
    round_clients = interrupted.rounds[0] if interrupted.rounds else {}
    base.assert_completed(interrupted, expected if victim_pod in round_clients else survivors, rounds=1)
    fed.phase("interrupted run " + ("kept" if victim_pod in round_clients else "lost") + f" {victim_pod}", 0)

    kill.wait_restarted()
    fed.wait_ready(base.READY_TIMEOUT)
    fed.phase("SuperExec back", kill.since())
    assert base.node_id_from_log(fed, victim_pod) == node_id, "the SuperNode changed its node id"

    result = fed.run_app()
    base.assert_completed(result, expected)
    assert base.ran_in(result, "flwr-clientapp") == {(pod, "superexec-clientapp") for pod in expected}, result.ran
    new = kept.check(fed)
    assert set(new) == {str(base.run_id(interrupted)), str(base.run_id(result))}, f"runs added: {sorted(new)}"
    assert all(r["status"] == "finished:completed" for r in new.values()), new


# --- 11. rolling update of one pool ---------------------------------------------------------


def _allowed_unavailable(budget: dict[str, Any], replicas: int) -> int:
    """What a PodDisruptionBudget allows unavailable (percentages round up, as the
    disruption controller does: maxUnavailable up, minAvailable up)."""

    def count(v: Any) -> int:
        if isinstance(v, str) and v.endswith("%"):
            return -(-int(v[:-1]) * replicas // 100)
        return int(v)

    spec = budget["spec"]
    if "maxUnavailable" in spec:
        return count(spec["maxUnavailable"])
    return replicas - count(spec["minAvailable"])


class Watch(threading.Thread):
    """Samples, until stopped, the readiness of some pods (as the disruption controller
    counts them: a terminating pod is not healthy) and the SuperLink's view of nodes."""

    def __init__(self, fed: Federation, pods: list[str]):
        super().__init__(name="e2e-watch", daemon=True)
        self.fed, self.pods = fed, pods
        self.samples: list[tuple[float, dict[str, bool], dict[str, bool]]] = []
        self.halt = threading.Event()
        self.start_at = time.monotonic()

    def run(self) -> None:
        while not self.halt.is_set():
            states = self.fed.node_states()
            ready = {p: (q := self.fed.cluster.pods.get(p)) is not None and q.is_ready() for p in self.pods}
            if states is not None:
                self.samples.append((time.monotonic() - self.start_at, ready, states))
            self.halt.wait(WATCH_EVERY)

    def stop(self) -> None:
        self.halt.set()
        self.join(timeout=10)


CONNECTION_FAILED = "Connection attempt failed"  # Flower's retry invoker, on every failed Fleet call


def _incarnation(fed: Federation, pod: str) -> tuple[int, Optional[int], int]:
    """(incarnation, PID 1, failed Fleet calls logged) of a SuperNode container."""
    c = fed.cluster.pod(pod).containers[0]
    return c.incarnation, c.pid1, c.log(100000).count(CONNECTION_FAILED)


def _lag(watch: Watch, pods: list[str], ids: dict[str, str]) -> str:
    """Per replaced pod: when its node came online in the SuperLink relative to the pod
    turning Ready (negative: online first), from the samples."""
    out = []
    for pod in pods:
        down = ready_at = online_at = None
        for t, ready, states in watch.samples:
            if down is None:
                if not ready[pod] and not states.get(ids[pod]):
                    down = t
                continue
            if ready_at is None and ready[pod]:
                ready_at = t
            if online_at is None and states.get(ids[pod]):
                online_at = t
        if ready_at is not None and online_at is not None:
            out.append(f"{pod} {online_at - ready_at:+.1f}s")
    return ", ".join(out)


def scenario_11(fed: Federation, memo: dict) -> None:
    fed.wait_ready(base.READY_TIMEOUT)
    kept = Kept(fed)
    raw = copy.deepcopy(fed.rendered.raw)
    pool = next(p for p in raw["supernodes"]["pools"] if p["name"] == "a")
    pool["nodeConfig"] = {**pool["nodeConfig"], "num-partitions": 2 * pool["replicas"]}
    new = fed.rerender(raw)
    workload = f"{NAME}-supernode-a"
    changed = [(m["kind"], m["metadata"]["name"]) for m in changed_workloads(fed.cluster, new.manifests)]
    assert changed == [("StatefulSet", workload)], f"editing pool a's nodeConfig changed {changed}"
    before = {(m["kind"], m["metadata"]["name"]): m for m in fed.rendered.manifests}
    after = {(m["kind"], m["metadata"]["name"]): m for m in new.manifests}
    moved = sorted(k for k in before.keys() | after.keys() if k not in changed and before.get(k) != after.get(k))
    assert not moved, f"other objects changed too (the state keeps keys and certificates): {moved}"
    budget = next(m for m in new.manifests if m["kind"] == "PodDisruptionBudget" and m["metadata"]["name"] == workload)
    allowed = _allowed_unavailable(budget, pool["replicas"])

    a_pods = sorted(p.name for p in fed.supernodes_pods if p.workload == workload)
    other_pods = sorted(p.name for p in fed.supernodes_pods if p.workload != workload)
    ids = node_ids(fed, a_pods + other_pods)
    # The other pools' SuperNodes: same process, no failed Fleet call, online throughout.
    incarnations = {p: _incarnation(fed, p) for p in other_pods}
    steps: list[str] = []
    watch = Watch(fed, a_pods)
    watch.start()
    try:
        began = time.monotonic()
        replaced = rolling_update(
            fed.cluster, new.manifests, ROLLOUT_TIMEOUT, lambda e: steps.append(f"{time.monotonic() - began:.1f}s {e}")
        )
        fed.rendered = new
        fed.wait_ready(base.READY_TIMEOUT)
        fed.phase("rollout and every node online", time.monotonic() - began)
    finally:
        watch.stop()
    assert replaced == sorted(a_pods, reverse=True), f"replaced {replaced}, expected every pod of pool a, highest first"
    assert watch.samples, "no sample of the SuperLink's state during the rollout"

    for t, ready, states in watch.samples:
        for pod in other_pods:
            assert states.get(ids[pod]), f"{pod} (node {ids[pod]}) offline at {t:.1f}s of the rollout: {steps}"
        down = sorted(p for p in a_pods if not ready[p])
        assert len(down) <= allowed, f"{down} unavailable at {t:.1f}s; the PDB allows {allowed}: {steps}"
        offline = sorted(p for p in a_pods if not states.get(ids[p]))
        assert len(offline) <= allowed, (
            f"{offline} offline in the SuperLink at {t:.1f}s; the PDB allows {allowed} unavailable: {steps}"
        )
    for pod, before in incarnations.items():
        after = _incarnation(fed, pod)
        assert after[:2] == before[:2], f"{pod} was restarted during the rollout"
        assert after[2] == before[2], f"{pod} lost its connection during the rollout ({CONNECTION_FAILED!r} logged)"
    assert node_ids(fed, a_pods + other_pods) == ids, "a replaced SuperNode came back as another node"
    fed.phase(f"{len(watch.samples)} samples, steps: " + "; ".join(steps), 0)
    fed.phase("online vs Ready " + _lag(watch, a_pods, ids), 0)

    expected = base.expected_clients(new.raw)
    assert all(expected[p][0] == 2 * pool["replicas"] for p in a_pods), expected
    result = fed.run_app()
    base.assert_completed(result, expected)
    new_runs = kept.check(fed)
    assert list(new_runs) == [str(base.run_id(result))], f"runs added: {sorted(new_runs)}"
