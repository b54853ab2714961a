"""The tests' usual door to the core's renderer: a test that needs what the pure core makes of
a config (a plan, its Kubernetes objects, pod templates, the Secrets and the Certificate the
Pulumi shell builds with the core's builders, the stack outputs) asks here, so a change of the
core's rendering API is a change of this file (and of the few tests of the renderer itself).

Validation tests call `flower_federation.plan.load_plan` themselves (that name is the API of
validation); the Pulumi shell (`flower_federation.cli.offline.run_program`) is not rendered here.
"""

from __future__ import annotations

import copy
from typing import TYPE_CHECKING, Any, Optional

from flower_federation.builders import manifests, node_auth, trust
from flower_federation.plan import FederationPlan, load_plan
from flower_federation.plan.outputs import stack_outputs

if TYPE_CHECKING:
    from flower_federation.config import Pool

Manifest = dict[str, Any]
NodeKeys = Optional[dict[str, Any]]  # `nodeAuthKeys`: {pool: {slot: OpenSSH private key}}


def plan_of(raw: Any, stack: str = "dev", node_auth_keys: NodeKeys = None) -> FederationPlan:
    """The validated plan of a `federation` config value (a copy: the core never sees
    the caller's dict, so configs shared between tests stay as they are)."""
    return load_plan(copy.deepcopy(raw), stack, node_auth_keys)


def core_objects(raw: Any, stack: str = "dev", node_auth_keys: NodeKeys = None) -> list[Manifest]:
    """Every Kubernetes object the core renders for a config; see `plan_objects`."""
    return plan_objects(plan_of(raw, stack, node_auth_keys))


def plan_objects(plan: FederationPlan) -> list[Manifest]:
    """Every Kubernetes object of the federation (all clusters), in registration order,
    without what the shell fills with generated material: no Secret (TLS, CA, node keys:
    `server_secret_of`, `ca_secret_of`, `node_key_secret_of` build those) and no
    cert-manager Certificate (`certificate_of`). Tests compare this list with what the
    program registers minus its Secrets (tests/support/generated.py)."""
    return [m for m in manifests.render(plan).objects() if m["kind"] not in ("Secret", "Certificate")]


def superlink_objects(plan: FederationPlan) -> list[Manifest]:
    """The SuperLink's objects alone (its StatefulSet, Services, ..., NetworkPolicies)."""
    return manifests.render(plan).owned_by(manifests.SUPERLINK)


def pod_templates_of(plan: FederationPlan) -> list[Manifest]:
    """The pod template of every workload, as the core hands them to Pod Security."""
    return list(manifests.render(plan).pod_templates())  # type: ignore[arg-type]


def namespace_of(plan: FederationPlan) -> Manifest:
    """The Namespace object, labelled with the Pod Security level its pods meet."""
    return next(m for m in manifests.render(plan).objects() if m["kind"] == "Namespace")  # type: ignore[return-value]


def stack_outputs_of(plan: FederationPlan) -> dict[str, Any]:
    """The stack outputs (addresses, pools, flwr connection config, ...)."""
    return stack_outputs(plan)


# --- what the Pulumi shell registers: the core's objects, filled as the shell fills them ---


def server_secret_of(plan: FederationPlan, cert: Any, key: Any, ca: Any) -> Manifest:
    """The kubernetes.io/tls Secret of the SuperLink (generated TLS)."""
    return {**trust.server_secret(plan), "stringData": {"tls.crt": cert, "tls.key": key, "ca.crt": ca}}


def ca_secret_of(plan: FederationPlan, *, ca_pem: Any = None, ca_base64: Any = None) -> Manifest:
    """The CA Secret clients mount: from a PEM (generated CA) or copied base64 data."""
    if ca_base64 is not None:
        return {**trust.trust_secret(plan), "data": {"ca.crt": ca_base64}}
    return {**trust.trust_secret(plan), "stringData": {"ca.crt": ca_pem}}


def certificate_of(plan: FederationPlan) -> Manifest:
    """The cert-manager Certificate (tls.source: certManager)."""
    return trust.certificate(plan)


def node_key_slots(plan: FederationPlan, pool: Pool) -> list[str]:
    """The slots (ordinals, or node names for a DaemonSet) a pool needs a node key for."""
    return node_auth.slots(plan, pool)


def node_key_secret_of(plan: FederationPlan, pool: Pool, private_keys: dict[str, Any]) -> Manifest:
    """A pool's node-key Secret holding `private_keys` ({slot: key})."""
    return {**node_auth.key_secret(plan, pool), "stringData": node_auth.key_files(private_keys)}
