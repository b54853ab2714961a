"""The e2e scenarios of the single-cluster federations and the helpers every scenario
module shares (faults.py, upgrade.py and rotation.py use them too); lanes.py runs them.

Federations and their scenarios (test_e2e.py reports each scenario as one test):

- `subprocess`: TLS, node authentication, subprocess isolation, pools a (3 replicas,
  partition-id = ordinal, num-partitions = replicas) and b (1 replica).
  1. every SuperNode registers (the exported register script, real `flwr`) and shows
     online under the node id its own key got; `flwr run` of the numpy FedAvg app (two
     rounds) through the exported connection config completes; every round has every
     pod, each with the partition-id its ordinal gives; the ServerApp ran in the
     SuperLink's container and the ClientApps in the SuperNodes' containers, each
     container staying under the memory limit it was rendered with (its role's default).
     Then the NetworkPolicy controls (netpol_controls.py): an intruder pod cannot reach
     the SuperLink's Fleet or Control port or a SuperNode's ClientAppIo/Runtime port, a
     SuperNode or the SuperLink cannot reach the outside world; a SuperNode reaches
     Fleet, the CLI's pod Control, the intruder the outside world.
  3. the SuperLink pod is deleted (its process killed) and recreated on the same
     claim: the earlier runs and the registered nodes are still listed, the SuperNodes
     reconnect without registering again, and a new run completes.
  4. SuperNode a-1 is killed while its ClientApp trains: the run still finishes with
     the other pods (its round ends once they replied: the app's round-quorum), the
     harness restarts the container, it comes back online under the same node id, and
     the next run has all four pods again.
  11. a rolling update of pool a; 8. the SuperLink killed mid-run (faults.py).
- `process`: the same stack with process isolation (SuperExec sidecars), pools a (2) and b (1).
  2. the run completes, and ServerApp/ClientApps ran in the SuperExec containers, not
     in the SuperLink/SuperNode containers; every container under its memory limit.
  10. a ClientApp SuperExec killed mid-run; 12. a 60 s network partition (faults.py).
- `distributed`: process isolation with the SuperExecs in workloads of their own
  (`superexecPlacement: distributed`), one SuperNode: the policies between pods that
  only this placement has (SuperExec -> SuperLink ServerAppIo/Runtime API, SuperExec ->
  its SuperNode's ClientAppIo/Runtime API, bound to every address) carry a real run.
  2b. the run completes with the apps in the SuperExec pods, each container under its
     memory limit; an intruder cannot reach
     either API, the SuperLink not the SuperNode's, the SuperExec not the outside world;
     each SuperExec reaches its API. HTTP era: from the SuperExec's namespace, the
     SuperNode's Runtime API refuses plaintext and a client verifying with another CA,
     and serves one verifying with the SuperExec's CA (runtime_tls.py).
- `negative`: one SuperNode whose pod trusts another deployment's CA (its CA volume
  points at a Secret holding that CA).
  5. the harness reports the federation not ready (SuperLink Ready, no SuperNode
     online, the SuperNode's log shows the certificate verification failure): the suite
     can fail.

Every NetworkPolicy of the render is enforced in every pod (harness/enforce.py), so
every scenario also shows that the policies let through what Flower needs.

Waits are bounded everywhere (see the constants). What real Flower does that a test
must not hide (a crash the kubelet restarts) is kept as an incident and printed in the
summary. Every supported version must pass: nothing is reported as an expected failure.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Optional

from flower_federation.kube.quantity import parse_quantity
from tests.e2e import netpol_controls, runtime_tls
from tests.e2e.harness import NotReady
from tests.e2e.kills import KillWhileTraining
from tests.e2e.rendering import NAME, config, render
from tests.e2e.runs import RunResult
from tests.e2e.stack import Federation

READY_TIMEOUT = 150  # a federation start on a loaded 2-core machine takes 20-60 s
NEGATIVE_TIMEOUT = 35  # after registration, a healthy SuperNode is online in ~5-20 s


@dataclass
class Outcome:
    scenario: str
    status: str = "pending"  # passed / failed
    seconds: float = 0.0
    error: str = ""
    incidents: list[str] = field(default_factory=list)
    phases: list[str] = field(default_factory=list)


# --- helpers ---------------------------------------------------------------------------


def expected_clients(raw: dict[str, Any]) -> dict[str, list[int]]:
    """{pod name: [num-partitions, partition-id]} as the config means it: `{index}` is
    the pod's ordinal, `{replicas}` the pool's replicas (docs/config-reference.md, nodeConfig)."""
    out = {}
    for pool in raw["supernodes"]["pools"]:
        for k in range(pool["replicas"]):

            def value(v: Any, k: int = k, pool: dict[str, Any] = pool) -> int:
                return k if v == "{index}" else pool["replicas"] if v == "{replicas}" else int(v)

            nc = pool["nodeConfig"]
            out[f"{raw['name']}-supernode-{pool['name']}-{k}"] = [
                value(nc["num-partitions"]),
                value(nc["partition-id"]),
            ]
    return out


def run_id(result: RunResult) -> Optional[str]:
    m = re.search(r"run_id `(\d+)`|started run (\d+)", result.output)
    return (m.group(1) or m.group(2)) if m else None


def node_id_from_log(fed: Federation, pod_name: str) -> Optional[str]:
    """The node id the SuperNode's latest incarnation logged."""
    ids = re.findall(r"SuperNode ID: (\d+)", fed.cluster.pod(pod_name).containers[0].log(100000))
    return ids[-1] if ids else None


