"""No plaintext hop on a site (issue 32 part 7): a site (`role: site`) in process isolation on Flower 1.40+ serves
its SuperNodes' Runtime API over TLS like a hub's federation does, with certificates signed by a CA of the site's
own (it has the hub's CA certificate, never its key). Rendered by the Pulumi program under mocks with real key
material (RealTlsProvider); every command line parsed by the real Flower 1.41.0 and 1.42.0; the checks agree.
Negative controls: the same checks flag the plaintext hop of `insecure: true` (the explicit opt-in), which is
what every site rendered before (048b1d8)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from cryptography import x509
from pulumi.runtime import rpc

from flower_federation.checks.policies import run as check
from flower_federation.cli.offline import Run, reveal, run_program
from tests.support.certificates import ca_pem
from tests.support.flower import HTTP_ERA, PREVIOUS_HTTP_ERA, PROGRAMS
from tests.support.kube import started_containers
from tests.support.manifests import pod_spec, workloads
from tests.support.tls_provider import RealTlsProvider

NS = "flower-site"
HUB_CA = ca_pem("hub CA")
RUNTIME_POLICY = "flower-runtime-api-tls"
# Spelled out, not imported: the test reads as the pod does (and runs on a tree that lacks the site CA).
CA_FILE = "/etc/flower/ca/ca.crt"
RUNTIME_CA_FILE = "/etc/flower/runtime-ca/ca.crt"


def site(version: str, placement: str, **extra: Any) -> dict[str, Any]:
    """A site of two pools (alpha: 2 SuperNodes, beta: 1) in process isolation, trusting the hub's CA (PEM)."""
    pools = [
        {"name": name, "replicas": replicas, "images": {"superexecClientApp": f"flwr/superexec:{version}"}}
        for name, replicas in (("alpha", 2), ("beta", 1))
    ]
    hub = {"address": "hub.example.org", "port": 9092, "certificate": {"pem": HUB_CA}}
    raw = {
        "role": "site",
        "name": "clinic",
        "namespace": NS,
        "version": version,
        "isolationMode": "process",
        "superexecPlacement": placement,
        "supernodes": {"superlink": hub, "pools": pools},
    }
    return {**raw, **extra}


def _render(raw: dict[str, Any]) -> Run:
    return run_program({"federation": raw}, "dev", provider=RealTlsProvider())


def _secrets(r: Run) -> dict[str, dict[str, Any]]:
    return {m["metadata"]["name"]: m for m in r.manifests(show_secrets=True) if m["kind"] == "Secret"}


def _containers(objects: list[dict[str, Any]]) -> list[tuple[dict[str, Any], dict[str, Any], list[str]]]:
    return [(w, c, argv) for w, _, c, argv in started_containers(workloads(objects))]  # type: ignore[misc]


CASES = [(v, p) for v in (PREVIOUS_HTTP_ERA, HTTP_ERA) for p in ("distributed", "sidecar")]


@pytest.mark.parametrize(("version", "placement"), CASES)
def test_site_superexecs_dial_their_supernode_over_tls(version, placement, flower):
    """Every command line is accepted by that Flower's own parser; SuperNodes serve the Runtime API with
    --ssl-* (the CA file: the site's own), SuperExecs verify it with the site's CA, never the hub's; nothing
    dials with --insecure."""
    objects = _render(site(version, placement)).manifests(show_secrets=True)
    assert "--insecure" not in json.dumps(objects)
    seen = set()
    for w, c, argv in _containers(objects):
        parsed = flower[version].parse(PROGRAMS[c["name"]], argv)
        seen.add(c["name"])
        assert parsed["insecure"] is False, c["name"]
        mounts = {m["mountPath"] for m in c.get("volumeMounts", [])}
        if c["name"] == "supernode":
            assert parsed["root_certificates"] == CA_FILE  # the hub's CA, for the Fleet API
            assert parsed["ssl_ca_certfile"] == RUNTIME_CA_FILE
            assert parsed["ssl_certfile"] and parsed["ssl_keyfile"]
            assert {"/etc/flower/ca", "/etc/flower/runtime-ca", "/etc/flower/runtime-tls"} <= mounts
        else:
            assert c["name"] == "superexec-clientapp"
            assert parsed["root_certificates"] == RUNTIME_CA_FILE
            assert "/etc/flower/runtime-ca" in mounts and "/etc/flower/runtime-tls" not in mounts
            if placement == "distributed":  # its own pod: the hub's CA and the pool's key are not there
                volumes = {v["name"]: v for v in pod_spec(w)["volumes"]}
                assert "ca" not in volumes and "runtime-tls" not in volumes
                assert volumes["runtime-ca"]["secret"]["items"] == [{"key": "ca.crt", "path": "ca.crt"}]
    assert seen == {"supernode", "superexec-clientapp"}


