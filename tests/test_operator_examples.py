"""Every YAML example of the flower-operator README (shared/seeds/flower-operator-readme.md)
rendered by flower-federation.

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

import kubernetes_validate
import pytest
import yaml

from components.offline import run_program
from federation import workloads
from federation.pods import merge_resources
from tests.support.generated import without_generated
from federation.errors import ConfigError
from federation.plan import load_plan

STACK = "dev"
NAMESPACE = "flower"
K8S_VERSION = "1.34.0"
CA_FILE = "/etc/flower/ca/ca.crt"
FLOWER_UID = 49999
RESTRICTED_CONTAINER = {
    "allowPrivilegeEscalation": False,
    "capabilities": {"drop": ["ALL"]},
    "readOnlyRootFilesystem": True,
    "runAsNonRoot": True,
    "seccompProfile": {"type": "RuntimeDefault"},
}


# --- README examples -----------------------------------------------------------------

def from_cr(text: str) -> dict[str, Any]:
    """A Federation CR -> our config: its spec plus `name: <metadata.name>`."""
    cr = yaml.safe_load(text)
    assert cr["kind"] == "Federation"
    return {"name": cr["metadata"]["name"], **cr["spec"]}


def framed(name: str, fragment: str, *, mode: str = "StatefulSet", isolation: str = "subprocess",
           superlink: Optional[dict] = None) -> dict[str, Any]:
    """A README fragment pasted into the smallest federation around it. The fragment is
    a `superlink:`, `supernodes:` or `pools:` block; `superlink` adds fields the README
    fragment leaves out but its isolation mode requires."""
    config: dict[str, Any] = {
        "name": name, "mode": mode, "isolationMode": isolation,
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


QUICK_START = """
apiVersion: flwr.exalsius.ai/v1
kind: Federation
metadata:
  name: my-federation
spec:
  mode: StatefulSet
  isolationMode: subprocess

  superlink:
    image: flwr/superlink:1.25.0
    service:
      type: ClusterIP

  supernodes:
    image: flwr/supernode:1.25.0
    pools:
      - name: default
        replicas: 2
"""

DAEMONSET = """
apiVersion: flwr.exalsius.ai/v1
kind: Federation
metadata:
  name: federation-daemonset
spec:
  mode: DaemonSet
  isolationMode: subprocess

  superlink:
    image: flwr/superlink:1.25.0
    resources:
      requests:
        memory: "256Mi"
        cpu: "100m"
      limits:
        memory: "512Mi"
        cpu: "500m"
    service:
      type: ClusterIP

  supernodes:
    image: flwr/supernode:1.25.0
    pools:
      - name: default
        images: {}
        supernodeResources:
          requests:
            memory: "512Mi"
            cpu: "200m"
          limits:
            memory: "1Gi"
            cpu: "1000m"
        # Target specific nodes:
        # podTemplate:
        #   spec:
        #     nodeSelector:
        #       flower.dev/role: client
"""

STATEFULSET = """
apiVersion: flwr.exalsius.ai/v1
kind: Federation
metadata:
  name: federation-statefulset
spec:
  mode: StatefulSet
  isolationMode: subprocess

  superlink:
    image: flwr/superlink:1.25.0
    resources:
      requests:
        memory: "256Mi"
        cpu: "100m"
      limits:
        memory: "512Mi"
        cpu: "500m"
    service:
      type: ClusterIP

  supernodes:
    image: flwr/supernode:1.25.0
    pools:
      - name: default
        replicas: 2  # Required in StatefulSet mode
        images: {}
        supernodeResources:
          requests:
            memory: "512Mi"
            cpu: "200m"
          limits:
            memory: "1Gi"
            cpu: "1000m"
"""

PROCESS = """
apiVersion: flwr.exalsius.ai/v1
kind: Federation
metadata:
  name: federation-process
spec:
  mode: StatefulSet
  isolationMode: process

  superlink:
    image: flwr/superlink:1.25.0
    superexecImage: flwr/superexec:1.25.0  # Required
    service:
      type: ClusterIP

  supernodes:
    image: flwr/supernode:1.25.0
    pools:
      - name: default
        replicas: 2
        images:
          superexecClientApp: flwr/superexec:1.25.0  # Required
"""

SUBPROCESS = """
apiVersion: flwr.exalsius.ai/v1
kind: Federation
metadata:
  name: federation-subprocess
spec:
  mode: StatefulSet
  isolationMode: subprocess

  superlink:
    image: my-registry/superlink-with-deps:1.25.0  # Includes ServerApp deps
    service:
      type: ClusterIP

  supernodes:
    image: my-registry/supernode-with-deps:1.25.0  # Includes ClientApp deps
    pools:
      - name: default
        replicas: 2
        images: {}  # No superexecClientApp
"""

MULTIPOOLS = """
apiVersion: flwr.exalsius.ai/v1
kind: Federation
metadata:
  name: federation-multipools
spec:
  mode: DaemonSet
  isolationMode: subprocess

  superlink:
    image: flwr/superlink:1.25.0
    service:
      type: ClusterIP

  supernodes:
    image: flwr/supernode:1.25.0
    pools:
      - name: pool-a
        images: {}
        # podTemplate:
        #   spec:
        #     nodeSelector:
        #       flower.ai/pool: a

      - name: pool-b
        images:
          supernode: flwr/supernode:1.24.0  # Override with different version
        # podTemplate:
        #   spec:
        #     nodeSelector:
        #       flower.ai/pool: b
"""

EXAMPLES_DAEMONSET_PROCESS = """
apiVersion: flwr.exalsius.ai/v1
kind: Federation
metadata:
  name: federation-daemonset-process