def quorum(pods: Any) -> str:
    """The app's `round-quorum`: the pods whose replies end a round (the survivors of a
    fault), so a test waits for exactly those and not for a round timeout to expire."""
    return ",".join(sorted(pods))


def assert_completed(result: RunResult, expected: dict[str, list[int]], rounds: Optional[int] = None) -> None:
    """The run finished with `rounds` rounds (default: the run's own num-server-rounds), each with `expected`."""
    rounds = result.planned_rounds if rounds is None else rounds
    tail = result.output[-3000:]
    assert result.returncode == 0, f"flwr run exited {result.returncode}:\n{tail}"
    assert result.done, f"the ServerApp did not finish ({result.summary()}):\n{tail}"
    assert len(result.rounds) == rounds, f"{len(result.rounds)} rounds, expected {rounds}:\n{tail}"
    for i, clients in enumerate(result.rounds, 1):
        assert clients == expected, f"round {i}: clients {clients}, expected {expected}"


def assert_listed(fed: Federation, rid: Optional[str], status: str = "finished:completed") -> dict[str, str]:
    runs = {str(r["run-id"]): r["status"] for r in fed.runs()}
    assert rid is not None and rid in runs, f"run {rid} not in `flwr list`: {runs}"
    assert runs[rid] == status, f"run {rid} is {runs[rid]}, expected {status}"
    return runs


def ran_in(result: RunResult, program: str) -> set[tuple[str, str]]:
    return {(pod, container) for pod, container, prog in result.ran if prog == program}


def assert_within_memory_limits(fed: Federation, result: RunResult) -> None:
    """Every container, while the app ran, stayed under the memory limit it was rendered
    with (the role defaults of docs/what-it-creates.md, "Resources"): the sum of its processes' RSS at the
    peak sample, which is above what its cgroup would be charged."""
    assert {(pod, c) for pod, c, _ in result.ran} <= set(result.peak_rss), "a container that ran an app was not sampled"
    worst: dict[str, tuple[int, str]] = {}
    for (pod, name), peak in sorted(result.peak_rss.items()):
        limit = fed.cluster.pod(pod).container(name).spec["resources"]["limits"]["memory"]
        assert peak < parse_quantity(limit), f"{pod}/{name} held {peak >> 20} MiB, over its {limit} memory limit"
        worst[name] = max(worst.get(name, (0, limit)), (peak, limit))
    fed.phases.append("peak RSS " + ", ".join(f"{n} {p >> 20}Mi of {lim}" for n, (p, lim) in sorted(worst.items())))


# --- scenarios --------------------------------------------------------------------------


