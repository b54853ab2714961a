"""What the real Pulumi program registers, and where (under mocks): TLS material under
the TlsTrust component, node keys under their pool's NodeKeys component, SuperNodes after
their keys; editing one pool changes only that pool's resources; invalid security config
registers nothing."""

from __future__ import annotations

import json

import pulumi
import pytest

from flower_federation.cli.offline import SECRET_TYPE, Run, run_program
from tests.support.program import (
    CERTIFICATE_TYPE,
    NS,
    PREVIEW,
    STACKS,
    b64,
    created_secrets,
    plan_for,
    recording_entry,
    secret_files,
    tree,
)
from tests.support.stacks import HTTP_ERA, base, program_config

TLS_TRUST_TYPE = "flower-federation:index:TlsTrust"
ROOT = "-----BEGIN CERTIFICATE-----\nroot\n-----END CERTIFICATE-----\n"


@PREVIEW
@pytest.mark.parametrize("stack", ["http-nodeauth", "http-certmanager", "http-existing-ca"])
def test_tls_and_node_key_resources_are_parented_by_their_components(stack, preview):
    cfg = program_config(stack)
    plan = plan_for(cfg, stack)
    run = run_program(
        cfg,
        stack,
        preview=preview,
        entry=recording_entry(),
        existing={(SECRET_TYPE, f"{NS}/my-ca"): {"data": {"root.pem": b64(ROOT)}}},
    )
    nodes = tree(run)
    by_urn = {n["urn"]: key for key, n in nodes.items()}
    [tls_key] = [k for k in nodes if k.endswith(f"@{TLS_TRUST_TYPE}")]
    tls_urn = nodes[tls_key]["urn"]
    assert "::flower-federation:index:Federation$flower-federation:index:TlsTrust::sec-tls" in tls_urn
    tls_children = {key for key, n in nodes.items() if n["parent"] == tls_urn}
    # The CA and server keys and certificates (node keys belong to their pools, below).
    expected = {
        f"{r.name}@{r.type}"
        for r in run.registrations
        if r.type.startswith("tls:") and not r.name.startswith("sec-pool-")
    }
    if plan.trust.source == "generate":
        expected |= {f"{plan.trust.server_secret}@{SECRET_TYPE}", f"{plan.trust.ca_secret}@{SECRET_TYPE}"}
        assert len(expected) == 7
    if plan.trust.source == "certManager":
        expected |= {f"{plan.names.certificate}@{CERTIFICATE_TYPE}", f"{plan.trust.ca_secret}@{SECRET_TYPE}"}
    expected |= {f"{r.name}@{r.type}" for r in run.registrations if r.read_id}
    assert tls_children == expected
    for key in tls_children:
        assert f"::{TLS_TRUST_TYPE}$" in nodes[key]["urn"]
    # Pools: the NodeKeys component under its pool, keys and their Secret under it.
    for pool in plan.spec.supernodes.pools:
        pool_key = f"sec-pool-{pool.name}@flower-federation:index:SuperNodePool"
        workload_key = f"{plan.names.pool(pool.name)}@kubernetes:apps/v1:{plan.spec.mode}"
        assert nodes[workload_key]["parent"] == nodes[pool_key]["urn"]
        if not plan.spec.node_auth.enabled:
            assert not [k for k in nodes if "NodeKeys" in k]
            continue
        keys_key = f"sec-pool-{pool.name}-node-keys@flower-federation:index:NodeKeys"
        assert nodes[keys_key]["parent"] == nodes[pool_key]["urn"]
        secret_key = f"{plan.names.node_keys_secret(pool.name)}@{SECRET_TYPE}"
        assert nodes[secret_key]["parent"] == nodes[keys_key]["urn"]
        assert "::flower-federation:index:NodeKeys$kubernetes:core/v1:Secret::" in nodes[secret_key]["urn"]
        generated = [k for k, n in nodes.items() if k.startswith(f"sec-pool-{pool.name}-node-keys-")]
        assert len(generated) == (pool.replicas or 0)
        assert all(nodes[k]["parent"] == nodes[keys_key]["urn"] for k in generated)
        # SuperNodes start only after their keys exist.
        assert nodes[secret_key]["urn"] in nodes[workload_key]["depends_on"]
    # Node keys never sit under TlsTrust, TLS material never under a pool.
    for key, n in nodes.items():
        if key.startswith("sec-pool-") and key.endswith("@tls:index/privateKey:PrivateKey"):
            assert by_urn[n["parent"]].endswith("@flower-federation:index:NodeKeys")