spec:
  mode: DaemonSet
  isolationMode: process

  superlink:
    image: flwr/superlink:1.25.0
    superexecImage: flwr/superexec:1.25.0
    service:
      type: ClusterIP

  supernodes:
    image: flwr/supernode:1.25.0
    pools:
      - name: default
        images:
          superexecClientApp: flwr/superexec:1.25.0
"""

EXAMPLES_STATEFULSET_SUBPROCESS = """
apiVersion: flwr.exalsius.ai/v1
kind: Federation
metadata:
  name: federation-statefulset-subprocess
spec:
  mode: StatefulSet
  isolationMode: subprocess

  superlink:
    image: flwr/superlink:1.25.0
    service:
      type: ClusterIP

  supernodes:
    image: flwr/supernode:1.25.0
    pools:
      - name: default
        replicas: 2
        images: {}
"""

EXAMPLES_NODECONFIG = """
apiVersion: flwr.exalsius.ai/v1
kind: Federation
metadata:
  name: federation-nodeconfig
spec:
  mode: StatefulSet
  isolationMode: subprocess

  superlink:
    image: flwr/superlink:1.25.0

  supernodes:
    image: flwr/supernode:1.25.0
    pools:
      - name: default
        replicas: 4
        images: {}
        nodeConfig:
          partition-id: "{index}"
          num-partitions: "{replicas}"
          name: "client_{pool}_{index}"
"""

EXAMPLES_NODECONFIG_DAEMONSET = """
apiVersion: flwr.exalsius.ai/v1
kind: Federation
metadata:
  name: federation-nodeconfig-daemonset
spec:
  mode: DaemonSet
  isolationMode: subprocess

  superlink:
    image: flwr/superlink:1.25.0

  supernodes:
    image: flwr/supernode:1.25.0
    pools:
      - name: edge
        images: {}
        nodeConfig:
          name: "client_{node}"
          node-id: "{node}"
          pool: "{pool}"
"""

PARTITIONED_TRAINING = """
apiVersion: flwr.exalsius.ai/v1
kind: Federation
metadata:
  name: partitioned-training
spec:
  mode: StatefulSet
  isolationMode: subprocess

  superlink:
    image: flwr/superlink:1.25.0

  supernodes:
    image: my-app/client:latest
    pools:
      - name: default
        replicas: 4
        images: {}
        nodeConfig:
          # Each replica gets a unique partition (0, 1, 2, 3)
          partition-id: "{index}"
          # Total partitions matches replica count (4)
          num-partitions: "{replicas}"
          # Unique client name
          name: "client_{pool}_{index}"
"""

EDGE_FEDERATION = """
apiVersion: flwr.exalsius.ai/v1
kind: Federation
metadata:
  name: edge-federation
spec:
  mode: DaemonSet
  isolationMode: subprocess

  superlink:
    image: flwr/superlink:1.25.0

  supernodes:
    image: my-app/client:latest
    pools:
      - name: edge
        images: {}
        nodeConfig:
          # Use Kubernetes node name for unique identification
          name: "client_{node}"
          node-id: "{node}"
          pool: "{pool}"
"""

# --- README fragments ----------------------------------------------------------------

POOL_CONFIGURATION = """
supernodes:
  image: flwr/supernode:1.25.0  # Default image for all pools
  pools:
    - name: cpu-pool
      replicas: 4  # StatefulSet mode only
      images: {}   # Uses default image
      supernodeResources:
        requests:
          cpu: "1"
          memory: "2Gi"

    - name: gpu-pool
      replicas: 2
      images:
        supernode: my-registry/supernode-gpu:1.25.0  # Docker image with dependencies for the GPU training
      gpu:
        enabled: true
        vendor: nvidia
        resourceName: nvidia.com/gpu
        count: 1 # use one nvidia GPU in the SuperNode pod
"""

GPU_NVIDIA = """
pools:
  - name: nvidia-pool
    replicas: 2
    images: {}
    gpu:
      enabled: true
      vendor: nvidia
      resourceName: nvidia.com/gpu
      count: 1
"""

GPU_AMD = """
pools:
  - name: amd-pool
    replicas: 2
    images: {}
    gpu:
      enabled: true
      vendor: amd
      resourceName: amd.com/gpu
      count: 1
"""

# No replicas in the README, so it is a DaemonSet pool.
GPU_MOUNT_ALL = """
pools:
  - name: all-gpus
    images: {}
    gpu:
      enabled: true
      vendor: nvidia
      mountAll: true  # Requires vendor to be set
"""

GPU_MIXED = """
supernodes:
  image: flwr/supernode:1.25.0
  pools:
    - name: cpu-only
      replicas: 4
      images: {}

    - name: nvidia-gpus
      replicas: 2
      images:
        supernode: my-registry/supernode-nvidia:1.25.0 # Image with NVIDIA dependencies
      gpu:
        enabled: true
        vendor: nvidia
        resourceName: nvidia.com/gpu
        count: 1

    - name: amd-gpus
      replicas: 2
      images:
        supernode: my-registry/supernode-amd:1.25.0 # Image with AMD dependencies
      gpu:
        enabled: true
        vendor: amd
        resourceName: amd.com/gpu
        count: 1
"""

# "Static Configuration": a bare nodeConfig map, given a pool to live in.
NODECONFIG_STATIC = """
nodeConfig:
  dataset: "cifar10"
  batch-size: "32"
  learning-rate: "0.01"
"""

RESOURCES_SUPERLINK = """
superlink:
  image: flwr/superlink:1.25.0
  resources:
    requests:
      memory: "256Mi"
      cpu: "100m"
    limits:
      memory: "512Mi"
      cpu: "500m"
  # Process mode only: SuperExec ServerApp sidecar resources
  superexecResources:
    requests:
      memory: "128Mi"
      cpu: "50m"
    limits:
      memory: "256Mi"
      cpu: "200m"
  service:
    type: ClusterIP