def scenario_1(fed: Federation, memo: dict) -> None:
    fed.wait_ready(READY_TIMEOUT)
    expected = expected_clients(fed.rendered.raw)
    nodes = fed.supernodes()
    assert len(nodes) == len(expected), f"{len(nodes)} nodes listed, expected {len(expected)}: {nodes}"
    assert all(n["status"] == "online" for n in nodes), nodes
    ids = {pod: node_id_from_log(fed, pod) for pod in expected}
    listed = {str(n["node-id"]) for n in nodes}
    assert set(ids.values()) == listed, f"SuperNode ids in the pods' logs {ids} vs listed {listed}"

    result = fed.run_app({"num-server-rounds": 2})  # the one multi-round run of a federation's own
    assert_completed(result, expected, rounds=2)
    assert ran_in(result, "flwr-serverapp") == {(fed.superlink.name, "superlink")}, result.ran
    assert ran_in(result, "flwr-clientapp") == {(pod, "supernode") for pod in expected}, result.ran
    assert_within_memory_limits(fed, result)
    rid = run_id(result)
    memo["runs"] = assert_listed(fed, rid)
    memo["nodes"] = ids
    fed.phases.append(netpol_controls.superlink_and_egress(fed))


def scenario_3(fed: Federation, memo: dict) -> None:
    fed.wait_ready(READY_TIMEOUT)
    expected = expected_clients(fed.rendered.raw)
    before_runs = {str(r["run-id"]): r["status"] for r in fed.runs()}
    if not before_runs:  # scenario 1 failed before its run: make one to look for later
        assert_completed(fed.run_app(), expected)
        before_runs = {str(r["run-id"]): r["status"] for r in fed.runs()}
    before_nodes = sorted(str(n["node-id"]) for n in fed.supernodes())
    registrations = fed.register_runs

    pod = fed.superlink
    fed.cluster.delete_pod(pod)
    assert not pod.containers[0].running
    t = time.monotonic()
    fed.cluster.recreate_pod(pod)
    fed.cluster.wait_pods_ready([pod], READY_TIMEOUT)
    fed.phase("SuperLink Ready again", time.monotonic() - t)

    after_runs = {str(r["run-id"]): r["status"] for r in fed.runs()}
    for rid, status in before_runs.items():
        assert after_runs.get(rid) == status, f"run {rid} was {status}, after the restart: {after_runs.get(rid)}"
    assert sorted(str(n["node-id"]) for n in fed.supernodes()) == before_nodes, "registered nodes changed"
    fed.wait_ready(READY_TIMEOUT)  # the SuperNodes reconnect by themselves
    assert fed.register_runs == registrations, "the nodes had to be registered again"
    assert sorted(str(n["node-id"]) for n in fed.online()) == before_nodes

    result = fed.run_app()
    assert_completed(result, expected)
    rid = run_id(result)
    assert rid not in before_runs
    assert_listed(fed, rid)


def scenario_4(fed: Federation, memo: dict) -> None:
    fed.wait_ready(READY_TIMEOUT)
    expected = expected_clients(fed.rendered.raw)
    victim_pod = f"{NAME}-supernode-a-1"
    node_id = node_id_from_log(fed, victim_pod)
    kill = KillWhileTraining(fed, fed.cluster.pod(victim_pod).container("supernode"), {victim_pod})

    # The run does not hang on the lost node: it finishes with the others, its round
    # ending once they replied (round-quorum; the round timeout only bounds a hang).
    survivors = {pod: v for pod, v in expected.items() if pod != victim_pod}
    interrupted = fed.run_app(
        {"num-server-rounds": 1, "train-seconds": 3.0, "round-quorum": quorum(survivors)}, during=kill
    )
    assert interrupted.during_error is None, interrupted.during_error
    assert_completed(interrupted, survivors, rounds=1)

    kill.wait_restarted()
    fed.wait_ready(READY_TIMEOUT)  # rejoined: every SuperNode online again
    assert node_id_from_log(fed, victim_pod) == node_id, "the restarted SuperNode came back as another node"
    fed.phase("killed SuperNode back online", kill.since())

    result = fed.run_app()
    assert_completed(result, expected)
    assert_listed(fed, run_id(result))


