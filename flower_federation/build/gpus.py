"""GPUs for the container that runs a pool's ClientApps: the SuperNode in `subprocess` isolation, the ClientApp
SuperExec in `process` isolation (a sidecar's, or each distributed SuperExec's)."""

from __future__ import annotations

from flower_federation.build import pods
from flower_federation.config import Pool
from flower_federation.flower.layout import AMD_DEVICES
from flower_federation.kube.objects import Container, PodTemplate

GPU_RESOURCE_BY_VENDOR = {"nvidia": "nvidia.com/gpu", "amd": "amd.com/gpu"}


def apply(pool: Pool, c: Container, pod: PodTemplate) -> None:
    """Give the container that runs ClientApps the pool's GPUs."""
    gpu = pool.gpu
    if not gpu.enabled:
        return
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
        return
    resource = gpu.resource_name or GPU_RESOURCE_BY_VENDOR[str(gpu.vendor)]
    limits = dict(c["resources"].get("limits", {}))
    limits[resource] = gpu.count
    c["resources"] = {**c["resources"], "limits": limits}