"""

RESOURCES_POOL = """
supernodes:
  image: flwr/supernode:1.25.0
  pools:
    - name: default
      replicas: 3
      supernodeResources:
        requests:
          memory: "512Mi"
          cpu: "200m"
        limits:
          memory: "1Gi"
          cpu: "1000m"
      # Process mode only: SuperExec ClientApp sidecar resources
      superexecResources:
        requests:
          memory: "256Mi"
          cpu: "100m"
        limits:
          memory: "512Mi"
          cpu: "500m"
"""

RESOURCES_MULTI_POOL = """
supernodes:
  image: flwr/supernode:1.25.0
  pools:
    - name: cpu-pool
      replicas: 3
      supernodeResources:
        requests:
          cpu: "500m"
          memory: "512Mi"
        limits:
          cpu: "2000m"
          memory: "1Gi"
    
    - name: memory-pool
      replicas: 2
      supernodeResources:
        requests:
          cpu: "200m"
          memory: "2Gi"
        limits:
          cpu: "1000m"
          memory: "4Gi"
    
    - name: gpu-pool
      replicas: 2
      supernodeResources:
        requests:
          cpu: "1000m"
          memory: "2Gi"
        limits:
          cpu: "4000m"
          memory: "8Gi"
      gpu:
        enabled: true
        vendor: nvidia
        resourceName: nvidia.com/gpu
        count: 1
"""

RESOURCES_WITH_GPU = """
pools:
  - name: nvidia-gpu-pool
    replicas: 2
    supernodeResources:
      requests:
        cpu: "1000m"
        memory: "2Gi"
      limits:
        cpu: "4000m"
        memory: "8Gi"
    gpu:
      enabled: true
      vendor: nvidia
      resourceName: nvidia.com/gpu
      count: 1
"""


def resources_federation(isolation: str) -> dict[str, Any]:
    """examples/federation-resources.yaml is described, not shown: the README's SuperLink
    and pool resource fragments together, in process or subprocess mode."""
    process = isolation == "process"
    config = framed(f"resources-{isolation}", RESOURCES_SUPERLINK, isolation=isolation,
                    superlink={"superexecImage": "flwr/superexec:1.25.0"} if process else None)
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
    Example("subprocess", from_cr(SUBPROCESS), "subprocess", "my-registry/superlink-with-deps:1.25.0",
            {"default": PoolExpect(2, "my-registry/supernode-with-deps:1.25.0")}),
    Example("multipools", from_cr(MULTIPOOLS), "subprocess", SL,
            {"pool-a": PoolExpect(None, SN), "pool-b": PoolExpect(None, "flwr/supernode:1.24.0")}),
    Example("examples-daemonset-process", from_cr(EXAMPLES_DAEMONSET_PROCESS), "process", SL,
            {"default": PoolExpect(None, SN, SX)}, SX),
    Example("examples-statefulset-subprocess", from_cr(EXAMPLES_STATEFULSET_SUBPROCESS), "subprocess", SL,
            {"default": PoolExpect(2, SN)}),
    Example("examples-nodeconfig", from_cr(EXAMPLES_NODECONFIG), "subprocess", SL, {"default": PoolExpect(4, SN)}),
    Example("examples-nodeconfig-daemonset", from_cr(EXAMPLES_NODECONFIG_DAEMONSET), "subprocess", SL,
            {"edge": PoolExpect(None, SN)}),
    Example("nodeconfig-partitioned-training", from_cr(PARTITIONED_TRAINING), "subprocess", SL,
            {"default": PoolExpect(4, "my-app/client:latest")}),
    Example("nodeconfig-edge-federation", from_cr(EDGE_FEDERATION), "subprocess", SL,
            {"edge": PoolExpect(None, "my-app/client:latest")}),
    Example("nodeconfig-static", static_nodeconfig_federation(), "subprocess", SL, {"default": PoolExpect(2, SN)}),
    Example("pool-configuration", framed("pool-configuration", POOL_CONFIGURATION), "subprocess", SL,
            {"cpu-pool": PoolExpect(4, SN),
             "gpu-pool": PoolExpect(2, "my-registry/supernode-gpu:1.25.0", gpu=NVIDIA)}),
    Example("gpu-nvidia", framed("gpu-nvidia", GPU_NVIDIA), "subprocess", SL,
            {"nvidia-pool": PoolExpect(2, SN, gpu=NVIDIA)}),
    # The same pool in process mode: the GPU goes to the container running ClientApps.
    Example("gpu-nvidia-process",
            framed("gpu-nvidia-process", GPU_NVIDIA.replace("images: {}", "images: {superexecClientApp: flwr/superexec:1.25.0}"),
                   isolation="process", superlink={"superexecImage": SX}),
            "process", SL, {"nvidia-pool": PoolExpect(2, SN, SX, gpu=NVIDIA)}, SX),
    Example("gpu-amd", framed("gpu-amd", GPU_AMD), "subprocess", SL, {"amd-pool": PoolExpect(2, SN, gpu=AMD)}),
    Example("gpu-mount-all", framed("gpu-mount-all", GPU_MOUNT_ALL, mode="DaemonSet"), "subprocess", SL,
            {"all-gpus": PoolExpect(None, SN)}),
    Example("gpu-mixed-clusters", framed("gpu-mixed-clusters", GPU_MIXED), "subprocess", SL,
            {"cpu-only": PoolExpect(4, SN),
             "nvidia-gpus": PoolExpect(2, "my-registry/supernode-nvidia:1.25.0", gpu=NVIDIA),
             "amd-gpus": PoolExpect(2, "my-registry/supernode-amd:1.25.0", gpu=AMD)}),
    Example("resources-process", resources_federation("process"), "process", SL,
            {"default": PoolExpect(3, SN, SX)}, SX),
    Example("resources-subprocess", resources_federation("subprocess"), "subprocess", SL,
            {"default": PoolExpect(3, SN)}),
    Example("resources-multi-pool", framed("resources-multi-pool", RESOURCES_MULTI_POOL), "subprocess", SL,
            {"cpu-pool": PoolExpect(3, SN), "memory-pool": PoolExpect(2, SN), "gpu-pool": PoolExpect(2, SN, gpu=NVIDIA)}),
    Example("resources-with-gpu", framed("resources-with-gpu", RESOURCES_WITH_GPU), "subprocess", SL,
            {"nvidia-gpu-pool": PoolExpect(2, SN, gpu=NVIDIA)}),
]
BY_ID = {ex.id: ex for ex in EXAMPLES}
each_example = pytest.mark.parametrize("ex", EXAMPLES, ids=str)


# --- Helpers ---------------------------------------------------------------------------

def render(config: dict[str, Any]) -> list[dict[str, Any]]:
    return workloads.all_objects(load_plan(copy.deepcopy(config), STACK))


def index(objects: list[dict]) -> dict[tuple[str, str], dict]:
    out = {(o["kind"], o["metadata"]["name"]): o for o in objects}
    assert len(out) == len(objects), "two objects share a kind and name"
    return out


def superlink_sts(objs: dict, ex: Example) -> dict:
    return objs[("StatefulSet", f"{ex.name}-superlink")]


def pool_workload(objs: dict, ex: Example, pool: str) -> dict:
    kind = "StatefulSet" if ex.pools[pool].replicas is not None else "DaemonSet"
    return objs[(kind, f"{ex.name}-supernode-{pool}")]


def pod(workload: dict) -> dict:
    return workload["spec"]["template"]["spec"]


def container(workload: dict, name: str) -> dict:
    found = [c for c in pod(workload)["containers"] if c["name"] == name]
    assert len(found) == 1, f"expected one container {name!r}, got {[c['name'] for c in pod(workload)['containers']]}"
    return found[0]


def flag(args: list[str], name: str) -> str:
    """The value after a flag that must appear exactly once."""
    assert args.count(name) == 1, f"{name} appears {args.count(name)} times in {args}"
    return args[args.index(name) + 1]


def env_of(c: dict) -> dict[str, dict]:
    return {e["name"]: e for e in c.get("env", [])}


def volume(pod_spec: dict, name: str) -> dict:
    found = [v for v in pod_spec["volumes"] if v["name"] == name]
    assert len(found) == 1, f"expected one volume {name!r}"
    return found[0]


DEFAULT_RESOURCES = {"requests": {"cpu": "100m", "memory": "256Mi"}}


def with_defaults(resources: Optional[dict]) -> dict:
    """Resources as rendered: the given ones over the federation's default requests."""
    return merge_resources(DEFAULT_RESOURCES, resources)


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


