"""`manifests.render`: the federation rendered once, grouped per cluster with each object's
owner, and the invariants checked before anything is registered. Each invariant has a
negative control: a broken render that it must refuse."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from flower_federation.builders import manifests
from flower_federation.config.derived import cluster_key
from flower_federation.config.errors import ConfigError
from flower_federation.kube.objects import ObjectKey
from flower_federation.plan import load_plan
from tests.support.flower import GRPC_ERA
from tests.support.stacks import base, daemonset_node_keys, security_stacks
from tests.support.tls_provider import new_openssh_key

STACKS = security_stacks()


@pytest.mark.parametrize("stack", sorted(STACKS))
def test_every_object_has_one_owner_and_components_partition_the_render(stack: str) -> None:
    raw = copy.deepcopy(STACKS[stack])
    keys = daemonset_node_keys(new_openssh_key) if raw.get("nodeAuth", {}).get("keySource") == "config" else None
    plan = load_plan(raw, "dev", keys)
    rendered = manifests.render(plan)
    assert [c.name for c in rendered.clusters] == [cluster_key(None)]
    owners = {manifests.FEDERATION, manifests.TLS, manifests.SUPERLINK, manifests.REGISTRATION, manifests.APPIO}
    for pool in plan.spec.supernodes.pools:
        owners |= {
            manifests.pool_owner(pool.name),
            manifests.node_keys_owner(pool.name),
            manifests.appio_owner(pool.name),
        }
    entries = rendered.clusters[0].entries
    assert {e.owner for e in entries} <= owners
    assert sum(len(rendered.owned_by(o)) for o in owners) == len(rendered.objects()) == len(entries)
    # Everything a pool owns is named after it (editing one pool touches only its objects).
    for pool in plan.spec.supernodes.pools:
        for m in rendered.owned_by(manifests.pool_owner(pool.name)) + rendered.owned_by(
            manifests.appio_owner(pool.name)
        ):
            name = m["metadata"]["name"]
            assert name.endswith(f"-{pool.name}") or f"-{pool.name}-" in name, (pool.name, name)


def test_render_is_the_same_each_time_and_builds_nothing_twice() -> None:
    plan = load_plan(base(nodeAuth={"enabled": True}), "dev")
    one, two = manifests.render(plan).objects(), manifests.render(plan).objects()
    assert one == two
    keys = [ObjectKey.of(m) for m in one]
    assert len(keys) == len(set(keys))


def _objects(raw: dict[str, Any] | None = None) -> tuple[Any, list[Any]]:
    plan = load_plan(raw or base(isolation="process", placement="distributed"), "dev")
    return plan, copy.deepcopy(manifests.render(plan).objects())


def test_a_duplicate_object_is_refused() -> None:
    plan, objects = _objects()
    sa = next(m for m in objects if m["kind"] == "ServiceAccount")
    with pytest.raises(
        manifests.InvariantError, match=f"ServiceAccount flower-sec/{sa['metadata']['name']} is rendered 2"
    ):
        manifests.check_invariants(plan, [*objects, sa])


def test_a_workload_whose_selector_misses_its_pods_is_refused() -> None:
    plan, objects = _objects()
    sts = next(m for m in objects if m["kind"] == "StatefulSet")
    sts["spec"]["selector"]["matchLabels"]["app.kubernetes.io/component"] = "elsewhere"
    with pytest.raises(manifests.InvariantError, match="does not select its own pods"):
        manifests.check_invariants(plan, objects)


@pytest.mark.parametrize("kind", ["Service", "PodDisruptionBudget", "NetworkPolicy"])
def test_a_selector_that_selects_no_pod_of_ours_is_refused(kind: str) -> None:
    plan, objects = _objects()
    obj = next(m for m in objects if m["kind"] == kind)
    spec = obj["spec"]
    selector = {
        "Service": lambda: spec["selector"],
        "PodDisruptionBudget": lambda: spec["selector"]["matchLabels"],
        "NetworkPolicy": lambda: spec["podSelector"]["matchLabels"],
    }[kind]()
    selector["flower.flwr.ai/pool"] = "no-such-pool"
    with pytest.raises(manifests.InvariantError, match="selects none of the federation's pods"):
        manifests.check_invariants(plan, objects)


@pytest.mark.parametrize("kind", ["Secret", "ConfigMap"])
def test_a_mounted_secret_or_configmap_that_nobody_provides_is_refused(kind: str) -> None:
    plan, objects = _objects(base(isolation="process", placement="distributed", executor={"type": "kubernetes"}))
    if kind == "Secret":
        objects = [m for m in objects if not (m["kind"] == "Secret" and m["metadata"]["name"].endswith("-ca"))]
        name = "sec-ca"
    else:
        name = next(m["metadata"]["name"] for m in objects if m["kind"] == "ConfigMap")
        objects = [m for m in objects if not (m["kind"] == "ConfigMap" and m["metadata"]["name"] == name)]
    with pytest.raises(manifests.InvariantError, match=f"mounts {kind} {name}, which is neither rendered nor named"):
        manifests.check_invariants(plan, objects)


def test_secrets_named_in_config_are_the_users_to_provide() -> None:
    raw = base(
        tls={
            "source": "existingSecret",
            "existingSecret": "my-tls",
            "trust": {"source": "existingSecret", "existingSecret": "my-ca"},
        },
        supernodes={
            "pools": [
                {
                    "name": "p",
                    "replicas": 1,
                    "volumes": [{"name": "data", "secret": {"secretName": "datasets"}}],
                    "volumeMounts": [{"name": "data", "mountPath": "/data"}],
                }
            ]
        },
    )
    plan = load_plan(raw, "dev")
    kinds = {m["kind"] for m in manifests.render(plan).objects()}
    assert "Secret" not in kinds  # neither my-tls, my-ca nor datasets is ours, and the render is accepted


def test_a_pool_named_serverapp_is_refused_with_distributed_superexec() -> None:
    raw = base(isolation="process", placement="distributed")
    raw["supernodes"]["pools"][1]["name"] = "serverapp"
    with pytest.raises(ConfigError, match=r"supernodes\.pools\[1\]\.name: pool name 'serverapp' is taken"):
        load_plan(raw, "dev")
    # With sidecars the name is free: no SuperExec object is named after the pool.
    sidecar = base(isolation="process")
    sidecar["supernodes"]["pools"][1]["name"] = "serverapp"
    assert load_plan(sidecar, "dev").spec.supernodes.pools[1].name == "serverapp"


@pytest.mark.parametrize("ordinal", ["{replicas}", "0{last}", "+{last}", "{last} "])
def test_a_pair_policy_naming_no_pod_of_its_statefulset_is_refused(ordinal: str) -> None:
    """Pair policies select one StatefulSet pod by the controller's pod-name label (`NAME-0` ... `NAME-(n-1)`),
    matched without a labels dict per pod (issue 36): an ordinal past the last pod, or one spelled otherwise
    than the controller does, selects nothing."""
    plan, objects = _objects(base(GRPC_ERA, isolation="process", placement="distributed"))  # the era of pairs
    label = manifests.network_links.POD_NAME_LABEL
    policy = next(
        m for m in objects if m["kind"] == "NetworkPolicy" and label in m["spec"]["podSelector"]["matchLabels"]
    )
    selector = policy["spec"]["podSelector"]["matchLabels"]
    sts = next(
        m for m in objects if m["kind"] == "StatefulSet" and selector[label].startswith(m["metadata"]["name"] + "-")
    )
    name, replicas = sts["metadata"]["name"], sts["spec"]["replicas"]
    selector[label] = f"{name}-{replicas - 1}"
    manifests.check_invariants(plan, objects)  # the last pod: selected
    selector[label] = f"{name}-" + ordinal.format(replicas=replicas, last=replicas - 1)
    with pytest.raises(manifests.InvariantError, match="selects none of the federation's pods"):
        manifests.check_invariants(plan, objects)
