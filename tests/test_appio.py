"""The SuperExec hop (flower_federation/builders/appio.py): with Flower 1.41 and process isolation no
render has `--insecure` anywhere, whatever the TLS source and placement; the
gRPC era is unchanged (plaintext AppIo, confined by NetworkPolicy to its pool's SuperExecs
and SuperNodes); auth secrets are random, per pool, and never in a render without
--show-secrets; pools' Runtime API certificates chain to the CA their SuperExecs trust;
`pools[].runtimeApiSecret` is required exactly where it is used. Command lines are parsed
by the real Flower 1.41 (the full matrix: tests/test_flower_security_args.py)."""

from __future__ import annotations

import copy
import json

import pytest
from cryptography import x509

from flower_federation.builders import manifests
from flower_federation.builders.network_links import POD_NAME_LABEL
from flower_federation.cli.offline import SECRET_PLACEHOLDER, run_program
from flower_federation.config.errors import ConfigError
from tests.support.flower import GRPC_ERA, HTTP_ERA, PROGRAMS
from tests.support.kube import started_containers
from tests.support.manifests import workloads
from tests.support.netpol import allowed
from tests.support.render import core_objects, plan_of
from tests.support.stacks import base
from tests.support.tls_provider import RealTlsProvider

NS = "flower-sec"
CERT_MANAGER = {"source": "certManager", "certManager": {"issuerRef": {"name": "ca", "kind": "ClusterIssuer"}}}
EXISTING = {"source": "existingSecret", "existingSecret": "my-tls"}


def _with_runtime_secrets(raw: dict) -> dict:
    for pool in raw["supernodes"]["pools"]:
        pool["runtimeApiSecret"] = f"my-runtime-{pool['name']}"
    return raw


def process_configs() -> dict[str, dict]:
    out = {}
    for placement in ("sidecar", "distributed"):
        out[f"generate-{placement}"] = base(HTTP_ERA, isolation="process", placement=placement)
        out[f"certmanager-{placement}"] = base(HTTP_ERA, isolation="process", placement=placement, tls=CERT_MANAGER)
        out[f"existing-{placement}"] = _with_runtime_secrets(
            base(HTTP_ERA, isolation="process", placement=placement, tls=EXISTING)
        )
        out[f"nodeauth-{placement}"] = base(
            HTTP_ERA, isolation="process", placement=placement, nodeAuth={"enabled": True}
        )
    return out


PROCESS = process_configs()


def _argv_of_every_container(objects: list[dict]) -> list[tuple[str, list[str]]]:
    return [
        (c["name"], argv) for _, _, c, argv in started_containers([w for w in workloads(objects) if w["kind"] != "Job"])
    ]


@pytest.mark.parametrize("cid", sorted(PROCESS))
def test_no_insecure_anywhere_in_a_141_process_isolation_render(cid, flower):
    run = run_program({"federation": PROCESS[cid]}, "dev", provider=RealTlsProvider())
    objects = run.manifests(show_secrets=True)
    assert "--insecure" not in json.dumps(objects)
    containers = _argv_of_every_container(objects)
    assert {name for name, _ in containers} >= {"supernode", "superexec-clientapp"}
    for name, argv in containers:
        parsed = flower[HTTP_ERA].parse(PROGRAMS[name], argv)
        assert parsed["insecure"] is False, name
        assert parsed["superexec_auth_secret_file"], f"{name} runs without the SuperExec auth secret"
        if name == "supernode":
            assert parsed["ssl_certfile"] and parsed["ssl_keyfile"] and parsed["ssl_ca_certfile"]
        if name.startswith("superexec"):
            assert parsed["root_certificates"], name


def test_grpc_era_process_isolation_is_unchanged_plaintext_appio(flower):
    """1.26 cannot protect the hop: SuperExecs dial with --insecure and no auth secret
    (the real 1.26 parser knows neither flag), SuperNodes serve it without TLS."""
    for placement in ("sidecar", "distributed"):
        objects = core_objects(base(GRPC_ERA, isolation="process", placement=placement))
        assert not [m for m in objects if m["metadata"]["name"].endswith(("-superexec-auth", "-runtime-tls"))]
        for name, argv in _argv_of_every_container(objects):
            parsed = flower[GRPC_ERA].parse(PROGRAMS[name], argv)
            assert "superexec_auth_secret_file" not in parsed and "ssl_certfile" not in parsed or name == "superlink"
            if name.startswith("superexec"):
                assert parsed["insecure"] is True


