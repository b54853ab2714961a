"""RegistrationComponent: the Job that registers exactly the trusted SuperNode keys with
the SuperLink (federation/registration.py), with its ConfigMap filled in here: the
pools' public keys exist only at deploy time. The Job is named after the keys' digest, so
a changed set runs a new Job and an unchanged one changes nothing."""

from __future__ import annotations

from typing import Any, Optional

import pulumi

from federation import registration
from federation.kube import Manifest
from federation.plan import FederationPlan

from .kubernetes import register
from .rollout import Rollout

DIGEST_ANNOTATION = "flower.flwr.ai/trusted-keys-digest"


class RegistrationComponent(pulumi.ComponentResource):
    def __init__(
        self,
        name: str,
        plan: FederationPlan,
        objects: list[Manifest],
        pool_keys: pulumi.Output[dict[str, dict[str, str]]],
        rollout: Rollout,
        opts: Optional[pulumi.ResourceOptions] = None,
    ):
        super().__init__("flower-federation:index:NodeRegistration", name, None, opts)
        keys_text = pool_keys.apply(lambda keys: registration.trusted_keys_text(registration.trusted_slots(plan, keys)))
        self.job_name = keys_text.apply(lambda t: registration.job_name(plan, t))
        digest = keys_text.apply(registration.keys_digest)
        self.resources: list[pulumi.Resource] = []
        for m in objects:
            fields: Optional[dict[str, Any]] = None
            annotations: Optional[dict[str, pulumi.Output[str]]] = None
            if m["kind"] == "ConfigMap":
                fields = {"data": {**m["data"], registration.KEYS_FILE: keys_text}}
            elif m["kind"] == "Job":
                fields = {"metadata": {**m["metadata"], "name": self.job_name}}
                annotations = {**(rollout.annotations(m) or {}), DIGEST_ANNOTATION: digest}
            after = pulumi.ResourceOptions(parent=self, depends_on=list(self.resources))
            self.resources.append(register(m, after, fields=fields, pod_annotations=annotations))
        self.register_outputs({"jobName": self.job_name})
