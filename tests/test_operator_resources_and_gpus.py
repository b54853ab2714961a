"""The operator README's resources and GPUs: its resources land on the right
container over its role's default preset, the GPU on the container that runs ClientApps, and
`mountAll` as the README says (NVIDIA: a RuntimeClass; AMD: privileged, so opt-in)."""

from __future__ import annotations

import pytest

from flower_federation.config.errors import ConfigError
from flower_federation.plan import load_plan
from tests.support.defaults import RESTRICTED_CONTAINER_SC
from tests.support.manifests import container, env_by_name, index, pod_spec, volume
from tests.support.operator_examples import (
    BY_ID,
    NAMESPACE,
    SX,
    Example,
    config_pool,
    default_resources,
    each_example,
    each_pool,
    framed,
    pool_workload,
    superlink_sts,
    with_defaults,
    with_gpu,
)
from tests.support.operator_fragments import GPU_MOUNT_ALL, GPU_NVIDIA
from tests.support.render import core_objects
from tests.support.schema import validate

# --- Resources and GPUs --------------------------------------------------------------------


@each_example
def test_superlink_resources_land_on_the_right_container(ex: Example):
    sts = superlink_sts(index(core_objects(ex.config)), ex)
    sl = ex.config["superlink"]
    # The operator's resources, over our default requests.
    assert container(sts, "superlink")["resources"] == with_defaults(sl.get("resources"), ex, "superlink")
    if ex.process:
        assert container(sts, "superexec-serverapp")["resources"] == with_defaults(
            sl.get("superexecResources"), ex, "superexec-serverapp"
        )


@each_pool
def test_pool_resources_and_gpu_land_on_the_right_container(ex: Example, pool: str):
    workload = pool_workload(index(core_objects(ex.config)), ex, pool)
    raw, want = config_pool(ex, pool), ex.pools[pool]
    # The GPU goes to the container that runs ClientApps.
    supernode_gpu, clientapp_gpu = (None, want.gpu) if ex.process else (want.gpu, None)
    assert container(workload, "supernode")["resources"] == with_defaults(
        with_gpu(raw.get("supernodeResources"), supernode_gpu), ex, "supernode"
    )
    if ex.process:
        assert container(workload, "superexec-clientapp")["resources"] == with_defaults(
            with_gpu(raw.get("superexecResources"), clientapp_gpu), ex, "superexec-clientapp"
        )


def test_readme_resources_verbatim():
    # Spot checks against the README's literal numbers (the loops above compare to config).
    objs = index(core_objects(BY_ID["resources-process"].config))
    sl = objs[("StatefulSet", "resources-process-superlink")]
    assert container(sl, "superlink")["resources"] == {
        "requests": {"memory": "256Mi", "cpu": "100m"},
        "limits": {"memory": "512Mi", "cpu": "500m"},
    }
    assert container(sl, "superexec-serverapp")["resources"] == {
        "requests": {"memory": "128Mi", "cpu": "50m"},
        "limits": {"memory": "256Mi", "cpu": "200m"},
    }
    sn = objs[("StatefulSet", "resources-process-supernode-default")]
    assert container(sn, "supernode")["resources"] == {
        "requests": {"memory": "512Mi", "cpu": "200m"},
        "limits": {"memory": "1Gi", "cpu": "1000m"},
    }
    assert container(sn, "superexec-clientapp")["resources"] == {
        "requests": {"memory": "256Mi", "cpu": "100m"},
        "limits": {"memory": "512Mi", "cpu": "500m"},
    }

    gpu_pool = index(core_objects(BY_ID["resources-multi-pool"].config))[
        ("StatefulSet", "resources-multi-pool-supernode-gpu-pool")
    ]
    assert container(gpu_pool, "supernode")["resources"] == {
        "requests": {"cpu": "1000m", "memory": "2Gi"},
        "limits": {"cpu": "4000m", "memory": "8Gi", "nvidia.com/gpu": 1},
    }


def test_gpu_in_process_mode_is_on_clientapp_only():
    ex = BY_ID["gpu-nvidia-process"]
    objs = index(core_objects(ex.config))
    workload = objs[("StatefulSet", "gpu-nvidia-process-supernode-nvidia-pool")]
    assert container(workload, "superexec-clientapp")["resources"]["limits"] == {
        "memory": "768Mi",  # the preset's
        "nvidia.com/gpu": 1,
    }
    assert container(workload, "supernode")["resources"] == default_resources(ex, "supernode")
    assert container(objs[("StatefulSet", "gpu-nvidia-process-superlink")], "superexec-serverapp")[
        "resources"
    ] == default_resources(ex, "superexec-serverapp")