def scenario_2(fed: Federation, memo: dict) -> None:
    fed.wait_ready(READY_TIMEOUT)
    expected = expected_clients(fed.rendered.raw)
    result = fed.run_app()
    assert_completed(result, expected)
    assert ran_in(result, "flwr-serverapp") == {(fed.superlink.name, "superexec-serverapp")}, result.ran
    assert ran_in(result, "flwr-clientapp") == {(pod, "superexec-clientapp") for pod in expected}, result.ran
    assert_within_memory_limits(fed, result)
    assert_listed(fed, run_id(result))


def distributed_config(version: str) -> dict[str, Any]:
    raw = config(version, isolation="process", pools=[("a", 1)])
    raw["superexecPlacement"] = "distributed"
    return raw


def scenario_2b(fed: Federation, memo: dict) -> None:
    fed.wait_ready(READY_TIMEOUT)
    # A ClientApp runs in the SuperExec pod that serves SuperNode k (its host name), with
    # that SuperNode's node config.
    expected = {pod.replace("-supernode-", "-superexec-"): v for pod, v in expected_clients(fed.rendered.raw).items()}
    result = fed.run_app()
    assert_completed(result, expected)
    (serverapp,) = fed.pods("superexec-serverapp")
    assert ran_in(result, "flwr-serverapp") == {(serverapp.name, "superexec-serverapp")}, result.ran
    clientapps = {(p.name, "superexec-clientapp") for p in fed.pods("superexec-clientapp")}
    assert ran_in(result, "flwr-clientapp") == clientapps, result.ran
    assert_within_memory_limits(fed, result)
    assert_listed(fed, run_id(result))
    fed.phases.append(netpol_controls.distributed_apis(fed))
    if not fed.version.startswith("1.2"):  # the HTTP era serves the hop over TLS; the gRPC era cannot
        fed.phases.append(runtime_tls.assert_runtime_api_is_tls(fed))


TLS_FAILURE = re.compile(
    r"CERTIFICATE_VERIFY_FAILED|certificate verify failed|unable to get local issuer|"
    r"Handshake failed|SSL",
    re.I,
)


def scenario_5(fed: Federation, memo: dict) -> None:
    try:
        fed.wait_ready(NEGATIVE_TIMEOUT)
    except NotReady as exc:
        reason = str(exc)
    else:
        raise AssertionError("a SuperNode trusting the wrong CA was reported ready: the harness cannot fail")
    assert fed.superlink.is_ready(), "the SuperLink itself should be fine:\n" + fed.superlink.describe()
    assert fed.online() == [], "a SuperNode is online although it trusts another CA"
    logs = "\n".join(p.containers[0].log(100000) for p in fed.supernodes_pods)
    assert TLS_FAILURE.search(logs), f"no TLS verification failure in the SuperNode logs:\n{logs[-3000:]}"
    memo["reason"] = reason.splitlines()[0]


def wrong_ca(version: str) -> Callable[[list[dict]], None]:
    """Point the SuperNodes' CA volume at a Secret holding another deployment's CA."""
    other = render(config(version, pools=[("a", 1)])).outputs["caCertificate"]

    def tamper(manifests: list[dict]) -> None:
        ca_secret = f"{NAME}-ca"
        manifests.append(
            {
                "apiVersion": "v1",
                "kind": "Secret",
                "type": "Opaque",
                "metadata": {"name": f"{NAME}-wrong-ca", "namespace": manifests[0]["metadata"].get("namespace")},
                "stringData": {"ca.crt": other},
            }
        )
        changed = 0
        for m in manifests:
            if m["kind"] == "StatefulSet" and "supernode" in m["metadata"]["name"]:
                for v in m["spec"]["template"]["spec"]["volumes"]:
                    if v.get("secret", {}).get("secretName") == ca_secret:
                        v["secret"]["secretName"] = f"{NAME}-wrong-ca"
                        changed += 1
        assert changed, "no SuperNode CA volume to break"

    return tamper
