"""RegistrationComponent: the Jobs that register exactly the trusted SuperNode keys with
the SuperLink (flower_federation/builders/registration.py: register first, revoke once the pools rolled),
with their ConfigMap filled in here: the pools' public keys exist only at deploy time. The
Jobs are named after the keys' digest, so a changed set runs new Jobs and an unchanged one
changes nothing."""

from __future__ import annotations

from typing import Any, Optional

import pulumi

from flower_federation.builders import registration
from flower_federation.kube.objects import Manifest
from flower_federation.plan import FederationPlan
from flower_federation.shell.kubernetes import register
from flower_federation.shell.rollout import Rollout

DIGEST_ANNOTATION = "flower.flwr.ai/trusted-keys-digest"


class RegistrationComponent(pulumi.ComponentResource):
    """Its ServiceAccount, ConfigMap and registration Job at once; the revocation Job
    (`revoke_after`) once the pools rolled."""

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
        self._keys_text, self._rollout, self._plan = keys_text, rollout, plan
        self._shards: Optional[pulumi.Output[list[str]]] = None
        self._digest = keys_text.apply(registration.keys_digest)
        self.resources: list[pulumi.Resource] = []
        self._revocation: Optional[Manifest] = None
        # Registration ConfigMap name -> its bound name (builders/registration.bound_name): the Jobs mount these.
        self._bound: dict[str, pulumi.Output[str]] = {}
        for m in objects:
            fields: Optional[dict[str, Any]] = None
            if m["kind"] == "ConfigMap":
                fields = self._bound_config_map(m, keys_text)
            elif m["kind"] == "Job" and m["metadata"]["name"] == plan.names.node_revocation:
                self._revocation = m
                continue
            after = pulumi.ResourceOptions(parent=self, depends_on=list(self.resources))
            self.resources.append(self._register(m, after, fields))
            if m["kind"] == "Job":
                self.registered = self.resources[-1]

    def _bound_config_map(self, m: Manifest, keys_text: pulumi.Output[str]) -> dict[str, Any]:
        """A registration ConfigMap's data and metadata, its Kubernetes name bound to that data (its Pulumi name,
        the manifest's, stays stable): a new key set replaces it, never updates it in place."""
        base = m["metadata"]["name"]
        data = pulumi.Output.all(**self._keys_data(m, keys_text))
        self._bound[base] = data.apply(lambda d: registration.bound_name(base, d))
        return {"data": data, "metadata": {**m["metadata"], "name": self._bound[base]}}

    def _keys_data(self, m: Manifest, keys_text: pulumi.Output[str]) -> dict[str, Any]:
        """The keys file a registration ConfigMap carries: all of them, or (sharded) its shard's."""
        name = m["metadata"]["name"]
        if name == self._plan.names.node_registration:
            sharded = registration.keys_sharded(self._plan)
            return {**m["data"], **({} if sharded else {registration.KEYS_FILE: keys_text})}
        i = next(i for i in range(registration.SHARDS) if registration.shard_name(self._plan, i) == name)
        if self._shards is None:  # split once, for every shard
            self._shards = keys_text.apply(registration.shard_texts)
        return {registration.shard_file(i): self._shards.apply(lambda texts: texts[i])}

    def _register(self, m: Manifest, opts: pulumi.ResourceOptions, fields: Optional[dict[str, Any]]) -> pulumi.Resource:
        annotations: Optional[dict[str, pulumi.Output[str]]] = None
        if m["kind"] == "Job":
            name = (
                self.job_name
                if m["metadata"]["name"] == self._plan.names.node_registration
                else self._keys_text.apply(lambda t: registration.job_name(self._plan, t, registration.REVOKE))
            )
            fields = {"metadata": {**m["metadata"], "name": name}, "spec": registration.bind_volumes(m, self._bound)}
            annotations = {**(self._rollout.annotations(m) or {}), DIGEST_ANNOTATION: self._digest}
        return register(m, opts, fields=fields, pod_annotations=annotations)

    def revoke_after(self, rolled: list[pulumi.Resource]) -> None:
        """The revocation Job, once `rolled` (every pool's objects) and the registration Job are done."""
        if self._revocation is not None:
            after = pulumi.ResourceOptions(parent=self, depends_on=[*self.resources, *rolled])
            self.resources.append(self._register(self._revocation, after, None))
        self.register_outputs({"jobName": self.job_name})