def test_gpu_count_survives_a_pod_template_resources_patch():
    # The README GPU example plus a podTemplate tweaking the same container's CPU limit.
    config = framed("gpu-patch", GPU_NVIDIA)
    config["supernodes"]["pools"][0]["podTemplate"] = {
        "spec": {"containers": [{"name": "supernode", "resources": {"limits": {"cpu": "2"}}}]}
    }
    workload = index(core_objects(config))[("StatefulSet", "gpu-patch-supernode-nvidia-pool")]
    assert container(workload, "supernode")["resources"]["limits"] == {
        "cpu": "2",
        "memory": "768Mi",
        "nvidia.com/gpu": 1,
    }


@pytest.mark.parametrize("isolation,target", [("subprocess", "supernode"), ("process", "superexec-clientapp")])
def test_nvidia_mount_all(isolation: str, target: str):
    # README: mountAll on NVIDIA sets runtimeClassName and NVIDIA_VISIBLE_DEVICES=all.
    fragment = GPU_MOUNT_ALL
    extra = None
    if isolation == "process":
        fragment = fragment.replace("images: {}", "images: {superexecClientApp: flwr/superexec:1.25.0}")
        extra = {"superexecImage": SX}
    objs = index(core_objects(framed("mount-all", fragment, mode="DaemonSet", isolation=isolation, superlink=extra)))
    ds = objs[("DaemonSet", "mount-all-supernode-all-gpus")]
    assert pod_spec(ds)["runtimeClassName"] == "nvidia"
    c = container(ds, target)
    assert env_by_name(c)["NVIDIA_VISIBLE_DEVICES"] == {"name": "NVIDIA_VISIBLE_DEVICES", "value": "all"}
    others = [each for each in pod_spec(ds)["containers"] if each["name"] != target]
    assert all("NVIDIA_VISIBLE_DEVICES" not in env_by_name(each) for each in others)
    # All GPUs are exposed by the runtime: no count is requested from the device plugin.
    for each in pod_spec(ds)["containers"]:
        assert not any("gpu" in r for r in each["resources"].get("limits", {})), each["name"]
    assert c["securityContext"] == RESTRICTED_CONTAINER_SC


AMD_MOUNT_ALL = GPU_MOUNT_ALL.replace("vendor: nvidia", "vendor: amd")


def test_amd_mount_all_is_refused_without_allow_privileged():
    # Our deliberate difference: AMD mountAll needs a privileged container, so it is opt-in.
    assert "vendor: amd" in AMD_MOUNT_ALL
    with pytest.raises(ConfigError) as err:
        load_plan(framed("amd-all", AMD_MOUNT_ALL, mode="DaemonSet"), "dev")
    assert "federation.supernodes.pools[0].gpu.allowPrivileged:" in str(err.value)
    assert "set allowPrivileged: true" in str(err.value)


def test_amd_mount_all_with_allow_privileged():
    config = framed("amd-all", AMD_MOUNT_ALL, mode="DaemonSet")
    config["supernodes"]["pools"][0]["gpu"]["allowPrivileged"] = True
    objs = index(core_objects(config))
    ds = objs[("DaemonSet", "amd-all-supernode-all-gpus")]
    c = container(ds, "supernode")
    # README: mounts /dev/kfd and /dev/dri, sets ROCR_VISIBLE_DEVICES=all.
    mounts = {m["mountPath"]: m["name"] for m in c["volumeMounts"]}
    for path in ("/dev/kfd", "/dev/dri"):
        assert volume(pod_spec(ds), mounts[path])["hostPath"]["path"] == path
    assert env_by_name(c)["ROCR_VISIBLE_DEVICES"] == {"name": "ROCR_VISIBLE_DEVICES", "value": "all"}
    assert c["securityContext"]["privileged"] is True
    assert not any("gpu" in r for r in c["resources"].get("limits", {}))
    # The namespace admits the privileged pod, and says so.
    assert objs[("Namespace", NAMESPACE)]["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "privileged"
    for obj in objs.values():
        validate(obj)


def test_mount_all_requires_vendor():
    # README: "mountAll: true  # Requires vendor to be set"
    config = framed("no-vendor", GPU_MOUNT_ALL.replace("      vendor: nvidia\n", ""), mode="DaemonSet")
    assert "vendor" not in config["supernodes"]["pools"][0]["gpu"]
    with pytest.raises(ConfigError) as err:
        load_plan(config, "dev")
    assert ("federation.supernodes.pools[0].gpu.vendor: is required when gpu.mountAll=true") in str(err.value)