def test_the_site_ca_is_its_own_secret_and_signs_each_pools_certificate():
    """The site-local CA (pulumi-tls) is a CA, not the hub's; its key is secret in Pulumi state and in no
    Kubernetes object; it signs each pool's certificate for the names its SuperExecs dial; each pool's
    `N-supernode-P-runtime-ca` Secret holds its certificate alone."""
    r = _render(site(HTTP_ERA, "distributed"))
    secrets = _secrets(r)
    (ca_reg,) = [g for g in r.registrations if g.type == "tls:index/selfSignedCert:SelfSignedCert"]
    assert ca_reg.name == "clinic-runtime-ca-cert" and ca_reg.inputs["isCaCertificate"] is True
    assert rpc.is_rpc_secret(ca_reg.inputs["privateKeyPem"])
    ca_key = reveal(ca_reg.inputs, True)["privateKeyPem"]
    assert ca_key.startswith("-----BEGIN") and ca_key not in json.dumps(r.manifests(show_secrets=True))
    signed = [g for g in r.registrations if g.type == "tls:index/locallySignedCert:LocallySignedCert"]
    assert len(signed) == 2 and all(rpc.is_rpc_secret(g.inputs["caPrivateKeyPem"]) for g in signed)
    hub = x509.load_pem_x509_certificate(HUB_CA.encode())
    cas = set()
    for pool in ("alpha", "beta"):
        ca_secret = secrets[f"clinic-supernode-{pool}-runtime-ca"]
        assert ca_secret["type"] == "Opaque" and set(ca_secret["stringData"]) == {"ca.crt"}
        ca = x509.load_pem_x509_certificate(ca_secret["stringData"]["ca.crt"].encode())
        assert ca.extensions.get_extension_for_class(x509.BasicConstraints).value.ca
        assert ca.public_key() != hub.public_key()
        cas.add(ca.fingerprint(ca.signature_hash_algorithm))  # type: ignore[arg-type]
        data = secrets[f"clinic-supernode-{pool}-runtime-tls"]["stringData"]
        cert = x509.load_pem_x509_certificate(data["tls.crt"].encode())
        cert.verify_directly_issued_by(ca)
        with pytest.raises(ValueError):
            cert.verify_directly_issued_by(hub)  # negative control: the check can fail
        names = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
        dns = names.get_values_for_type(x509.DNSName)
        assert f"*.clinic-supernode-{pool}.{NS}.svc.cluster.local" in dns and "localhost" in dns
    assert len(cas) == 1, "one site CA for every pool"


def test_checks_pass_on_the_site_and_flag_the_explicit_plaintext_opt_in():
    """`check`'s flower-runtime-api-tls finds nothing on the site's render; on `insecure: true` (the opt-in, the
    hop in plaintext as every site had it before) it flags each SuperExec and SuperNode: the check can fail."""
    tls = _render(site(HTTP_ERA, "distributed")).manifests(show_secrets=True)
    assert [v for v in check(tls) if v.policy == RUNTIME_POLICY] == []
    raw = site(HTTP_ERA, "distributed", insecure=True)
    raw["supernodes"]["superlink"].pop("certificate")
    plaintext = _render(raw).manifests(show_secrets=True)
    found = [v for v in check(plaintext) if v.policy == RUNTIME_POLICY]
    assert {v.message.split(":")[0] for v in found} >= {"--insecure towards $(FLOWER_SUPERNODE_HOST)"}
    assert not [m for m in plaintext if m["metadata"]["name"].endswith(("-runtime-ca", "-runtime-tls"))]


def test_a_site_in_subprocess_isolation_or_the_grpc_era_gets_no_runtime_ca():
    """No SuperExec hop (subprocess isolation), or one Flower cannot protect (1.26): no site CA, no pool
    certificate, nothing registered for them."""
    for raw in (site(HTTP_ERA, "sidecar", isolationMode="subprocess"), site("1.26.1", "distributed")):
        if raw["isolationMode"] == "subprocess":
            raw.pop("superexecPlacement")
            for pool in raw["supernodes"]["pools"]:
                pool.pop("images")
        r = _render(raw)
        assert not [g for g in r.registrations if g.type.startswith("tls:")]
        assert not [n for n in _secrets(r) if n.endswith(("-runtime-ca", "-runtime-tls"))]


def test_a_site_across_two_clusters_gets_its_ca_in_each_pools_cluster():
    """Pool beta in cluster `edge`: its certificate and the site CA's certificate are registered there (by the
    pool's own component, under edge's provider), signed by the one site CA; alpha's stay in the ambient one."""
    raw = site(HTTP_ERA, "distributed", clusters={"edge": {"context": "edge-admin"}})
    raw["supernodes"]["pools"][1]["cluster"] = "edge"
    r = _render(raw)
    where = {g.name: g.cluster for g in r.registrations if g.type == "kubernetes:core/v1:Secret"}
    assert where["clinic-supernode-alpha-runtime-ca"] == where["clinic-supernode-alpha-runtime-tls"] != "edge"
    assert where["clinic-supernode-beta-runtime-ca"] == where["clinic-supernode-beta-runtime-tls"] == "edge"
    secrets = _secrets(r)
    pems = {secrets[f"clinic-supernode-{p}-runtime-ca"]["stringData"]["ca.crt"] for p in ("alpha", "beta")}
    (ca_pem_text,) = pems
    ca = x509.load_pem_x509_certificate(ca_pem_text.encode())
    cert = secrets["clinic-supernode-beta-runtime-tls"]["stringData"]["tls.crt"].encode()
    x509.load_pem_x509_certificate(cert).verify_directly_issued_by(ca)
