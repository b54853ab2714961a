"""Every YAML example of the flower-operator README as a config of ours, and what the
operator would create for it.

Each example is a SPEC: the `spec:` of a `Federation` CR, pasted under our config key
with `name: <metadata.name>`, must give the objects the operator would create, except
for our deliberate differences (SuperLink as a StatefulSet with a `state` PVC, TLS on by
default, gRPC-era flags for Flower 1.25.0, namespace `flower`, restricted pods).

Full CRs are pasted verbatim; README fragments (a `pools:` list, a `supernodes:` or
`superlink:` block, a `nodeConfig:` map) are pasted verbatim into a minimal federation.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any, Optional

import pytest
import yaml

from flower_federation.builders.pods import merge_resources
from tests.support.defaults import PRESETS, role_preset
from tests.support.operator_fragments import (
    GPU_AMD,
    GPU_MIXED,
    GPU_MOUNT_ALL,
    GPU_NVIDIA,
    NODECONFIG_STATIC,
    POOL_CONFIGURATION,
    RESOURCES_MULTI_POOL,
    RESOURCES_POOL,
    RESOURCES_SUPERLINK,
    RESOURCES_WITH_GPU,
)
from tests.support.operator_readme import (
    DAEMONSET,
    EDGE_FEDERATION,
    EXAMPLES_DAEMONSET_PROCESS,
    EXAMPLES_NODECONFIG,
    EXAMPLES_NODECONFIG_DAEMONSET,
    EXAMPLES_STATEFULSET_SUBPROCESS,
    MULTIPOOLS,
    PARTITIONED_TRAINING,
    PROCESS,
    QUICK_START,
    STATEFULSET,
    SUBPROCESS,
)

NAMESPACE = "flower"


# --- README examples as configs --------------------------------------------------------


# Two README examples run `my-app/client:latest`, which flower-images-pinned (mandatory) fails and `validate` refuses
# (tests/test_import_operator.py shows the refusal); the examples here run it pinned, as the refusal asks.
UNPINNED_APP_IMAGE = "my-app/client:latest"
# Pinned by a digest: a version tag on an app image would be read as its Flower version.
PINNED_APP_IMAGE = UNPINNED_APP_IMAGE + "@sha256:" + "0" * 64


def pinned(text: str) -> str:
    return text.replace(UNPINNED_APP_IMAGE, PINNED_APP_IMAGE)


def from_cr(text: str) -> dict[str, Any]:
    """A Federation CR -> our config: its spec plus `name: <metadata.name>`."""
    cr = yaml.safe_load(text)
    assert cr["kind"] == "Federation"
    return {"name": cr["metadata"]["name"], **cr["spec"]}


def framed(
    name: str,
    fragment: str,
    *,
    mode: str = "StatefulSet",
    isolation: str = "subprocess",
    superlink: Optional[dict] = None,
) -> dict[str, Any]:
    """A README fragment pasted into the smallest federation around it. The fragment is
    a `superlink:`, `supernodes:` or `pools:` block; `superlink` adds fields the README
    fragment leaves out but its isolation mode requires."""
    config: dict[str, Any] = {
        "name": name,
        "mode": mode,
        "isolationMode": isolation,
        "superlink": {"image": "flwr/superlink:1.25.0", **(superlink or {})},
        "supernodes": {"image": "flwr/supernode:1.25.0"},
    }
    parsed = yaml.safe_load(fragment)
    if "pools" in parsed:
        config["supernodes"]["pools"] = parsed["pools"]
    if "supernodes" in parsed:
        config["supernodes"] = parsed["supernodes"]
    if "superlink" in parsed:
        config["superlink"] = {**parsed["superlink"], **(superlink or {})}
    return config


def resources_federation(isolation: str) -> dict[str, Any]:
    """examples/federation-resources.yaml is described, not shown: the README's SuperLink
    and pool resource fragments together, in process or subprocess mode."""
    process = isolation == "process"
    config = framed(
        f"resources-{isolation}",
        RESOURCES_SUPERLINK,
        isolation=isolation,
        superlink={"superexecImage": "flwr/superexec:1.25.0"} if process else None,
    )
    config["supernodes"] = yaml.safe_load(RESOURCES_POOL)["supernodes"]
    if process:  # required by the CRD in process mode; the fragment shows resources only
        config["supernodes"]["pools"][0]["images"] = {"superexecClientApp": "flwr/superexec:1.25.0"}
    else:  # the fragment's superexecResources are for process mode only
        del config["superlink"]["superexecResources"]
    return config


def static_nodeconfig_federation() -> dict[str, Any]:
    config = framed("nodeconfig-static", "pools: [{name: default, replicas: 2}]")
    config["supernodes"]["pools"][0].update(yaml.safe_load(NODECONFIG_STATIC))
    return config


# --- What the operator would create ----------------------------------------------------


@dataclass(frozen=True)
class PoolExpect:
    replicas: Optional[int]  # None: a DaemonSet pool
    image: str
    clientapp_image: Optional[str] = None
    gpu: Optional[tuple[str, int]] = None  # (resourceName, count) in the GPU container's limits


@dataclass(frozen=True)
class Example:
    id: str
    config: dict[str, Any] = field(hash=False)
    isolation: str
    superlink_image: str
    pools: dict[str, PoolExpect] = field(hash=False)
    superexec_image: Optional[str] = None

    @property
    def name(self) -> str:
        return self.config["name"]

    @property
    def process(self) -> bool:
        return self.isolation == "process"

    def __str__(self) -> str:
        return self.id


SL = "flwr/superlink:1.25.0"
SN = "flwr/supernode:1.25.0"
SX = "flwr/superexec:1.25.0"
NVIDIA = ("nvidia.com/gpu", 1)
AMD = ("amd.com/gpu", 1)

EXAMPLES = [
    Example("quick-start", from_cr(QUICK_START), "subprocess", SL, {"default": PoolExpect(2, SN)}),
    Example("daemonset", from_cr(DAEMONSET), "subprocess", SL, {"default": PoolExpect(None, SN)}),
    Example("statefulset", from_cr(STATEFULSET), "subprocess", SL, {"default": PoolExpect(2, SN)}),
    Example("process", from_cr(PROCESS), "process", SL, {"default": PoolExpect(2, SN, SX)}, SX),
    Example(
        "subprocess",
        from_cr(SUBPROCESS),
        "subprocess",
        "my-registry/superlink-with-deps:1.25.0",
        {"default": PoolExpect(2, "my-registry/supernode-with-deps:1.25.0")},
    ),
    Example(
        "multipools",
        from_cr(MULTIPOOLS),
        "subprocess",
        SL,
        {"pool-a": PoolExpect(None, SN), "pool-b": PoolExpect(None, "flwr/supernode:1.24.0")},
    ),
    Example(
        "examples-daemonset-process",
        from_cr(EXAMPLES_DAEMONSET_PROCESS),
        "process",
        SL,
        {"default": PoolExpect(None, SN, SX)},
        SX,
    ),
    Example(
        "examples-statefulset-subprocess",
        from_cr(EXAMPLES_STATEFULSET_SUBPROCESS),
        "subprocess",
        SL,
        {"default": PoolExpect(2, SN)},
    ),
    Example("examples-nodeconfig", from_cr(EXAMPLES_NODECONFIG), "subprocess", SL, {"default": PoolExpect(4, SN)}),
    Example(
        "examples-nodeconfig-daemonset",
        from_cr(EXAMPLES_NODECONFIG_DAEMONSET),
        "subprocess",
        SL,
        {"edge": PoolExpect(None, SN)},
    ),
    Example(
        "nodeconfig-partitioned-training",
        from_cr(pinned(PARTITIONED_TRAINING)),
        "subprocess",
        SL,
        {"default": PoolExpect(4, PINNED_APP_IMAGE)},
    ),
    Example(
        "nodeconfig-edge-federation",
        from_cr(pinned(EDGE_FEDERATION)),
        "subprocess",
        SL,
        {"edge": PoolExpect(None, PINNED_APP_IMAGE)},
    ),
    Example("nodeconfig-static", static_nodeconfig_federation(), "subprocess", SL, {"default": PoolExpect(2, SN)}),
    Example(
        "pool-configuration",
        framed("pool-configuration", POOL_CONFIGURATION),
        "subprocess",
        SL,
        {"cpu-pool": PoolExpect(4, SN), "gpu-pool": PoolExpect(2, "my-registry/supernode-gpu:1.25.0", gpu=NVIDIA)},
    ),
    Example(
        "gpu-nvidia", framed("gpu-nvidia", GPU_NVIDIA), "subprocess", SL, {"nvidia-pool": PoolExpect(2, SN, gpu=NVIDIA)}
    ),
    # The same pool in process mode: the GPU goes to the container running ClientApps.
    Example(
        "gpu-nvidia-process",
        framed(
            "gpu-nvidia-process",
            GPU_NVIDIA.replace("images: {}", "images: {superexecClientApp: flwr/superexec:1.25.0}"),
            isolation="process",
            superlink={"superexecImage": SX},
        ),
        "process",
        SL,
        {"nvidia-pool": PoolExpect(2, SN, SX, gpu=NVIDIA)},
        SX,
    ),
    Example("gpu-amd", framed("gpu-amd", GPU_AMD), "subprocess", SL, {"amd-pool": PoolExpect(2, SN, gpu=AMD)}),
    Example(
        "gpu-mount-all",
        framed("gpu-mount-all", GPU_MOUNT_ALL, mode="DaemonSet"),
        "subprocess",
        SL,
        {"all-gpus": PoolExpect(None, SN)},
    ),
    Example(
        "gpu-mixed-clusters",
        framed("gpu-mixed-clusters", GPU_MIXED),
        "subprocess",
        SL,
        {
            "cpu-only": PoolExpect(4, SN),
            "nvidia-gpus": PoolExpect(2, "my-registry/supernode-nvidia:1.25.0", gpu=NVIDIA),
            "amd-gpus": PoolExpect(2, "my-registry/supernode-amd:1.25.0", gpu=AMD),
        },
    ),
    Example(
        "resources-process", resources_federation("process"), "process", SL, {"default": PoolExpect(3, SN, SX)}, SX
    ),
    Example(
        "resources-subprocess", resources_federation("subprocess"), "subprocess", SL, {"default": PoolExpect(3, SN)}
    ),
    Example(
        "resources-multi-pool",
        framed("resources-multi-pool", RESOURCES_MULTI_POOL),
        "subprocess",
        SL,
        {"cpu-pool": PoolExpect(3, SN), "memory-pool": PoolExpect(2, SN), "gpu-pool": PoolExpect(2, SN, gpu=NVIDIA)},
    ),
    Example(
        "resources-with-gpu",
        framed("resources-with-gpu", RESOURCES_WITH_GPU),
        "subprocess",
        SL,
        {"nvidia-gpu-pool": PoolExpect(2, SN, gpu=NVIDIA)},
    ),
]
BY_ID = {ex.id: ex for ex in EXAMPLES}
each_example = pytest.mark.parametrize("ex", EXAMPLES, ids=str)


# --- lookups in a render -----------------------------------------------------------------


def superlink_sts(objs: dict, ex: Example) -> dict:
    return objs[("StatefulSet", f"{ex.name}-superlink")]


def pool_workload(objs: dict, ex: Example, pool: str) -> dict:
    kind = "StatefulSet" if ex.pools[pool].replicas is not None else "DaemonSet"
    return objs[(kind, f"{ex.name}-supernode-{pool}")]


def default_resources(ex: Example, container: str) -> dict:
    """What a container of the example gets when its config sets no resources: its role's
    preset (the operator sets none; we protect the cluster by default)."""
    return copy.deepcopy(PRESETS[role_preset(container, process_isolation=ex.process, kubernetes_executor=False)])


def with_defaults(resources: Optional[dict], ex: Example, container: str) -> dict:
    """Resources as rendered: the given ones over the container's default preset."""
    return merge_resources(default_resources(ex, container), resources)


def with_gpu(resources: Optional[dict], gpu: Optional[tuple[str, int]]) -> dict:
    out = copy.deepcopy(resources or {})
    if gpu:
        out.setdefault("limits", {})[gpu[0]] = gpu[1]
    return out


def config_pool(ex: Example, pool: str) -> dict:
    return next(p for p in ex.config["supernodes"]["pools"] if p["name"] == pool)


def pool_ids() -> list[tuple[Example, str]]:
    return [(ex, p) for ex in EXAMPLES for p in ex.pools]


each_pool = pytest.mark.parametrize("ex,pool", pool_ids(), ids=[f"{ex.id}/{p}" for ex, p in pool_ids()])
