"""Sites: the real program under Pulumi mocks for a hub, sites and a stack spanning two
clusters. What each stack registers, which cluster (provider) each object goes to, what
crosses the boundary through StackReferences and outputs (addresses, CA certificates,
public keys; never a private key or a kubeconfig), and declarative node registration."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import pulumi
import pytest
import yaml

from flower_federation.builders import registration
from flower_federation.cli.offline import Run, run_program
from tests.support.certificates import ca_pem
from tests.support.manifests import by_kind, get
from tests.support.tls_provider import RealTlsProvider

GOLDEN = Path(__file__).resolve().parent / "golden"
HUB_STACK = "acme/flower-federation/hub"
SITE_STACK = "acme/flower-federation/site-chart"
PROVIDER_TYPE = "pulumi:providers:kubernetes"


def settings(name: str) -> dict[str, Any]:
    """The federation config of a golden stack file."""
    return yaml.safe_load((GOLDEN / f"Pulumi.{name}.yaml").read_text())["config"]["flower-federation:federation"]


def run(raw: dict[str, Any], stack: str = "dev", **kw: Any) -> Run:
    return run_program({"federation": raw}, stack, **kw)


def args_of(m: dict[str, Any], container: str = "supernode") -> list[str]:
    c = next(c for c in m["spec"]["template"]["spec"]["containers"] if c["name"] == container)
    return list(c["args"])


def flag(argv: list[str], name: str) -> str:
    return argv[argv.index(name) + 1]


# --- a site, as the Helm chart's values describe it ------------------------------------


def test_a_site_from_chart_values_dials_the_hub_and_trusts_its_ca_from_the_existing_secret() -> None:
    hub_ca = "-----BEGIN CERTIFICATE-----\nHUB\n-----END CERTIFICATE-----\n"
    existing = {
        ("kubernetes:core/v1:Secret", "flower/my-custom-tls-secret-name"): {
            "data": {"ca.crt": base64.b64encode(hub_ca.encode()).decode()}
        }
    }
    result = run(settings("site-chart"), "site-a", existing=existing)
    objects = result.manifests(show_secrets=True)
    assert not [m for m in objects if "superlink" in m["metadata"]["name"]], "a site runs no SuperLink"
    sts = get(objects, "StatefulSet", "hospital-a-supernode-ward")
    argv = args_of(sts)
    assert flag(argv, "--superlink") == "my-superlink.example.com:9092"
    assert flag(argv, "--root-certificates") == "/etc/flower/ca/ca.crt"
    # The chart's existingSecret: read at deploy time, its ca.crt copied into the site's own CA Secret.
    assert any(r.read_id == "flower/my-custom-tls-secret-name" for r in result.registrations)
    ca = get(objects, "Secret", "hospital-a-ca")
    assert base64.b64decode(ca["data"]["ca.crt"]).decode() == hub_ca
    # No way in; out only to DNS and the hub's port.
    policy = get(objects, "NetworkPolicy", "hospital-a-supernode-ward")
    assert policy["spec"]["ingress"] == []
    hub_rule = policy["spec"]["egress"][0]
    assert hub_rule == {"ports": [{"port": 9092, "protocol": "TCP"}]}
    # Only public keys leave the site.
    assert set(result.outputs["nodeAuth"]) == {"publicKeys"}
    assert set(result.outputs["nodeAuth"]["publicKeys"]["ward"]) == {"0", "1"}
    assert "caCertificate" not in result.outputs and "flwrConfig" not in result.outputs
    assert result.outputs["superlink"] == {"fleetAddress": "my-superlink.example.com:9092"}


def test_a_site_reads_the_hubs_address_and_ca_through_a_stack_reference() -> None:
    hub_outputs = json.loads((GOLDEN / "hub.outputs.json").read_text())
    hub_outputs["caCertificate"] = ca_pem()
    result = run(settings("site-from-hub"), "site-b", stack_outputs={HUB_STACK: hub_outputs})
    refs = [r for r in result.registrations if r.type == "pulumi:pulumi:StackReference"]
    assert [r.name for r in refs] == [HUB_STACK]
    objects = result.manifests(show_secrets=True)
    argv = args_of(get(objects, "StatefulSet", "hospital-b-supernode-gpu"))
    assert flag(argv, "--superlink") == "fl.example.org:443"
    assert get(objects, "Secret", "hospital-b-ca")["stringData"] == {"ca.crt": hub_outputs["caCertificate"]}
    # Egress to the hub's port, only within the CIDRs the site names.
    policy = get(objects, "NetworkPolicy", "hospital-b-supernode-gpu")
    assert policy["spec"]["egress"][0] == {
        "to": [{"ipBlock": {"cidr": "203.0.113.0/24"}}],
        "ports": [{"port": 443, "protocol": "TCP"}],
    }


def test_a_hub_stack_without_the_outputs_a_site_needs_is_a_clear_error_and_nothing_is_created() -> None:
    into = Run()
    with pytest.raises(pulumi.RunError) as err:
        run(settings("site-from-hub"), "site-b", stack_outputs={HUB_STACK: {"role": "hub"}}, into=into)
    text = str(err.value)
    assert "supernodes.superlink.certificate.fromStack: stack 'acme/flower-federation/hub' has no output " in text
    assert "superlink.externalAddress" in text and "caCertificate" in text
    assert "Traceback" not in text
    assert into.kubernetes == []


# --- the hub ---------------------------------------------------------------------------


# hospital-a's one SuperNode key, as its stack exports it (a fixed ECDSA P-384 key: the render is deterministic).
WARD_KEY = (
    "ecdsa-sha2-nistp384 AAAAE2VjZHNhLXNoYTItbmlzdHAzODQAAAAIbmlzdHAzODQAAABhBG9b5l7VVRp5hgO9meH26Dz+tZ2RbgogDlAAVF"
    "TADPu1fF99gwkeN5fpMa84yTfPWes6v35D7PA4QobGLG/Em7TSLV/5z0JHGx79yhXINEUZj1yPcDBiakQoth4SmHMndA== hospital-a/ward/0"
)


def _hub(**kw: Any) -> Run:
    site_outputs = json.loads((GOLDEN / "site-chart.outputs.json").read_text())
    # A key of its own: the same key as lab-c's would be refused (issue 32: one key, trusted once).
    site_outputs["nodeAuth"]["publicKeys"] = {"ward": {"0": WARD_KEY}}
    site_outputs["pools"]["ward"]["replicas"] = 1  # one key, one SuperNode: a hub refuses an export missing keys
    return run(settings("hub"), "hub", stack_outputs={SITE_STACK: site_outputs}, **kw)


def test_a_hub_is_reachable_through_its_fleet_only_ingress_and_its_certificate_names_the_external_host() -> None:
    result = _hub(provider=RealTlsProvider())
    objects = result.manifests(show_secrets=True)
    ingress = get(objects, "Ingress", "fl-superlink")
    assert "annotations" not in ingress["metadata"] or not any(
        k.startswith("nginx.ingress.kubernetes.io/") for k in ingress["metadata"]["annotations"]
    ), "controller-neutral by default"
    (rule,) = ingress["spec"]["rules"]
    assert rule["host"] == "fl.example.org"
    (path,) = rule["http"]["paths"]
    assert path["path"] == "/v1/fleet/" and path["pathType"] == "Prefix"
    assert path["backend"]["service"] == {"name": "fl-superlink", "port": {"name": "fleet"}}
    assert ingress["spec"]["tls"] == [{"hosts": ["fl.example.org"], "secretName": "fl-superlink-tls"}]
    service = get(objects, "Service", "fl-superlink")
    assert service["spec"]["ports"] == [
        {"appProtocol": "https", "name": "fleet", "port": 8000, "protocol": "TCP", "targetPort": "fleet"}
    ]
    csr = next(r for r in result.registrations if r.type == "tls:index/certRequest:CertRequest")
    assert "fl.example.org" in csr.inputs["dnsNames"]
    assert "fl-superlink-control.flower-hub.svc.cluster.local" in csr.inputs["dnsNames"]
    # Fleet from anywhere (sites), on the proxy's port only; the SuperLink's own port
    # (9095) from the registration Job only.
    policy = get(objects, "NetworkPolicy", "fl-superlink")
    assert {"ports": [{"port": 8000, "protocol": "TCP"}]} in policy["spec"]["ingress"]
    assert [r for r in policy["spec"]["ingress"] if "from" not in r] == [{"ports": [{"port": 8000, "protocol": "TCP"}]}]
    assert result.outputs["superlink"]["controlAddress"] == "fl-superlink-control.flower-hub.svc.cluster.local:9095"
    assert result.outputs["superlink"]["externalAddress"] == "fl.example.org:443"
    assert "BEGIN CERTIFICATE" in result.outputs["caCertificate"]
    assert "caCertificate" not in result.secret_outputs  # public: sites trust it
    assert not by_kind(objects, "StatefulSet")[0]["metadata"]["name"].startswith("fl-supernode")


def test_registration_is_a_job_named_after_the_trusted_key_set() -> None:
    first, again = _hub(), _hub()
    job = by_kind(first.manifests(), "Job")[0]
    (volume,) = [v for v in job["spec"]["template"]["spec"]["volumes"] if v["name"] == "node-registration"]
    config_map = get(first.manifests(), "ConfigMap", volume["configMap"]["name"])
    # Issue 32 (d): the ConfigMap is bound to its content (its digest in the name, immutable); its Pulumi
    # name stays `fl-node-registration`, so the URN is stable and a new set replaces it.
    assert config_map["immutable"] is True
    assert config_map["metadata"]["name"] == registration.bound_name("fl-node-registration", config_map["data"])
    assert "fl-node-registration" in [r.name for r in first.registrations if r.type == "kubernetes:core/v1:ConfigMap"]
    keys = config_map["data"][registration.KEYS_FILE].splitlines()
    assert keys == sorted([WARD_KEY, settings("hub")["sites"][1]["publicKeys"][0]])  # each site's one key
    assert job["metadata"]["name"] == registration.job_name(first_plan(), config_map["data"][registration.KEYS_FILE])
    # Same keys, same Job: re-running `pulumi up` changes nothing.
    assert by_kind(again.manifests(), "Job")[0]["metadata"]["name"] == job["metadata"]["name"]
    # Revoking a site: its keys leave the set, and a new Job reconciles the SuperLink to it.
    raw = settings("hub")
    raw["sites"] = raw["sites"][:1]
    site_outputs = json.loads((GOLDEN / "site-chart.outputs.json").read_text())
    fewer = run(raw, "hub", stack_outputs={SITE_STACK: site_outputs})
    assert by_kind(fewer.manifests(), "Job")[0]["metadata"]["name"] != job["metadata"]["name"]
    # ... which mounts a new ConfigMap: the older Jobs keep reading theirs, with the set they were made for.
    new_jobs = by_kind(fewer.manifests(), "Job")
    new_maps = {
        v["configMap"]["name"] for j in new_jobs for v in j["spec"]["template"]["spec"]["volumes"] if "configMap" in v
    }
    old_maps = {
        v["configMap"]["name"]
        for j in by_kind(first.manifests(), "Job")
        for v in j["spec"]["template"]["spec"]["volumes"]
        if "configMap" in v
    }
    assert new_maps & old_maps == set() and old_maps == {config_map["metadata"]["name"]}, (old_maps, new_maps)
    (new_map,) = [m for m in by_kind(fewer.manifests(), "ConfigMap") if m["metadata"]["name"] in new_maps]
    assert new_map["data"][registration.KEYS_FILE] != config_map["data"][registration.KEYS_FILE]
    register, revoke = by_kind(first.manifests(), "Job")
    for job, phase in ((register, registration.REGISTER), (revoke, registration.REVOKE)):
        argv = job["spec"]["template"]["spec"]["containers"][0]["args"]
        assert argv[1] == registration.CONNECTION and argv[-2].endswith(registration.KEYS_FILE) and argv[-1] == phase
    # The revocation Job: the same key set's digest, after the pools (none here: right after registration).
    digest = register["metadata"]["name"].rsplit("-", 1)[1]
    assert revoke["metadata"]["name"] == f"fl-node-revocation-{digest}"
    assert "fl-node-revocation" in [r.name for r in first.registrations if r.type == "kubernetes:batch/v1:Job"]


def first_plan() -> Any:
    from flower_federation.plan import load_plan

    site_outputs = json.loads((GOLDEN / "site-chart.outputs.json").read_text())
    return load_plan(settings("hub"), "hub", None, {SITE_STACK: site_outputs})


# --- several clusters in one stack ----------------------------------------------------


def test_each_cluster_gets_its_provider_namespace_trust_and_policies() -> None:
    result = run(settings("multi-cluster"), "mc")
    providers = [r for r in result.registrations if r.type == PROVIDER_TYPE]
    assert [(r.name, r.inputs.get("context")) for r in providers] == [("cluster-edge", "edge-admin")]
    assert result.clusters == ["default", "edge"]
    home, edge = result.manifests(cluster="default"), result.manifests(cluster="edge")
    for objects in (home, edge):
        assert [m["metadata"]["name"] for m in by_kind(objects, "Namespace")] == ["flower"]
        assert [m["metadata"]["name"] for m in by_kind(objects, "Secret") if m["metadata"]["name"] == "mc-ca"]
    assert not [m for m in edge if m["metadata"]["name"].startswith("mc-superlink")]
    assert {m["metadata"]["name"] for m in by_kind(edge, "StatefulSet")} == {"mc-supernode-edge"}
    # The edge pool dials the external address; the local one the in-cluster Service.
    assert flag(args_of(by_kind(edge, "StatefulSet")[0]), "--superlink") == "fl.example.org:8000"
    local = get(home, "StatefulSet", "mc-supernode-local")
    assert flag(args_of(local), "--superlink") == "mc-superlink.flower.svc.cluster.local:8000"
    edge_policy = get(edge, "NetworkPolicy", "mc-supernode-edge")
    assert edge_policy["spec"]["egress"][0] == {"ports": [{"port": 8000, "protocol": "TCP"}]}
    # Logical names of objects that recur in both clusters carry the cluster.
    names = {r.name for r in result.kubernetes if r.cluster == "edge"}
    assert {"edge/flower", "edge/mc-ca"} <= names


def test_a_kubeconfig_must_be_secret_and_never_reaches_a_render_or_an_output() -> None:
    raw = settings("multi-cluster")
    raw["clusters"]["edge"] = {"kubeconfig": "apiVersion: v1\nkind: Config\n# token: sekret\n"}
    with pytest.raises(pulumi.RunError, match=r"federation.clusters.edge.kubeconfig: holds credentials"):
        run(raw, "mc")
    result = run_program({"federation": raw}, "mc", secret_config=("federation",))
    provider = next(r for r in result.registrations if r.type == PROVIDER_TYPE)
    assert "sekret" in json.dumps(provider.inputs)  # given to the provider (as a secret) ...
    everything = json.dumps(result.manifests(show_secrets=True)) + json.dumps(result.outputs)
    assert "sekret" not in everything  # ... and nowhere else


# --- offline render of all of it ------------------------------------------------------


def cli(*argv: str) -> tuple[int, str, str]:
    import contextlib
    import io

    from flower_federation.cli.main import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(list(argv))
    return code, out.getvalue(), err.getvalue()


def test_render_groups_objects_by_cluster_and_prints_one_cluster_on_request() -> None:
    config = str(GOLDEN / "Pulumi.multi-cluster.yaml")
    code, text, _ = cli("render", "--config-file", config)
    assert code == 0
    assert text.startswith("# cluster: default\n") and "\n---\n# cluster: edge\n" in text
    code, edge, _ = cli("render", "--config-file", config, "--cluster", "edge")
    assert code == 0 and "# cluster" not in edge
    assert {d["metadata"]["name"] for d in yaml.safe_load_all(edge) if d["kind"] == "StatefulSet"} == {
        "mc-supernode-edge"
    }
    code, _, err = cli("render", "--config-file", config, "--cluster", "west")
    assert code == 2 and "no objects go to cluster 'west' (this stack's: default, edge)" in err


def test_a_stack_read_with_from_stack_needs_its_outputs_offline(tmp_path: Path) -> None:
    code, out, err = cli("render", "--config-file", str(GOLDEN / "Pulumi.site-from-hub.yaml"))
    assert code == 2 and out == ""
    assert "reads the outputs of stack 'acme/flower-federation/hub' (fromStack): pass --stack-outputs" in err
    # A hub's render feeds a site's render.
    hub_json = tmp_path / "hub.json"
    hub = str(GOLDEN / "Pulumi.hub.yaml")
    site_outputs = f"{SITE_STACK}={GOLDEN / 'site-chart.outputs.json'}"
    assert cli("render", "--config-file", hub, "--stack-outputs", site_outputs, "--outputs", str(hub_json))[0] == 0
    site = str(GOLDEN / "Pulumi.site-from-hub.yaml")
    code, text, _ = cli("render", "--config-file", site, "--stack-outputs", f"{HUB_STACK}={hub_json}")
    assert code == 0 and "fl.example.org:443" in text


def test_render_outputs_are_what_a_hub_reads_and_hold_no_private_key(tmp_path: Path) -> None:
    path = tmp_path / "outputs.json"
    config = str(GOLDEN / "Pulumi.site-chart.yaml")
    assert cli("render", "--config-file", config, "--outputs", str(path))[0] == 0
    outputs = json.loads(path.read_text())
    assert outputs["role"] == "site" and "PRIVATE KEY" not in path.read_text()
    assert set(outputs["nodeAuth"]["publicKeys"]["ward"]) == {"0", "1"}


# --- across eras (issue 22): hub and sites move together ---------------------------------


def test_a_hub_warns_about_sites_still_in_the_other_era_and_a_site_refuses_a_hub_in_another() -> None:
    from flower_federation.plan import ConfigError, load_plan
    from flower_federation.plan.outputs import warnings

    site_outputs = json.loads((GOLDEN / "site-chart.outputs.json").read_text())
    assert not [w for w in warnings(load_plan(settings("hub"), "hub", None, {SITE_STACK: site_outputs})) if "era" in w]
    site_outputs["flowerVersion"] = "1.26.1"
    (said,) = [w for w in warnings(load_plan(settings("hub"), "hub", None, {SITE_STACK: site_outputs})) if "era" in w]
    assert "sites hospital-a (1.26.1) run the other era" in said and "docs/operations.md, Across eras" in said

    hub_outputs = json.loads((GOLDEN / "hub.outputs.json").read_text())
    hub_outputs["flowerVersion"] = "1.26.1"
    with pytest.raises(ConfigError) as err:
        load_plan(settings("site-from-hub"), "site-b", None, {HUB_STACK: hub_outputs})
    text = str(err.value)
    assert "runs Flower 1.26.1 (gRPC era)" in text and "docs/operations.md, Across eras" in text, text


def test_a_site_reading_the_hub_takes_its_two_ca_bundle_and_rolls_onto_it() -> None:
    """The CA overlap (docs/operations.md): a hub's `caCertificate` holds both CAs between steps
    1 and 3; a site reading it with fromStack trusts both, and its pods roll onto the bundle."""
    hub_outputs = json.loads((GOLDEN / "hub.outputs.json").read_text())
    one = ca_pem("hub CA 0", seed=1)
    both = one + ca_pem("hub CA 1", seed=2)

    def site(ca: str) -> Any:
        return run(settings("site-from-hub"), "site-b", stack_outputs={HUB_STACK: {**hub_outputs, "caCertificate": ca}})

    before, after = site(one), site(both)
    assert get(after.manifests(show_secrets=True), "Secret", "hospital-b-ca")["stringData"] == {"ca.crt": both}
    annotations = [
        get(r.manifests(), "StatefulSet", "hospital-b-supernode-gpu")["spec"]["template"]["metadata"]["annotations"]
        for r in (before, after)
    ]
    assert annotations[0]["flower.flwr.ai/tls-checksum"] != annotations[1]["flower.flwr.ai/tls-checksum"]
