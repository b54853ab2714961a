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
DEFAULT_REQUESTS: dict[str, str] = {"cpu": "100m", "memory": "256Mi"}
CA_FILE = "/etc/flower/ca/ca.crt"  # where clients find the CA they trust