def test_example_table_matches_the_configs():
    # The expectation table names exactly the pools each pasted config declares.
    assert len(EXAMPLES) == len(BY_ID) >= 20
    for ex in EXAMPLES:
        assert [p["name"] for p in ex.config["supernodes"]["pools"]] == list(ex.pools), ex.id
        assert ex.config.get("isolationMode") == ex.isolation, ex.id


# --- Objects, kinds and names ------------------------------------------------------------

@each_example
def test_objects_are_named_like_the_operators(ex: Example):
    # The operator's objects, plus what we add around each workload: a ServiceAccount,
    # a NetworkPolicy, and for each pool a PodDisruptionBudget.
    superlink = f"{ex.name}-superlink"
    expected = {("Namespace", NAMESPACE), ("StatefulSet", superlink), ("Service", superlink),
                ("ServiceAccount", superlink), ("NetworkPolicy", superlink)}
    for pool, want in ex.pools.items():
        workload = f"{ex.name}-supernode-{pool}"
        expected |= {("ServiceAccount", workload), ("NetworkPolicy", workload), ("PodDisruptionBudget", workload)}
        if want.replicas is None:
            expected.add(("DaemonSet", workload))
        else:
            expected |= {("StatefulSet", workload), ("Service", workload)}
    objects = render(ex.config)
    assert set(index(objects)) == expected
    # Everything but the Namespace itself lives in the default namespace `flower`.
    assert all(o["metadata"]["namespace"] == NAMESPACE for o in objects if o["kind"] != "Namespace")


@each_pool
def test_pool_workload_shape(ex: Example, pool: str):
    objs = index(render(ex.config))
    want = ex.pools[pool]
    workload = pool_workload(objs, ex, pool)
    selector = workload["spec"]["selector"]["matchLabels"]
    assert selector.items() <= workload["spec"]["template"]["metadata"]["labels"].items()
    if want.replicas is None:
        assert workload["kind"] == "DaemonSet"
        assert "replicas" not in workload["spec"]
        assert ("Service", workload["metadata"]["name"]) not in objs
    else:
        assert workload["kind"] == "StatefulSet"
        assert workload["spec"]["replicas"] == want.replicas
        # Headless Service of the same name gives pods stable DNS names.
        service = objs[("Service", workload["metadata"]["name"])]
        assert workload["spec"]["serviceName"] == service["metadata"]["name"]
        assert service["spec"]["clusterIP"] == "None"
        assert service["spec"]["selector"] == selector


# --- Containers, images and isolation ----------------------------------------------------

