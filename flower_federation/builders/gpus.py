"""GPUs for the container that runs a pool's ClientApps: the SuperNode in `subprocess` isolation, the ClientApp
SuperExec in `process` isolation (a sidecar's, or each distributed SuperExec's)."""

from __future__ import annotations

import copy

from flower_federation.builders import pods
from flower_federation.config import Pool
from flower_federation.flower.layout import AMD_DEVICES
from flower_federation.kube.objects import PodTemplate

GPU_RESOURCE_BY_VENDOR = {"nvidia": "nvidia.com/gpu", "amd": "amd.com/gpu"}


def with_gpus(pod: PodTemplate, pool: Pool, container: str) -> PodTemplate:
    """`pod` with the pool's GPUs given to its container named `container` (the one that runs ClientApps)."""
    gpu = pool.gpu
    if not gpu.enabled:
        return pod
    pod = copy.deepcopy(pod)
    c = next(c for c in pod["spec"]["containers"] if c["name"] == container)
    if gpu.mount_all:
        if gpu.vendor == "nvidia":
            pod["spec"]["runtimeClassName"] = gpu.runtime_class_name
            c["env"] = pods.merge_env(c.get("env", []), [{"name": "NVIDIA_VISIBLE_DEVICES", "value": "all"}])
        else:
            c["env"] = pods.merge_env(c.get("env", []), [{"name": "ROCR_VISIBLE_DEVICES", "value": "all"}])
            c["securityContext"] = pods.container_security_context(privileged=True)
            for vol, path in AMD_DEVICES.items():
                pod["spec"]["volumes"].append({"name": vol, "hostPath": {"path": path}})
                c["volumeMounts"].append({"name": vol, "mountPath": path})
        return pod
    resource = gpu.resource_name or GPU_RESOURCE_BY_VENDOR[str(gpu.vendor)]
    limits = dict(c["resources"].get("limits", {}))
    limits[resource] = gpu.count
    c["resources"] = {**c["resources"], "limits": limits}
    return pod
