"""The operator README's nodeConfig examples: the `--node-config` arg and the env its
placeholders need, expanding to the README's per-pod values; and its commented-out
podTemplate nodeSelector lines, uncommented, reaching the pods."""

from __future__ import annotations

import pytest

from flower_federation.builders import pods
from tests.support.manifests import arg_after, container, index, pod_spec
from tests.support.operator_examples import BY_ID, from_cr, pool_workload
from tests.support.operator_readme import DAEMONSET, MULTIPOOLS
from tests.support.render import core_objects
from tests.support.schema import validate

# --- nodeConfig ------------------------------------------------------------------------------


INDEX_ENV = {
    "name": "FLOWER_POD_INDEX",
    "valueFrom": {"fieldRef": {"fieldPath": "metadata.labels['apps.kubernetes.io/pod-index']"}},
}
NODE_ENV = {"name": "FLOWER_NODE_NAME", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}}
PARTITIONED = 'name="client_default_$(FLOWER_POD_INDEX)" num-partitions=4 partition-id=$(FLOWER_POD_INDEX)'
BY_NODE = 'name="client_$(FLOWER_NODE_NAME)" node-id="$(FLOWER_NODE_NAME)" pool="edge"'


TELEMETRY_OFF = pods.telemetry_env(False)


@pytest.mark.parametrize(
    "example,pool,node_config,env",
    [
        ("examples-nodeconfig", "default", PARTITIONED, [INDEX_ENV]),
        ("nodeconfig-partitioned-training", "default", PARTITIONED, [INDEX_ENV]),
        ("examples-nodeconfig-daemonset", "edge", BY_NODE, [NODE_ENV]),
        ("nodeconfig-edge-federation", "edge", BY_NODE, [NODE_ENV]),
        # YAML types are kept: "32" is a string, unlike in the operator.
        ("nodeconfig-static", "default", 'batch-size="32" dataset="cifar10" learning-rate="0.01"', []),
    ],
)
def test_node_config_arg_and_env(example: str, pool: str, node_config: str, env: list[dict]):
    ex = BY_ID[example]
    c = container(pool_workload(index(core_objects(ex.config)), ex, pool), "supernode")
    assert arg_after(c["args"], "--node-config") == node_config
    assert c.get("env", []) == TELEMETRY_OFF + env  # telemetry off (tests/test_telemetry.py), then the node's


def test_node_config_expands_to_the_readme_per_pod_values():
    # Kubernetes expands $(FLOWER_POD_INDEX) to the ordinal; the result is the README's list.
    ex = BY_ID["nodeconfig-partitioned-training"]
    arg = arg_after(
        container(pool_workload(index(core_objects(ex.config)), ex, "default"), "supernode")["args"], "--node-config"
    )
    readme = [
        """name="client_default_0" num-partitions=4 partition-id=0""",
        """name="client_default_1" num-partitions=4 partition-id=1""",
        """name="client_default_2" num-partitions=4 partition-id=2""",
        """name="client_default_3" num-partitions=4 partition-id=3""",
    ]
    assert [arg.replace("$(FLOWER_POD_INDEX)", str(k)) for k in range(4)] == readme


@pytest.mark.parametrize("example", ["quick-start", "gpu-mixed-clusters", "examples-daemonset-process"])
def test_no_node_config_no_flag(example: str):
    ex = BY_ID[example]
    objs = index(core_objects(ex.config))
    for pool in ex.pools:
        assert "--node-config" not in container(pool_workload(objs, ex, pool), "supernode")["args"]


# --- podTemplate nodeSelector (the README's commented-out lines, uncommented) ---------------


def uncommented(text: str) -> str:
    """The README example with its `# podTemplate:` block turned on."""
    lines = []
    for line in text.splitlines():
        stripped = line.lstrip()
        if stripped.startswith("# ") and any(
            k in stripped for k in ("podTemplate:", "spec:", "nodeSelector:", "flower.")
        ):
            indent = line[: len(line) - len(stripped)]
            line = indent + stripped[2:]
        lines.append(line)
    return "\n".join(lines)


@pytest.mark.parametrize(
    "text,workloads_and_selectors",
    [
        (DAEMONSET, {("DaemonSet", "federation-daemonset-supernode-default"): {"flower.dev/role": "client"}}),
        (
            MULTIPOOLS,
            {
                ("DaemonSet", "federation-multipools-supernode-pool-a"): {"flower.ai/pool": "a"},
                ("DaemonSet", "federation-multipools-supernode-pool-b"): {"flower.ai/pool": "b"},
            },
        ),
    ],
    ids=["daemonset", "multipools"],
)
def test_node_selector_reaches_the_pod(text: str, workloads_and_selectors: dict):
    config = from_cr(uncommented(text))
    assert all("podTemplate" in p for p in config["supernodes"]["pools"])
    objs = index(core_objects(config))
    for key, selector in workloads_and_selectors.items():
        assert pod_spec(objs[key])["nodeSelector"] == selector
        validate(objs[key])
    # The SuperLink is not scheduled by a pool's template.
    assert "nodeSelector" not in pod_spec(objs[("StatefulSet", f"{config['name']}-superlink")])