@each_example
def test_superlink_containers_and_images(ex: Example):
    sts = superlink_sts(index(render(ex.config)), ex)
    names = [c["name"] for c in pod(sts)["containers"]]
    if ex.process:
        assert names == ["superlink", "superexec-serverapp"]
        assert container(sts, "superexec-serverapp")["image"] == ex.superexec_image
    else:
        assert names == ["superlink"]
    assert container(sts, "superlink")["image"] == ex.superlink_image


@each_pool
def test_supernode_containers_and_images(ex: Example, pool: str):
    workload = pool_workload(index(render(ex.config)), ex, pool)
    want = ex.pools[pool]
    names = [c["name"] for c in pod(workload)["containers"]]
    if ex.process:
        assert names == ["supernode", "superexec-clientapp"]
        assert container(workload, "superexec-clientapp")["image"] == want.clientapp_image
    else:
        assert names == ["supernode"]
    assert container(workload, "supernode")["image"] == want.image


@each_example
def test_isolation_mode_and_superexec_args(ex: Example):
    objs = index(render(ex.config))
    sts = superlink_sts(objs, ex)
    assert flag(container(sts, "superlink")["args"], "--isolation") == ex.isolation
    if ex.process:
        # gRPC era SuperExec: plaintext AppIo API inside the pod.
        assert container(sts, "superexec-serverapp")["args"] == [
            "--insecure", "--plugin-type", "serverapp", "--appio-api-address", "127.0.0.1:9091",
            "--health-server-address", "0.0.0.0:8082"]
    for pool in ex.pools:
        workload = pool_workload(objs, ex, pool)
        assert flag(container(workload, "supernode")["args"], "--isolation") == ex.isolation
        if ex.process:
            assert container(workload, "superexec-clientapp")["args"] == [
                "--insecure", "--plugin-type", "clientapp", "--appio-api-address", "127.0.0.1:9094",
                "--health-server-address", "0.0.0.0:8082"]


# --- SuperLink: gRPC era, TLS, state -----------------------------------------------------

@each_example
def test_superlink_grpc_era_args_tls_and_state(ex: Example):
    sts = superlink_sts(index(render(ex.config)), ex)
    c = container(sts, "superlink")
    args = c["args"]
    assert flag(args, "--fleet-api-address") == "0.0.0.0:9092"
    assert flag(args, "--control-api-address") == "0.0.0.0:9093"
    assert flag(args, "--serverappio-api-address") == "127.0.0.1:9091"
    # TLS by default (the operator defaults to insecure).
    assert "--insecure" not in args
    assert flag(args, "--ssl-ca-certfile") == CA_FILE
    assert flag(args, "--ssl-certfile") == "/etc/flower/tls/tls.crt"
    assert flag(args, "--ssl-keyfile") == "/etc/flower/tls/tls.key"
    spec = pod(sts)
    assert volume(spec, "tls")["secret"]["secretName"] == f"{ex.name}-superlink-tls"
    assert volume(spec, "ca")["secret"]["secretName"] == f"{ex.name}-ca"
    # State survives restarts: a StatefulSet with a `state` PVC holding the database.
    assert flag(args, "--database") == "/var/lib/flower/state.db"
    assert {"name": "state", "mountPath": "/var/lib/flower"} in c["volumeMounts"]
    assert [t["metadata"]["name"] for t in sts["spec"]["volumeClaimTemplates"]] == ["state"]
    assert sts["spec"]["replicas"] == 1


@each_example
def test_superlink_service_exposes_fleet_and_control_never_serverappio(ex: Example):
    objs = index(render(ex.config))
    service = objs[("Service", f"{ex.name}-superlink")]
    assert service["spec"]["type"] == "ClusterIP"
    assert [(p["name"], p["port"]) for p in service["spec"]["ports"]] == [("fleet", 9092), ("control", 9093)]
    # The selector picks the SuperLink pods.
    labels = superlink_sts(objs, ex)["spec"]["template"]["metadata"]["labels"]
    assert service["spec"]["selector"].items() <= labels.items()


@each_pool
def test_supernode_dials_superlink_over_tls(ex: Example, pool: str):
    workload = pool_workload(index(render(ex.config)), ex, pool)
    c = container(workload, "supernode")
    assert flag(c["args"], "--superlink") == f"{ex.name}-superlink.{NAMESPACE}.svc.cluster.local:9092"
    assert flag(c["args"], "--root-certificates") == CA_FILE
    assert "--insecure" not in c["args"]
    assert {"name": "ca", "mountPath": "/etc/flower/ca", "readOnly": True} in c["volumeMounts"]
    assert volume(pod(workload), "ca")["secret"]["secretName"] == f"{ex.name}-ca"
    # Clients trust the CA only; they never see the server's key.
    assert "tls" not in [v["name"] for v in pod(workload)["volumes"]]


# --- Resources and GPUs --------------------------------------------------------------------

@each_example
def test_superlink_resources_land_on_the_right_container(ex: Example):
    sts = superlink_sts(index(render(ex.config)), ex)
    sl = ex.config["superlink"]
    # The operator's resources, over our default requests.
    assert container(sts, "superlink")["resources"] == with_defaults(sl.get("resources"))
    if ex.process:
        assert container(sts, "superexec-serverapp")["resources"] == with_defaults(sl.get("superexecResources"))


@each_pool
def test_pool_resources_and_gpu_land_on_the_right_container(ex: Example, pool: str):
    workload = pool_workload(index(render(ex.config)), ex, pool)
    raw, want = config_pool(ex, pool), ex.pools[pool]
    # The GPU goes to the container that runs ClientApps.
    supernode_gpu, clientapp_gpu = (None, want.gpu) if ex.process else (want.gpu, None)
    assert container(workload, "supernode")["resources"] == with_defaults(with_gpu(raw.get("supernodeResources"), supernode_gpu))
    if ex.process:
        assert container(workload, "superexec-clientapp")["resources"] == with_defaults(with_gpu(raw.get("superexecResources"), clientapp_gpu))


