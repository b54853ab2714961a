"""TLS in the rendered manifests: the cert-manager Certificate field by field, SANs
that cover every address a client dials, the server key mounted only into the SuperLink
container, clients trusting the CA Secret only, and no TLS at all with insecure: true."""

from __future__ import annotations

import pytest

from flower_federation.builders import appio, trust
from flower_federation.config.errors import ConfigError
from tests.support.manifests import arg_after, containers, get, mounts_by_name, volumes_by_name, workload_container
from tests.support.render import certificate_of, plan_of
from tests.support.security_matrix import NAME, NS, TLS_STACK_IDS, security_objects, security_plan
from tests.support.stacks import GRPC_ERA, base

POOL = "flower.flwr.ai/pool"


@pytest.mark.parametrize("sid", ["grpc-certmanager", "http-certmanager"])
def test_cert_manager_certificate_shape(sid):
    plan = security_plan(sid)
    assert (plan.trust.source, plan.trust.trust_source) == ("certManager", "copyFromServerSecret")
    cert = certificate_of(plan)
    assert cert["apiVersion"] == "cert-manager.io/v1" and cert["kind"] == "Certificate"
    meta = cert["metadata"]
    assert (meta["name"], meta["namespace"]) == (f"{NAME}-superlink", NS)
    assert meta["annotations"] == {"pulumi.com/waitFor": "condition=Ready"}
    spec = cert["spec"]
    assert spec["secretName"] == plan.trust.server_secret == f"{NAME}-superlink-tls"
    assert (spec["duration"], spec["renewBefore"]) == ("43800h", "360h")
    assert spec["issuerRef"] == {"name": "ca-issuer", "kind": "ClusterIssuer", "group": "cert-manager.io"}
    svc = f"{NAME}-superlink"
    assert spec["dnsNames"] == [
        svc,
        f"{svc}.{NS}",
        f"{svc}.{NS}.svc",
        f"{svc}.{NS}.svc.cluster.local",
        "localhost",
        "flower.example.com",
    ]
    assert spec["ipAddresses"] == ["127.0.0.1"]
    assert spec["privateKey"]["algorithm"] == "ECDSA"
    assert "server auth" in spec["usages"]
    # The service the certificate names is the one the render has.
    assert get(security_objects(sid), "Service", svc)["metadata"]["namespace"] == NS


def test_cert_manager_certificate_honours_its_settings():
    raw = base(
        GRPC_ERA,
        namespace="ml",
        clusterDomain="corp.internal",
        tls={
            "source": "certManager",
            "certManager": {"issuerRef": {"name": "internal-ca"}, "duration": "2160h", "renewBefore": "720h"},
            "dnsNames": ["flower.example.com", "localhost", "*.flower.example.com"],
            "ipAddresses": ["10.0.0.7", "127.0.0.1", "2001:db8::1"],
        },
    )
    spec = certificate_of(plan_of(raw))["spec"]
    assert (spec["duration"], spec["renewBefore"]) == ("2160h", "720h")
    assert spec["issuerRef"] == {"name": "internal-ca", "kind": "Issuer", "group": "cert-manager.io"}
    assert spec["dnsNames"] == [
        "sec-superlink",
        "sec-superlink.ml",
        "sec-superlink.ml.svc",
        "sec-superlink.ml.svc.corp.internal",
        "localhost",
        "flower.example.com",
        "*.flower.example.com",
    ]
    assert spec["ipAddresses"] == ["127.0.0.1", "10.0.0.7", "2001:db8::1"]


def test_cert_manager_common_name_fits_the_64_byte_limit():
    """cert-manager's webhook refuses a Certificate whose commonName exceeds 64 bytes
    (X.509 ub-common-name). A legal name and namespace must not produce one: either the
    CN stays within the limit or validation says why before anything is applied."""
    raw = base(
        name="flower-production",
        namespace="federated-learning-prod",
        tls={"source": "certManager", "certManager": {"issuerRef": {"name": "ca"}}},
    )
    try:
        plan = plan_of(raw)
    except ConfigError:
        return
    cert = certificate_of(plan)
    assert len(cert["spec"].get("commonName", "").encode()) <= 64, cert["spec"]["commonName"]
    assert "flower-production-superlink.federated-learning-prod.svc.cluster.local" in cert["spec"]["dnsNames"]


@pytest.mark.parametrize("sid", TLS_STACK_IDS)
def test_certificate_names_cover_every_address_clients_dial(sid):
    """Whatever the SuperNodes and SuperExecs dial with TLS is a SAN of the server
    certificate (all TLS sources share these SANs)."""
    plan = security_plan(sid)
    dns, ips = set(trust.superlink_dns_names(plan)), set(trust.superlink_ip_addresses(plan))
    dialled = []
    for w, c in containers(security_objects(sid)):
        args = c["args"]
        if "--root-certificates" in args and c["name"] == "superexec-clientapp":
            # Its SuperNode's Runtime API, served with the pool's own certificate.
            pool = next(p for p in plan.spec.supernodes.pools if p.name == w["metadata"]["labels"][POOL])
            env = {e["name"]: e.get("value", "") for e in c.get("env", [])}
            host = arg_after(args, "--runtime-api-address").rsplit(":", 1)[0]
            host = host.replace("$(FLOWER_SUPERNODE_HOST)", env.get("FLOWER_SUPERNODE_HOST", "")).replace(
                "$(FLOWER_POD_INDEX)", "0"
            )
            assert _covered(host, appio.pool_dns_names(plan, pool), appio.pool_ip_addresses(plan, pool)), host
        elif "--root-certificates" in args:
            flag = "--superlink" if "--superlink" in args else "--runtime-api-address"
            dialled.append(arg_after(args, flag).rsplit(":", 1)[0])
    assert dialled
    for host in dialled:
        assert host in dns | ips, host


