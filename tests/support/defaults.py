"""What the product promises every pod and container by default, spelled out on the
test side (not imported from the core), so a changed default fails a test."""

from __future__ import annotations

from typing import Any

FLOWER_UID = 49999
RESTRICTED_CONTAINER_SC: dict[str, Any] = {
    "allowPrivilegeEscalation": False,
    "capabilities": {"drop": ["ALL"]},
    "readOnlyRootFilesystem": True,
    "runAsNonRoot": True,
    "seccompProfile": {"type": "RuntimeDefault"},
}
RESTRICTED_POD_SC: dict[str, Any] = {
    "fsGroup": FLOWER_UID,
    "runAsGroup": FLOWER_UID,
    "runAsNonRoot": True,
    "runAsUser": FLOWER_UID,
    "seccompProfile": {"type": "RuntimeDefault"},
}
# Bitnami's resourcesPreset table (bitnami/charts, common chart `_resources.tpl`): its
# requests and memory limits, without its CPU and ephemeral-storage limits (docs/what-it-creates.md, "Resources").
PRESETS: dict[str, dict[str, Any]] = {
    "none": {},
    "nano": {"requests": {"cpu": "100m", "memory": "128Mi"}, "limits": {"memory": "192Mi"}},
    "micro": {"requests": {"cpu": "250m", "memory": "256Mi"}, "limits": {"memory": "384Mi"}},
    "small": {"requests": {"cpu": "500m", "memory": "512Mi"}, "limits": {"memory": "768Mi"}},
    "medium": {"requests": {"cpu": "500m", "memory": "1Gi"}, "limits": {"memory": "1536Mi"}},
    "large": {"requests": {"cpu": "1", "memory": "2Gi"}, "limits": {"memory": "3Gi"}},
    "xlarge": {"requests": {"cpu": "1500m", "memory": "4Gi"}, "limits": {"memory": "6Gi"}},
    "2xlarge": {"requests": {"cpu": "1500m", "memory": "4Gi"}, "limits": {"memory": "12Gi"}},
}


def role_preset(container: str, *, process_isolation: bool, kubernetes_executor: bool) -> str:
    """The preset a container of ours gets when config names none (docs/what-it-creates.md, "Resources"):
    whatever runs apps `small`, what only relays or launches pods `micro`."""
    if container == "supernode":
        return "micro" if process_isolation else "small"
    if container.startswith("superexec-"):
        return "micro" if kubernetes_executor else "small"
    if container == "node-registration":
        return "micro"
    # The state guard runs in the SuperLink's image, with its resources, before it (state_guard.py).
    assert container in ("superlink", "state-guard"), container
    return "small"


TASK_POD_PRESET = "small"  # the Kubernetes executor's ServerApp/ClientApp pods
ADDED_CONTAINER_PRESET = "nano"  # containers and init containers a podTemplate adds
CA_FILE = "/etc/flower/ca/ca.crt"  # where clients find the CA they trust
