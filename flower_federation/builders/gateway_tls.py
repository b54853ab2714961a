"""The Gateway listener's own certificate (HTTP era, the Gateway terminating TLS): from
the federation's CA, carrying the public hostname only (not localhost, not the in-cluster
Service names the SuperLink's certificate has), in its own Secret, the one the
ReferenceGrant names (gateway.py). Sites verify it with the CA they already trust; the
SuperLink's key never leaves its pod.

- generate: a kubernetes.io/tls Secret `N-gateway-tls` without data; the Pulumi shell
  (shell/gateway_tls.py) fills it from a pulumi-tls key and a certificate the
  federation's CA signs.
- certManager: a Certificate `N-gateway` from the federation's issuer into that Secret.
- existingSecret: the user's Secret (`listenerSecretName`): nothing rendered.
"""

from __future__ import annotations

from flower_federation.builders import gateway, trust
from flower_federation.kube.naming import SUPERLINK
from flower_federation.kube.objects import Manifest
from flower_federation.plan import FederationPlan


def dns_names(plan: FederationPlan) -> list[str]:
    """What the listener's certificate carries: the name sites dial, nothing else."""
    return [gateway.settings(plan).hostname]


def common_name(plan: FederationPlan) -> str:
    # Within X.509's 64 bytes: the StatefulSet rule keeps `<name>-superlink` within 52. The SAN is the name.
    return f"{plan.names.superlink}-gateway"


def objects(plan: FederationPlan) -> list[Manifest]:
    secret = gateway.listener_secret(plan)
    if secret is None or not plan.runs_superlink:
        return []
    assert plan.trust is not None
    meta = plan.meta(secret, SUPERLINK)
    if plan.trust.source == "generate":
        return [{"apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/tls", "metadata": meta}]
    if plan.trust.source == "certManager":
        certificate = trust.cert_manager_certificate(
            plan, plan.meta(plan.names.gateway_certificate, SUPERLINK), secret, common_name(plan), dns_names(plan), []
        )
        del certificate["spec"]["ipAddresses"]  # a name, no address
        return [certificate]
    return []