def test_readme_resources_verbatim():
    # Spot checks against the README's literal numbers (the loops above compare to config).
    objs = index(render(BY_ID["resources-process"].config))
    sl = objs[("StatefulSet", "resources-process-superlink")]
    assert container(sl, "superlink")["resources"] == {
        "requests": {"memory": "256Mi", "cpu": "100m"}, "limits": {"memory": "512Mi", "cpu": "500m"}}
    assert container(sl, "superexec-serverapp")["resources"] == {
        "requests": {"memory": "128Mi", "cpu": "50m"}, "limits": {"memory": "256Mi", "cpu": "200m"}}
    sn = objs[("StatefulSet", "resources-process-supernode-default")]
    assert container(sn, "supernode")["resources"] == {
        "requests": {"memory": "512Mi", "cpu": "200m"}, "limits": {"memory": "1Gi", "cpu": "1000m"}}
    assert container(sn, "superexec-clientapp")["resources"] == {
        "requests": {"memory": "256Mi", "cpu": "100m"}, "limits": {"memory": "512Mi", "cpu": "500m"}}

    gpu_pool = index(render(BY_ID["resources-multi-pool"].config))[("StatefulSet", "resources-multi-pool-supernode-gpu-pool")]
    assert container(gpu_pool, "supernode")["resources"] == {
        "requests": {"cpu": "1000m", "memory": "2Gi"},
        "limits": {"cpu": "4000m", "memory": "8Gi", "nvidia.com/gpu": 1}}


def test_gpu_in_process_mode_is_on_clientapp_only():
    objs = index(render(BY_ID["gpu-nvidia-process"].config))
    workload = objs[("StatefulSet", "gpu-nvidia-process-supernode-nvidia-pool")]
    assert container(workload, "superexec-clientapp")["resources"]["limits"] == {"nvidia.com/gpu": 1}
    assert container(workload, "supernode")["resources"] == DEFAULT_RESOURCES
    assert container(objs[("StatefulSet", "gpu-nvidia-process-superlink")], "superexec-serverapp")["resources"] == DEFAULT_RESOURCES


def test_gpu_count_survives_a_pod_template_resources_patch():
    # The README GPU example plus a podTemplate tweaking the same container's CPU limit.
    config = framed("gpu-patch", GPU_NVIDIA)
    config["supernodes"]["pools"][0]["podTemplate"] = {
        "spec": {"containers": [{"name": "supernode", "resources": {"limits": {"cpu": "2"}}}]}}
    workload = index(render(config))[("StatefulSet", "gpu-patch-supernode-nvidia-pool")]
    assert container(workload, "supernode")["resources"]["limits"] == {"cpu": "2", "nvidia.com/gpu": 1}


@pytest.mark.parametrize("isolation,target", [("subprocess", "supernode"), ("process", "superexec-clientapp")])
def test_nvidia_mount_all(isolation: str, target: str):
    # README: mountAll on NVIDIA sets runtimeClassName and NVIDIA_VISIBLE_DEVICES=all.
    fragment = GPU_MOUNT_ALL
    extra = None
    if isolation == "process":
        fragment = fragment.replace("images: {}", "images: {superexecClientApp: flwr/superexec:1.25.0}")
        extra = {"superexecImage": SX}
    objs = index(render(framed("mount-all", fragment, mode="DaemonSet", isolation=isolation, superlink=extra)))
    ds = objs[("DaemonSet", "mount-all-supernode-all-gpus")]
    assert pod(ds)["runtimeClassName"] == "nvidia"
    c = container(ds, target)
    assert env_of(c)["NVIDIA_VISIBLE_DEVICES"] == {"name": "NVIDIA_VISIBLE_DEVICES", "value": "all"}
    others = [each for each in pod(ds)["containers"] if each["name"] != target]
    assert all("NVIDIA_VISIBLE_DEVICES" not in env_of(each) for each in others)
    # All GPUs are exposed by the runtime: no count is requested from the device plugin.
    for each in pod(ds)["containers"]:
        assert not any("gpu" in r for r in each["resources"].get("limits", {})), each["name"]
    assert c["securityContext"] == RESTRICTED_CONTAINER


AMD_MOUNT_ALL = GPU_MOUNT_ALL.replace("vendor: nvidia", "vendor: amd")


def test_amd_mount_all_is_refused_without_allow_privileged():
    # Our deliberate difference: AMD mountAll needs a privileged container, so it is opt-in.
    assert "vendor: amd" in AMD_MOUNT_ALL
    with pytest.raises(ConfigError) as err:
        load_plan(framed("amd-all", AMD_MOUNT_ALL, mode="DaemonSet"), STACK)
    assert "federation.supernodes.pools[0].gpu.allowPrivileged:" in str(err.value)
    assert "set allowPrivileged: true" in str(err.value)


