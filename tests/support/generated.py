"""What the Pulumi shell adds to the pure core's manifests: Secrets holding generated
material (TLS, node keys) and the certificate / node-key checksums on pod templates."""

from __future__ import annotations

import copy
from typing import Any

from flower_federation.builders.node_auth import CHECKSUM_ANNOTATION as NODE_KEYS_ANNOTATION
from flower_federation.builders.trust import CHECKSUM_ANNOTATION


def without_generated(manifests: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(manifests as the core renders them, the Secrets the shell generated)."""
    core, secrets = [], []
    for m in manifests:
        if m["kind"] == "Secret":
            secrets.append(m)
            continue
        m = copy.deepcopy(m)
        template = m.get("spec", {}).get("template")
        if template:
            annotations = template["metadata"].get("annotations", {})
            assert annotations.pop(CHECKSUM_ANNOTATION, None) is not None, (
                f"{m['kind']} {m['metadata']['name']} has no TLS checksum"
            )
            annotations.pop(NODE_KEYS_ANNOTATION, None)
            if not annotations:
                template["metadata"].pop("annotations", None)
        core.append(m)
    return core, secrets