@pytest.mark.parametrize("placement", ["sidecar", "distributed"])
def test_grpc_era_appio_is_confined_to_its_pod_pair(placement):
    """The plaintext ClientAppIo (9094) and ServerAppIo (9091) ports: SuperNode k takes
    9094 from SuperExec k of its pool alone (not its siblings, not another pool, a
    SuperLink or a pod of another app); the SuperLink takes 9091 from the ServerApp
    SuperExec alone; in sidecar placement neither from any other pod."""
    raw = base(GRPC_ERA, isolation="process", placement=placement)
    objects = core_objects(raw)
    name = raw["name"]

    def labels(component: str, pool: str | None = None, pod: str | None = None) -> dict[str, str]:
        out = {"app.kubernetes.io/instance": name, "app.kubernetes.io/component": component}
        out = {**out, "flower.flwr.ai/pool": pool} if pool else out
        return {**out, POD_NAME_LABEL: pod} if pod else out

    strangers = [labels("superlink"), labels("superexec-serverapp"), {"app": "other"}]
    for pool, other in (("alpha", "beta"), ("beta", "alpha")):
        replicas = next(p["replicas"] for p in raw["supernodes"]["pools"] if p["name"] == pool)
        for k in range(replicas):
            node = labels("supernode", pool, f"sec-supernode-{pool}-{k}")
            for j in range(replicas):
                superexec = labels("superexec-clientapp", pool, f"sec-superexec-{pool}-{j}")
                pair = placement == "distributed" and j == k
                assert allowed(objects, node, "ingress", superexec, 9094, "TCP", NS) == pair, (pool, k, j)
                if placement == "distributed":  # (sidecar: no SuperExec pods of their own)
                    assert allowed(objects, superexec, "egress", node, 9094, "TCP", NS) == pair, (pool, j, k)
            others = [labels("superexec-clientapp", other, f"sec-superexec-{other}-0"), labels("supernode", other)]
            for stranger in [*strangers, *others, labels("supernode", pool, f"sec-supernode-{pool}-{k}")]:
                assert not allowed(objects, node, "ingress", stranger, 9094, "TCP", NS), (pool, stranger)
    superlink = labels("superlink")
    serverapp = labels("superexec-serverapp")
    assert allowed(objects, superlink, "ingress", serverapp, 9091, "TCP", NS) == (placement == "distributed")
    for stranger in [labels("supernode", "alpha"), labels("superexec-clientapp", "alpha"), {"app": "other"}]:
        assert not allowed(objects, superlink, "ingress", stranger, 9091, "TCP", NS), stranger


def test_grpc_era_pairs_include_every_superexec_of_a_supernode():
    """superexec.replicas: 2 (the Helm chart's), gRPC era: SuperNode k takes 9094 from replica
    k of both SuperExec StatefulSets (N-superexec-P and N-superexec-P-1) and from no other
    replica; each of them sends only to SuperNode k."""
    raw = base(GRPC_ERA, isolation="process", placement="distributed")
    raw["supernodes"]["pools"][0]["superexec"] = {"replicas": 2}
    objects = core_objects(raw)
    pool = raw["supernodes"]["pools"][0]
    assert pool["name"] == "alpha" and pool["replicas"] == 3

    def labels(component: str, pod: str, extra: dict | None = None) -> dict[str, str]:
        out = {"app.kubernetes.io/instance": "sec", "app.kubernetes.io/component": component}
        return {**out, "flower.flwr.ai/pool": "alpha", POD_NAME_LABEL: pod, **(extra or {})}

    superexecs = [
        (c, j, labels("superexec-clientapp", f"{s}-{j}", {"flower.flwr.ai/superexec-replica": str(c)}))
        for c, s in enumerate(["sec-superexec-alpha", "sec-superexec-alpha-1"])
        for j in range(3)
    ]
    for k in range(3):
        node = labels("supernode", f"sec-supernode-alpha-{k}")
        for c, j, superexec in superexecs:
            assert allowed(objects, node, "ingress", superexec, 9094, "TCP", NS) == (j == k), (k, c, j)
            assert allowed(objects, superexec, "egress", node, 9094, "TCP", NS) == (j == k), (c, j, k)


def test_auth_secrets_are_random_per_pool_and_never_in_a_plain_render():
    run = run_program({"federation": PROCESS["nodeauth-distributed"]}, "dev", provider=RealTlsProvider())
    shown = {m["metadata"]["name"]: m for m in run.manifests(show_secrets=True) if m["kind"] == "Secret"}
    auth = {n: m["stringData"]["secret"] for n, m in shown.items() if n.endswith("-superexec-auth")}
    assert sorted(auth) == [
        "sec-superlink-superexec-auth",
        "sec-supernode-alpha-superexec-auth",
        "sec-supernode-beta-superexec-auth",
    ]
    assert len(set(auth.values())) == 3 and all(len(v) >= 32 for v in auth.values())
    plain = json.dumps(run.manifests()) + json.dumps(run.stack_outputs_json())
    for name, value in auth.items():
        assert value not in plain, f"{name}'s value is in the render without --show-secrets"
    for m in run.manifests():
        if m["metadata"]["name"] in auth:
            assert m["stringData"] == {"secret": SECRET_PLACEHOLDER}
    passwords = [r for r in run.registrations if r.type == "random:index/randomPassword:RandomPassword"]
    assert len(passwords) == 3 and all(r.inputs["special"] is False for r in passwords)