def test_editing_one_pool_changes_only_that_pools_resources():
    stack = "http-nodeauth"
    before_raw = STACKS[stack]
    after_raw = json.loads(json.dumps(before_raw))
    after_raw["supernodes"]["pools"][0]["replicas"] = 4  # alpha
    before = run_program({"federation": before_raw}, stack)
    after = run_program({"federation": after_raw}, stack)

    def identity(run: Run) -> dict[tuple[str, str], str]:
        return {(m["kind"], m["metadata"]["name"]): json.dumps(m, sort_keys=True) for m in run.manifests(True)}

    old, new = identity(before), identity(after)
    # The key set grew, so registration is a new Job (named after the set's digest) with
    # the new set in its ConfigMap: nothing else outside the pool changes.
    # Its ConfigMap is bound to its content (issue 32 (d)): a new one, by name, with the new set.
    registration = set(old.keys() ^ new.keys())
    assert {k[0] for k in old.keys() ^ new.keys()} == {"Job", "ConfigMap"}
    assert sorted(k[1].rsplit("-", 1)[0] for k in registration if k[0] == "ConfigMap") == ["sec-node-registration"] * 2
    old = {k: v for k, v in old.items() if k not in registration}
    new = {k: v for k, v in new.items() if k not in registration}
    assert old.keys() == new.keys()
    changed = {k for k in old if old[k] != new[k]}
    assert {("StatefulSet", "sec-supernode-alpha"), ("Secret", "sec-supernode-alpha-node-keys")} <= changed
    labels = {(m["kind"], m["metadata"]["name"]): m["metadata"].get("labels", {}) for m in after.manifests()}
    for key in changed:
        assert labels[key].get("flower.flwr.ai/pool") == "alpha", key
    alpha_keys = secret_files(created_secrets(after)["sec-supernode-alpha-node-keys"])
    assert sorted(alpha_keys) == [f"node-{i}.key" for i in range(4)]
    added = {(r.type, r.name) for r in after.registrations} - {(r.type, r.name) for r in before.registrations}
    assert added == {("tls:index/privateKey:PrivateKey", "sec-pool-alpha-node-keys-3")}
    assert after.outputs["nodeAuth"]["publicKeys"]["beta"] == before.outputs["nodeAuth"]["publicKeys"]["beta"]
    assert after.outputs["nodeAuth"]["registerScript"].count("\nregister ") == 5


@pytest.mark.parametrize(
    "extra, expected",
    [
        (
            {"insecure": True, "nodeAuth": {"enabled": True}},
            "federation.nodeAuth.enabled: node authentication needs TLS",
        ),
        ({"tls": {"source": "existingSecret"}}, "federation.tls.existingSecret: name the kubernetes.io/tls Secret"),
        ({"tls": {"source": "certManager"}}, "federation.tls.certManager.issuerRef: name the cert-manager Issuer"),
        (
            {"insecure": True, "tls": {"dnsNames": ["flower.example.com"]}},
            "federation.tls: TLS settings have no effect with insecure: true",
        ),
        ({"nodeAuth": {"enabled": True, "keySource": "config"}}, "nodeAuthKeys: missing"),
    ],
    ids=["nodeauth-insecure", "existing-unnamed", "certmanager-no-issuer", "tls-and-insecure", "keys-missing"],
)
def test_invalid_security_config_registers_nothing(extra, expected):
    run = Run()
    with pytest.raises(pulumi.RunError) as err:
        run_program({"federation": base(HTTP_ERA, **extra)}, "bad", into=run)
    assert expected in str(err.value)
    assert "invalid flower-federation config" in str(err.value)
    assert run.registrations == []
