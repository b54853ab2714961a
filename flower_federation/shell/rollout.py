"""Checksums that roll pods when what they mount changes.

A pod template gets the checksum of each generated Secret it mounts: the SuperLink's
server certificate and CA, the CA alone, or its pool's node public keys. Which annotation
digests which Secret is builders/checksums.py (`diff` reads the same fact); the values,
Pulumi Outputs, are made here. Checksums digest public material only (certificates, public keys), so they are not
secret: a secret annotation would hide whole workload diffs in `pulumi preview`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

import pulumi

from flower_federation.builders import checksums
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
        # Which Secret each annotation digests: builders/checksums.py, the fact `diff` reads too.
        values: list[tuple[checksums.Checksummed, pulumi.Output[str]]] = []
        if self.tls is not None:
            server, ca = checksums.tls(self.tls)
            values += [(server, self.superlink_checksum)] if self.superlink_checksum is not None else []
            values += [(ca, self.client_checksum)] if self.client_checksum is not None else []
        values += [(checksums.node_keys(secret), checksum) for secret, checksum in self.node_keys.items()]
        values += [(checksums.runtime(secret), checksum) for secret, checksum in self.runtime.items()]
        value_of: dict[checksums.Checksummed, pulumi.Output[str]] = {}
        for c, value in values:
            value_of.setdefault(c, value)  # the first, as `covering` takes it (a CA kept in the server's Secret)
        chosen = checksums.covering(template, (c for c, _ in values))
        out = {annotation: value_of[c] for annotation, c in chosen.items()}
        return out or None
