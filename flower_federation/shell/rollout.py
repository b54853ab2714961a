"""Checksums that roll pods when what they mount changes.

A pod template gets the checksum of each generated Secret it mounts: the SuperLink's
server certificate and CA, the CA alone, or its pool's node public keys. Which Secrets a
pod mounts is read off the rendered template itself, so a new mount needs no wiring
here. Checksums digest public material only (certificates, public keys), so they are not
secret: a secret annotation would hide whole workload diffs in `pulumi preview`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

import pulumi

from flower_federation.builders import appio, node_auth, trust
from flower_federation.builders.manifests import volume_sources
from flower_federation.kube.objects import Manifest, pod_template_of
from flower_federation.plan.tls_sources import Trust


@dataclass
class Rollout:
    tls: Optional[Trust] = None
    superlink_checksum: Optional[pulumi.Output[str]] = None  # server certificate and CA
    client_checksum: Optional[pulumi.Output[str]] = None  # the CA clients trust
    # node-keys Secret name -> checksum of that pool's public keys
    node_keys: dict[str, pulumi.Output[str]] = field(default_factory=dict)
    # A pool's Runtime API certificate Secret -> checksum (of it and its CA).
    runtime: dict[str, pulumi.Output[str]] = field(default_factory=dict)

    def annotations(self, m: Manifest) -> Optional[dict[str, pulumi.Output[str]]]:
        template = pod_template_of(m)
        if template is None:
            return None
        secrets = {name for kind, name in volume_sources(template["spec"].get("volumes", [])) if kind == "Secret"}
        out: dict[str, pulumi.Output[str]] = {}
        if self.tls is not None:
            if self.tls.server_secret in secrets and self.superlink_checksum is not None:
                out[trust.CHECKSUM_ANNOTATION] = self.superlink_checksum
            elif self.tls.ca_secret in secrets and self.client_checksum is not None:
                out[trust.CHECKSUM_ANNOTATION] = self.client_checksum
        for secret, checksum in self.node_keys.items():
            if secret in secrets:
                out[node_auth.CHECKSUM_ANNOTATION] = checksum
        for secret, checksum in self.runtime.items():
            if secret in secrets:
                out.setdefault(appio.RUNTIME_CHECKSUM_ANNOTATION, checksum)
        return out or None
