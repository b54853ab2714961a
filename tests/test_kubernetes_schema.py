"""Every object the core renders for the security stacks and the dev stack passes the
strict Kubernetes 1.34 schema; so do the Secrets the Pulumi shell builds with the core's
builders, which carry the names and keys the pods mount."""

from __future__ import annotations

import pytest

from tests.support.render import ca_secret_of, node_key_secret_of, node_key_slots, server_secret_of
from tests.support.security_matrix import DEV, NAME, STACK_IDS, TLS_STACK_IDS, security_objects, security_plan


@pytest.mark.parametrize("sid", STACK_IDS + [DEV])
def test_every_object_passes_the_strict_kubernetes_schema(sid, k8s_validate):
    objects = security_objects(sid)
    assert {"Namespace", "StatefulSet", "Service", "ServiceAccount", "NetworkPolicy", "PodDisruptionBudget"} <= {
        o["kind"] for o in objects
    }
    for obj in objects:
        assert obj["apiVersion"] != "cert-manager.io/v1"  # never in all_objects
        k8s_validate(obj)


@pytest.mark.parametrize("sid", TLS_STACK_IDS)
def test_shell_made_secrets_pass_the_schema_and_match_the_names_pods_mount(sid, k8s_validate):
    """The TLS and node-key Secrets come from the Pulumi shell, built by these pure
    builders; they must be valid and carry the names and keys the pods reference."""
    plan = security_plan(sid)
    server = server_secret_of(plan, "CERT", "KEY", "CA")
    ca = ca_secret_of(plan, ca_pem="CA")
    copied = ca_secret_of(plan, ca_base64="Q0E=")
    for secret in (server, ca, copied):
        k8s_validate(secret)
    assert server["metadata"]["name"] == plan.trust.server_secret and server["type"] == "kubernetes.io/tls"
    assert set(server["stringData"]) == {"tls.crt", "tls.key", "ca.crt"}
    assert ca["metadata"]["name"] == plan.trust.ca_secret and set(ca["stringData"]) == {"ca.crt"}
    assert copied["data"] == {"ca.crt": "Q0E="} and "stringData" not in copied
    if plan.spec.node_auth.enabled:
        for pool in plan.spec.supernodes.pools:
            slots = node_key_slots(plan, pool)
            secret = node_key_secret_of(plan, pool, {s: f"key-{s}" for s in slots})
            k8s_validate(secret)
            assert secret["metadata"]["name"] == f"{NAME}-supernode-{pool.name}-node-keys"