@pytest.mark.parametrize("cid", ["generate-distributed", "generate-sidecar"])
def test_pool_certificates_chain_to_the_ca_their_superexecs_trust(cid):
    run = run_program({"federation": PROCESS[cid]}, "dev", provider=RealTlsProvider())
    plan = plan_of(PROCESS[cid])
    runtime = plan.runtime_trust
    assert runtime is not None and runtime.ca_secret == "sec-ca"
    secrets = {m["metadata"]["name"]: m for m in run.manifests(show_secrets=True) if m["kind"] == "Secret"}
    ca = x509.load_pem_x509_certificate(secrets[runtime.ca_secret]["stringData"]["ca.crt"].encode())
    for pool in plan.spec.supernodes.pools:
        data = secrets[runtime.pool_secret(pool.name)]["stringData"]
        cert = x509.load_pem_x509_certificate(data["tls.crt"].encode())
        cert.verify_directly_issued_by(ca)
        names = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
        svc = f"sec-supernode-{pool.name}"
        assert f"*.{svc}.{NS}.svc.cluster.local" in names.get_values_for_type(x509.DNSName)
        assert svc in names.get_values_for_type(x509.DNSName)


def test_certmanager_issues_one_certificate_per_pool_from_the_federation_issuer():
    objects = manifests.render(plan_of(PROCESS["certmanager-distributed"])).objects()
    certs = {m["metadata"]["name"]: m["spec"] for m in objects if m["kind"] == "Certificate"}
    assert sorted(certs) == ["sec-superlink", "sec-supernode-alpha-runtime-tls", "sec-supernode-beta-runtime-tls"]
    issuer = certs["sec-superlink"]["issuerRef"]
    for pool in ("alpha", "beta"):
        spec = certs[f"sec-supernode-{pool}-runtime-tls"]
        assert spec["issuerRef"] == issuer and spec["secretName"] == f"sec-supernode-{pool}-runtime-tls"
        assert f"*.sec-supernode-{pool}.{NS}.svc.cluster.local" in spec["dnsNames"]


def _exposed_beta(raw: dict) -> dict:
    """Pool beta (one SuperNode) exposed to SuperExecs outside the cluster by a NodePort Service."""
    raw = copy.deepcopy(raw)
    beta = raw["supernodes"]["pools"][1]
    beta["service"] = {"type": "NodePort", "externalNames": ["beta.edge.example.org", "203.0.113.7"]}
    beta["networkPolicy"] = {"allowExternal": True}
    return raw


def test_an_exposed_pools_certificate_names_what_outside_superexecs_dial():
    """generate: the pool's certificate carries service.externalNames (a name, an IP); certManager: its
    Certificate asks for them; the other pool's certificate does not."""
    run = run_program({"federation": _exposed_beta(PROCESS["generate-distributed"])}, "dev", provider=RealTlsProvider())
    secrets = {m["metadata"]["name"]: m for m in run.manifests(show_secrets=True) if m["kind"] == "Secret"}
    for pool, outside in (("beta", True), ("alpha", False)):
        pem = secrets[f"sec-supernode-{pool}-runtime-tls"]["stringData"]["tls.crt"].encode()
        sans = x509.load_pem_x509_certificate(pem).extensions.get_extension_for_class(x509.SubjectAlternativeName)
        assert ("beta.edge.example.org" in sans.value.get_values_for_type(x509.DNSName)) is outside
        ips = {str(ip) for ip in sans.value.get_values_for_type(x509.IPAddress)}
        assert ips == ({"127.0.0.1", "203.0.113.7"} if outside else {"127.0.0.1"})
    objects = manifests.render(plan_of(_exposed_beta(PROCESS["certmanager-distributed"]))).objects()
    spec = next(m["spec"] for m in objects if m["metadata"]["name"] == "sec-supernode-beta-runtime-tls")
    assert "beta.edge.example.org" in spec["dnsNames"] and spec["ipAddresses"] == ["127.0.0.1", "203.0.113.7"]


def test_runtime_api_secret_is_required_exactly_where_it_is_used():
    missing = base(HTTP_ERA, isolation="process", tls=EXISTING)
    with pytest.raises(ConfigError) as err:
        plan_of(missing)
    paths = {p.path: p.message for p in err.value.problems}
    at = "federation.supernodes.pools[{}].runtimeApiSecret"
    assert set(paths) == {at.format(0), at.format(1)}
    assert "*.sec-supernode-alpha.flower-sec.svc.cluster.local" in paths[at.format(0)]
    for raw in (
        base(HTTP_ERA, isolation="process"),  # generated for you
        base(GRPC_ERA, isolation="process", tls=EXISTING),  # no TLS on this hop
        base(HTTP_ERA, tls=EXISTING),  # subprocess isolation: no SuperExec hop
    ):
        with pytest.raises(ConfigError) as err:
            plan_of(_with_runtime_secrets(copy.deepcopy(raw)))
        assert {p.path for p in err.value.problems} == {at.format(0), at.format(1)}
        assert "would be ignored" in err.value.problems[0].message
    plan = plan_of(PROCESS["existing-sidecar"])
    assert plan.runtime_trust is not None and plan.runtime_trust.pool_secret("beta") == "my-runtime-beta"