def test_amd_mount_all_with_allow_privileged():
    config = framed("amd-all", AMD_MOUNT_ALL, mode="DaemonSet")
    config["supernodes"]["pools"][0]["gpu"]["allowPrivileged"] = True
    objs = index(render(config))
    ds = objs[("DaemonSet", "amd-all-supernode-all-gpus")]
    c = container(ds, "supernode")
    # README: mounts /dev/kfd and /dev/dri, sets ROCR_VISIBLE_DEVICES=all.
    mounts = {m["mountPath"]: m["name"] for m in c["volumeMounts"]}
    for path in ("/dev/kfd", "/dev/dri"):
        assert volume(pod(ds), mounts[path])["hostPath"]["path"] == path
    assert env_of(c)["ROCR_VISIBLE_DEVICES"] == {"name": "ROCR_VISIBLE_DEVICES", "value": "all"}
    assert c["securityContext"]["privileged"] is True
    assert not any("gpu" in r for r in c["resources"].get("limits", {}))
    # The namespace admits the privileged pod, and says so.
    assert objs[("Namespace", NAMESPACE)]["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "privileged"
    for obj in objs.values():
        kubernetes_validate.validate(obj, K8S_VERSION, strict=True)


def test_mount_all_requires_vendor():
    # README: "mountAll: true  # Requires vendor to be set"
    config = framed("no-vendor", GPU_MOUNT_ALL.replace("      vendor: nvidia\n", ""), mode="DaemonSet")
    assert "vendor" not in config["supernodes"]["pools"][0]["gpu"]
    with pytest.raises(ConfigError) as err:
        load_plan(config, STACK)
    assert ("federation.supernodes.pools[0].gpu.vendor: "
            "spec.supernodes.pools[*].gpu.vendor is required when gpu.mountAll=true") in str(err.value)


# --- nodeConfig ------------------------------------------------------------------------------

INDEX_ENV = {"name": "FLOWER_POD_INDEX",
             "valueFrom": {"fieldRef": {"fieldPath": "metadata.labels['apps.kubernetes.io/pod-index']"}}}
NODE_ENV = {"name": "FLOWER_NODE_NAME", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}}
PARTITIONED = 'name="client_default_$(FLOWER_POD_INDEX)" num-partitions=4 partition-id=$(FLOWER_POD_INDEX)'
BY_NODE = 'name="client_$(FLOWER_NODE_NAME)" node-id="$(FLOWER_NODE_NAME)" pool="edge"'


@pytest.mark.parametrize("example,pool,node_config,env", [
    ("examples-nodeconfig", "default", PARTITIONED, [INDEX_ENV]),
    ("nodeconfig-partitioned-training", "default", PARTITIONED, [INDEX_ENV]),
    ("examples-nodeconfig-daemonset", "edge", BY_NODE, [NODE_ENV]),
    ("nodeconfig-edge-federation", "edge", BY_NODE, [NODE_ENV]),
    # YAML types are kept: "32" is a string, unlike in the operator.
    ("nodeconfig-static", "default", 'batch-size="32" dataset="cifar10" learning-rate="0.01"', []),
])
def test_node_config_arg_and_env(example: str, pool: str, node_config: str, env: list[dict]):
    ex = BY_ID[example]
    c = container(pool_workload(index(render(ex.config)), ex, pool), "supernode")
    assert flag(c["args"], "--node-config") == node_config
    assert c.get("env", []) == env


def test_node_config_expands_to_the_readme_per_pod_values():
    # Kubernetes expands $(FLOWER_POD_INDEX) to the ordinal; the result is the README's list.
    ex = BY_ID["nodeconfig-partitioned-training"]
    arg = flag(container(pool_workload(index(render(ex.config)), ex, "default"), "supernode")["args"], "--node-config")
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
    objs = index(render(ex.config))
    for pool in ex.pools:
        assert "--node-config" not in container(pool_workload(objs, ex, pool), "supernode")["args"]


# --- podTemplate nodeSelector (the README's commented-out lines, uncommented) ---------------

def uncommented(text: str) -> str:
    """The README example with its `# podTemplate:` block turned on."""
    lines = []
    for line in text.splitlines():
        stripped = line.lstrip()
        if stripped.startswith("# ") and any(k in stripped for k in ("podTemplate:", "spec:", "nodeSelector:", "flower.")):
            indent = line[: len(line) - len(stripped)]
            line = indent + stripped[2:]
        lines.append(line)
    return "\n".join(lines)


@pytest.mark.parametrize("text,workloads_and_selectors", [
    (DAEMONSET, {("DaemonSet", "federation-daemonset-supernode-default"): {"flower.dev/role": "client"}}),
    (MULTIPOOLS, {("DaemonSet", "federation-multipools-supernode-pool-a"): {"flower.ai/pool": "a"},
                  ("DaemonSet", "federation-multipools-supernode-pool-b"): {"flower.ai/pool": "b"}}),
], ids=["daemonset", "multipools"])
def test_node_selector_reaches_the_pod(text: str, workloads_and_selectors: dict):
    config = from_cr(uncommented(text))
    assert all("podTemplate" in p for p in config["supernodes"]["pools"])
    objs = index(render(config))
    for key, selector in workloads_and_selectors.items():
        assert pod(objs[key])["nodeSelector"] == selector
        kubernetes_validate.validate(objs[key], K8S_VERSION, strict=True)
    # The SuperLink is not scheduled by a pool's template.
    assert "nodeSelector" not in pod(objs[("StatefulSet", f"{config['name']}-superlink")])


# --- Restricted pods and schema validity ------------------------------------------------------