def _covered(host: str, names: list[str], ips: list[str]) -> bool:
    """A certificate with these SANs is valid for `host` (a wildcard covers one label)."""
    if host in ips or host in names:
        return True
    first, _, rest = host.partition(".")
    return bool(first) and f"*.{rest}" in names


TRUST = {
    # stack suffix -> (server Secret, CA Secret, CA key)
    "generate": ("sec-superlink-tls", "sec-ca", "ca.crt"),
    "nodeauth": ("sec-superlink-tls", "sec-ca", "ca.crt"),
    "certmanager": ("sec-superlink-tls", "sec-ca", "ca.crt"),
    "existing-copy": ("my-tls", "sec-ca", "ca.crt"),
    "existing-ca": ("my-tls", "my-ca", "root.pem"),
}


@pytest.mark.parametrize("sid", TLS_STACK_IDS)
def test_tls_material_is_mounted_where_it_belongs(sid):
    plan, objects = security_plan(sid), security_objects(sid)
    suffix = sid.split("-", 1)[1]
    if suffix in TRUST:
        assert (plan.trust.server_secret, plan.trust.ca_secret, plan.trust.ca_key) == TRUST[suffix]
    server, ca, ca_key = plan.trust.server_secret, plan.trust.ca_secret, plan.trust.ca_key
    assert server != ca
    ca_volume = {
        "name": "ca",
        "secret": {"secretName": ca, "defaultMode": 0o444, "items": [{"key": ca_key, "path": "ca.crt"}]},
    }
    link = get(objects, "StatefulSet", f"{NAME}-superlink")
    vols = volumes_by_name(link)
    assert vols["tls"] == {
        "name": "tls",
        "secret": {
            "secretName": server,
            "defaultMode": 0o440,
            "items": [{"key": "tls.crt", "path": "tls.crt"}, {"key": "tls.key", "path": "tls.key"}],
        },
    }
    assert vols["ca"] == ca_volume
    main = workload_container(objects, "StatefulSet", f"{NAME}-superlink", "superlink")
    mounts = mounts_by_name(main)
    assert mounts["tls"] == {"name": "tls", "mountPath": "/etc/flower/tls", "readOnly": True}
    assert mounts["ca"] == {"name": "ca", "mountPath": "/etc/flower/ca", "readOnly": True}
    assert arg_after(main["args"], "--ssl-certfile") == "/etc/flower/tls/tls.crt"
    assert arg_after(main["args"], "--ssl-keyfile") == "/etc/flower/tls/tls.key"
    assert arg_after(main["args"], "--ssl-ca-certfile") == "/etc/flower/ca/ca.crt"
    assert "--insecure" not in main["args"]
    # Everything else sees only the CA Secret, never the server key.
    for w, c in containers(objects):
        vols = volumes_by_name(w)
        if w is not link:
            assert all(v.get("secret", {}).get("secretName") != server for v in vols.values()), w["metadata"]["name"]
        if c is main:
            continue
        for m in c.get("volumeMounts", []):
            secret = vols[m["name"]].get("secret")
            # Besides the CA: node keys, a pool's Runtime API certificate, SuperExec auth.
            if secret and m["name"] not in ("node-auth", "runtime-tls", "superexec-auth"):
                assert vols[m["name"]] == ca_volume, (w["metadata"]["name"], c["name"])
                assert m == {"name": "ca", "mountPath": "/etc/flower/ca", "readOnly": True}
        if c["name"] == "supernode":
            assert "ca" in mounts_by_name(c)
            assert arg_after(c["args"], "--root-certificates") == "/etc/flower/ca/ca.crt"
        if "--root-certificates" in c["args"]:
            assert arg_after(c["args"], "--root-certificates") == "/etc/flower/ca/ca.crt"
            assert "ca" in mounts_by_name(c), (w["metadata"]["name"], c["name"])


@pytest.mark.parametrize("sid", ["grpc-insecure", "http-insecure"])
def test_insecure_has_no_tls_anywhere(sid):
    plan, objects = security_plan(sid), security_objects(sid)
    assert plan.trust is None
    for w, c in containers(objects):
        assert not [v for v in w["spec"]["template"]["spec"]["volumes"] if "secret" in v]
        assert not [a for a in c["args"] if a.startswith("--ssl-") or a == "--root-certificates"]
        assert not {"tls", "ca"} & set(mounts_by_name(c))
        if c["name"] in ("superlink", "supernode"):
            assert "--insecure" in c["args"]
