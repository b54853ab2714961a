"""PodDisruptionBudgets: one per pool, covering exactly that pool's SuperNodes,
`maxUnavailable: 1` unless configured, and refused percentages above 100%; and the
pools' `minReadySeconds`, which keeps a rolling update within that budget in Flower's
terms too (e2e scenario 11 shows it with real SuperNodes)."""

from __future__ import annotations

import pytest

from flower_federation.config.errors import ConfigError
from flower_federation.plan import load_plan
from tests.support.manifests import by_kind, get
from tests.support.netpol import pod_groups, selects
from tests.support.render import core_objects
from tests.support.security_matrix import NAME, STACK_IDS, security_objects, security_plan
from tests.support.stacks import GRPC_ERA, base


@pytest.mark.parametrize("sid", STACK_IDS)
def test_one_disruption_budget_per_pool(sid):
    plan, objects = security_plan(sid), security_objects(sid)
    kind = "DaemonSet" if plan.spec.mode == "DaemonSet" else "StatefulSet"
    pdbs = by_kind(objects, "PodDisruptionBudget")
    assert {p["metadata"]["name"] for p in pdbs} == {f"{NAME}-supernode-alpha", f"{NAME}-supernode-beta"}
    groups = pod_groups(objects)
    for pdb in pdbs:
        workload = get(objects, kind, pdb["metadata"]["name"])
        assert pdb["spec"]["selector"] == workload["spec"]["selector"]
        assert pdb["spec"]["maxUnavailable"] == 1 and "minAvailable" not in pdb["spec"]
        # A rolling update replaces the next SuperNode only 10 s after one is Ready.
        assert workload["spec"]["minReadySeconds"] == 10
        # It covers exactly that pool's SuperNodes (not its SuperExecs).
        covered = [gid for gid, labels in groups.items() if selects(pdb["spec"]["selector"], labels)]
        assert covered == [f"{kind}/{pdb['metadata']['name']}"]


def test_disruption_budget_settings():
    raw = base(GRPC_ERA)
    raw["supernodes"]["pools"][0]["disruptionBudget"] = {"minAvailable": "50%"}
    raw["supernodes"]["pools"][1]["disruptionBudget"] = {"maxUnavailable": "25%"}
    raw["supernodes"]["pools"].append({"name": "gamma", "replicas": 4, "disruptionBudget": {"minAvailable": 3}})
    raw["supernodes"]["pools"].append({"name": "delta", "replicas": 1, "disruptionBudget": {"enabled": False}})
    objects = core_objects(raw)
    specs = {
        p["metadata"]["name"]: {k: v for k, v in p["spec"].items() if k != "selector"}
        for p in by_kind(objects, "PodDisruptionBudget")
    }
    assert specs == {
        f"{NAME}-supernode-alpha": {"minAvailable": "50%"},
        f"{NAME}-supernode-beta": {"maxUnavailable": "25%"},
        f"{NAME}-supernode-gamma": {"minAvailable": 3},
    }
    assert get(objects, "StatefulSet", f"{NAME}-supernode-delta")


def test_disruption_budget_percentages_above_100_are_refused():
    """The API server refuses a PodDisruptionBudget whose minAvailable/maxUnavailable is
    a percentage above 100% (IsNotMoreThan100Percent); validation should say so first."""
    raw = base(GRPC_ERA)
    raw["supernodes"]["pools"][0]["disruptionBudget"] = {"maxUnavailable": "150%"}
    with pytest.raises(ConfigError) as err:
        load_plan(raw, "dev")
    assert [p.path for p in err.value.problems] == ["federation.supernodes.pools[0].disruptionBudget.maxUnavailable"]


def test_min_ready_seconds_settings():
    """Per pool, on its StatefulSet or DaemonSet only (never the SuperLink's or a
    distributed SuperExec's); 0 leaves the field out (Kubernetes' default)."""
    raw = base(GRPC_ERA)
    raw["supernodes"]["pools"][0]["minReadySeconds"] = 0
    raw["supernodes"]["pools"][1]["minReadySeconds"] = 45
    objects = core_objects(raw)
    spec = {s["metadata"]["name"]: s["spec"].get("minReadySeconds") for s in by_kind(objects, "StatefulSet")}
    assert spec == {f"{NAME}-superlink": None, f"{NAME}-supernode-alpha": None, f"{NAME}-supernode-beta": 45}


@pytest.mark.parametrize("value", [-1, "10", 1.5, True])
def test_min_ready_seconds_must_be_a_count(value):
    raw = base(GRPC_ERA)
    raw["supernodes"]["pools"][1]["minReadySeconds"] = value
    with pytest.raises(ConfigError) as err:
        load_plan(raw, "dev")
    assert [p.path for p in err.value.problems] == ["federation.supernodes.pools[1].minReadySeconds"]
    assert "greater than or equal to 0" in str(err.value) or "valid integer" in str(err.value)