@each_example
def test_pods_run_restricted(ex: Example):
    objs = index(render(ex.config))
    assert objs[("Namespace", NAMESPACE)]["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "restricted"
    workloads_ = [o for o in objs.values() if o["kind"] in ("StatefulSet", "DaemonSet")]
    assert len(workloads_) == 1 + len(ex.pools)
    for w in workloads_:
        spec = pod(w)
        assert spec["securityContext"]["runAsUser"] == FLOWER_UID
        assert spec["securityContext"]["runAsNonRoot"] is True
        assert spec["automountServiceAccountToken"] is False
        for c in spec["containers"]:
            assert c["securityContext"] == RESTRICTED_CONTAINER, (w["metadata"]["name"], c["name"])
            # Writable paths are emptyDir scratch, since the root filesystem is read-only.
            scratch = volume(spec, f"scratch-{c['name']}")
            assert scratch["emptyDir"] == {}
            assert {m["mountPath"] for m in c["volumeMounts"] if m["name"] == scratch["name"]} >= {"/tmp", "/app/.flwr"}


@each_example
def test_manifests_validate_against_kubernetes(ex: Example):
    objects = render(ex.config)
    assert len(objects) >= 4
    for obj in objects:
        kubernetes_validate.validate(obj, K8S_VERSION, strict=True)


def test_validator_is_live():
    # Guards the test above: a broken manifest must fail validation.
    broken = copy.deepcopy(render(BY_ID["quick-start"].config)[1])
    broken["spec"]["replicas"] = "one"
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(broken, K8S_VERSION, strict=True)


# --- Deliberate differences, switched off ---------------------------------------------------

def test_insecure_true_gives_insecure_everywhere():
    config = {**BY_ID["process"].config, "insecure": True}
    objs = index(render(config))
    sts = objs[("StatefulSet", "federation-process-superlink")]
    sn = objs[("StatefulSet", "federation-process-supernode-default")]
    for c in (container(sts, "superlink"), container(sn, "supernode")):
        assert "--insecure" in c["args"]
        assert not [a for a in c["args"] if a.startswith("--ssl-") or a == "--root-certificates"]
    for w in (sts, sn):
        assert not {"tls", "ca"} & {v["name"] for v in pod(w)["volumes"]}


def test_persistence_disabled_drops_state():
    config = copy.deepcopy(BY_ID["quick-start"].config)
    config["superlink"]["persistence"] = {"enabled": False}
    sts = index(render(config))[("StatefulSet", "my-federation-superlink")]
    c = container(sts, "superlink")
    assert "--database" not in c["args"]
    assert "volumeClaimTemplates" not in sts["spec"]
    assert "state" not in [m["name"] for m in c["volumeMounts"]]
    assert flag(c["args"], "--fleet-api-address") == "0.0.0.0:9092"


# --- CEL validation rules (README Troubleshooting table, messages verbatim) -----------------

def _ds_with_replicas():
    config = from_cr(MULTIPOOLS)
    config["supernodes"]["pools"][1]["replicas"] = 2
    return config


def _sts_without_replicas():
    config = from_cr(QUICK_START)
    del config["supernodes"]["pools"][0]["replicas"]
    return config


def _sts_zero_replicas():
    config = from_cr(QUICK_START)
    config["supernodes"]["pools"][0]["replicas"] = 0
    return config


def _process_without_superexec():
    config = from_cr(PROCESS)
    del config["superlink"]["superexecImage"]
    return config


def _subprocess_with_clientapp():
    config = from_cr(SUBPROCESS)
    config["supernodes"]["pools"][0]["images"] = {"superexecClientApp": SX}
    return config


@pytest.mark.parametrize("make,path,message", [
    (_ds_with_replicas, "federation.supernodes.pools[1].replicas",
     "replicas must not be set for pools when mode is DaemonSet"),
    (_sts_without_replicas, "federation.supernodes.pools[0].replicas",
     "replicas must be set (>=1) for every pool when mode is StatefulSet"),
    (_sts_zero_replicas, "federation.supernodes.pools[0].replicas",
     "replicas must be set (>=1) for every pool when mode is StatefulSet"),
    (_process_without_superexec, "federation.superlink.superexecImage",
     "spec.superlink.superexecImage is required when isolationMode=process"),
    (_subprocess_with_clientapp, "federation.supernodes.pools[0].images.superexecClientApp",
     "spec.supernodes.pools[*].images.superexecClientApp must be empty when isolationMode=subprocess"),
], ids=["daemonset-replicas", "statefulset-no-replicas", "statefulset-zero-replicas",
        "process-no-superexec-image", "subprocess-with-clientapp-image"])
def test_cel_rule(make, path: str, message: str):
    with pytest.raises(ConfigError) as err:
        load_plan(make(), STACK)
    assert f"{path}: {message}" in str(err.value)
    assert len(err.value.problems) == 1, str(err.value)


def test_cel_rules_are_reported_together():
    # One run lists every broken rule, so a user fixes the config in one pass.
    config = from_cr(PROCESS)
    config["mode"] = "DaemonSet"
    del config["superlink"]["superexecImage"]
    with pytest.raises(ConfigError) as err:
        load_plan(config, STACK)
    text = str(err.value)
    assert "federation.supernodes.pools[0].replicas: replicas must not be set for pools when mode is DaemonSet" in text
    assert "federation.superlink.superexecImage: spec.superlink.superexecImage is required when isolationMode=process" in text


# --- The real Pulumi program, under mocks ------------------------------------------------------

def pulumi_type(manifest: dict) -> str:
    group = "core/v1" if manifest["apiVersion"] == "v1" else manifest["apiVersion"]
    return f"kubernetes:{group}:{manifest['kind']}"


@pytest.mark.parametrize("example", ["quick-start", "process", "multipools", "gpu-mixed-clusters"])
def test_pulumi_program_registers_the_core_manifests(example: str):
    ex = BY_ID[example]
    run = run_program({"flower-federation:federation": copy.deepcopy(ex.config)}, STACK)
    core = render(ex.config)
    manifests, secrets = without_generated(run.manifests())
    assert sorted((pulumi_type(m), m["metadata"]["name"]) for m in manifests) == \
        sorted((pulumi_type(m), m["metadata"]["name"]) for m in core)
    # And with exactly the core's content; TLS is on, so the shell adds its Secrets.
    assert index(manifests) == index(core)
    assert {s["metadata"]["name"] for s in secrets} == {f"{ex.name}-superlink-tls", f"{ex.name}-ca"}
