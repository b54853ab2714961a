"""Security properties of the rendered manifests, over every stack of
`tests.support.stacks.security_stacks()` (and the dev stack): schema validity, Pod
Security `restricted`, NetworkPolicies (checked generically for symmetry, and for what
may reach the in-pod APIs), ServiceAccounts and RBAC, probes, PodDisruptionBudgets,
default resources, TLS mounts, node authentication, and the config rules behind them.

Plans and renders are cached per stack id; tests never mutate what the caches hold.
"""

from __future__ import annotations

import copy
import functools
from pathlib import Path
from typing import Any, Iterator, Optional

import kubernetes_validate
import kubernetes_validate.utils
import pytest
import yaml
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from federation import access, nodeauth, pss, trust
from federation.errors import ConfigError
from federation.plan import FederationPlan, load_plan
from federation.pods import MANAGED_CONTAINERS
from federation.quantity import parse_quantity
from federation.workloads import WORKLOAD_KINDS, all_objects, namespace, pod_templates
from tests.support.kube import container_argv, pod_for
from tests.support.stacks import EXECUTOR_GRPC, GRPC_ERA, HTTP_ERA, base, daemonset_node_keys, security_stacks
from tests.support.tls_provider import new_openssh_key

ROOT = Path(__file__).resolve().parents[1]
K8S = "1.34"

NAME, NS = "sec", "flower-sec"  # every security stack's name and namespace
INSTANCE = "app.kubernetes.io/instance"
COMPONENT = "app.kubernetes.io/component"
POOL = "flower.flwr.ai/pool"
TASK_ROLE = "flower.flwr.ai/task-role"
DNS_PEER = {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "kube-system"}},
            "podSelector": {"matchLabels": {"k8s-app": "kube-dns"}}}
DNS_RULE = {"to": [DNS_PEER], "ports": [{"port": 53, "protocol": "UDP"}, {"port": 53, "protocol": "TCP"}]}
DEFAULT_REQUESTS = {"cpu": "100m", "memory": "256Mi"}
RESTRICTED_CONTAINER_SC = {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]},
                           "readOnlyRootFilesystem": True, "runAsNonRoot": True,
                           "seccompProfile": {"type": "RuntimeDefault"}}
RESTRICTED_POD_SC = {"fsGroup": 49999, "runAsGroup": 49999, "runAsNonRoot": True, "runAsUser": 49999,
                     "seccompProfile": {"type": "RuntimeDefault"}}


# --- stacks, plans and renders (cached) ----------------------------------------------


STACKS: dict[str, dict[str, Any]] = security_stacks()
STACK_IDS = sorted(STACKS)
DEV = "dev"


def _dev_config() -> dict[str, Any]:
    settings = yaml.safe_load((ROOT / "Pulumi.dev.yaml").read_text())
    return settings["config"]["flower-federation:federation"]


@functools.lru_cache(maxsize=None)
def supplied_keys() -> dict[str, dict[str, str]]:
    return daemonset_node_keys(new_openssh_key)


@functools.lru_cache(maxsize=None)
def plan_of(sid: str) -> FederationPlan:
    if sid == DEV:
        return load_plan(_dev_config(), "dev")
    keys = supplied_keys() if STACKS[sid].get("nodeAuth", {}).get("keySource") == "config" else None
    return load_plan(STACKS[sid], "dev", node_auth_keys=keys)


@functools.lru_cache(maxsize=None)
def objects_of(sid: str) -> tuple:
    return tuple(all_objects(plan_of(sid)))


def render(raw: dict, **kw: Any) -> list[dict]:
    return all_objects(load_plan(raw, "dev", **kw))


def by_kind(objects, kind: str) -> list[dict]:
    return [o for o in objects if o["kind"] == kind]


def get(objects, kind: str, name: str) -> dict:
    found = [o for o in objects if o["kind"] == kind and o["metadata"]["name"] == name]
    assert len(found) == 1, f"{kind}/{name}: {len(found)} found"
    return found[0]


def names_of(objects, kind: str) -> set[str]:
    return {o["metadata"]["name"] for o in by_kind(objects, kind)}


def workloads(objects) -> list[dict]:
    return [o for o in objects if o["kind"] in WORKLOAD_KINDS]


def containers(objects) -> Iterator[tuple[dict, dict]]:
    for w in workloads(objects):
        for c in w["spec"]["template"]["spec"]["containers"]:
            yield w, c


def container(objects, kind: str, workload: str, name: str) -> dict:
    spec = get(objects, kind, workload)["spec"]["template"]["spec"]
    return next(c for c in spec["containers"] if c["name"] == name)


def volumes_by_name(workload: dict) -> dict[str, dict]:
    return {v["name"]: v for v in workload["spec"]["template"]["spec"]["volumes"]}


def mounts_by_name(c: dict) -> dict[str, dict]:
    return {m["name"]: m for m in c.get("volumeMounts", [])}


def arg_after(args: list[str], flag: str) -> str:
    assert args.count(flag) == 1, f"{flag} appears {args.count(flag)} times in {args}"
    return args[args.index(flag) + 1]


def stacks_where(predicate) -> list[str]:
    return [sid for sid in STACK_IDS if predicate(plan_of(sid))]


def executor_configs(objects) -> dict[str, dict]:
    """ConfigMap name -> parsed Flower executor config."""
    return {cm["metadata"]["name"]: yaml.safe_load(cm["data"][access.EXECUTOR_CONFIG_FILE])
            for cm in by_kind(objects, "ConfigMap") if access.EXECUTOR_CONFIG_FILE in cm.get("data", {})}


# --- Kubernetes schema (strict, 1.34) -------------------------------------------------


@pytest.fixture(scope="module")
def k8s_validate():
    """kubernetes_validate.validate, with its schema files read once instead of per
    object (the validation itself is unchanged)."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(kubernetes_validate.utils, "schema_contents",
                   functools.lru_cache(maxsize=None)(kubernetes_validate.utils.schema_contents))
        yield lambda obj: kubernetes_validate.validate(obj, K8S, strict=True)


@pytest.mark.parametrize("sid", STACK_IDS + [DEV])
def test_every_object_passes_the_strict_kubernetes_schema(sid, k8s_validate):
    objects = objects_of(sid)
    assert {"Namespace", "StatefulSet", "Service", "ServiceAccount", "NetworkPolicy",
            "PodDisruptionBudget"} <= {o["kind"] for o in objects}
    for obj in objects:
        assert obj["apiVersion"] != "cert-manager.io/v1"  # never in all_objects
        k8s_validate(obj)


@pytest.mark.parametrize("sid", [s for s in STACK_IDS if not s.endswith("insecure")])
def test_shell_made_secrets_pass_the_schema_and_match_the_names_pods_mount(sid, k8s_validate):
    """The TLS and node-key Secrets come from the Pulumi shell, built by these pure
    builders; they must be valid and carry the names and keys the pods reference."""
    plan = plan_of(sid)
    server = trust.server_secret(plan, "CERT", "KEY", "CA")
    ca = trust.trust_secret(plan, ca_pem="CA")
    copied = trust.trust_secret(plan, ca_base64="Q0E=")
    for secret in (server, ca, copied):
        k8s_validate(secret)
    assert server["metadata"]["name"] == plan.trust.server_secret and server["type"] == "kubernetes.io/tls"
    assert set(server["stringData"]) == {"tls.crt", "tls.key", "ca.crt"}
    assert ca["metadata"]["name"] == plan.trust.ca_secret and set(ca["stringData"]) == {"ca.crt"}
    assert copied["data"] == {"ca.crt": "Q0E="} and "stringData" not in copied
    if plan.spec.node_auth.enabled:
        for pool in plan.spec.supernodes.pools:
            slots = nodeauth.slots(plan, pool, plan.node_auth_keys)
            secret = nodeauth.key_secret(plan, pool, {s: f"key-{s}" for s in slots})
            k8s_validate(secret)
            assert secret["metadata"]["name"] == f"{NAME}-supernode-{pool.name}-node-keys"


# --- cert-manager Certificate ---------------------------------------------------------


@pytest.mark.parametrize("sid", ["grpc-certmanager", "http-certmanager"])
def test_cert_manager_certificate_shape(sid):
    plan = plan_of(sid)
    assert (plan.trust.source, plan.trust.trust_source) == ("certManager", "copyFromServerSecret")
    cert = trust.certificate(plan)
    assert cert["apiVersion"] == "cert-manager.io/v1" and cert["kind"] == "Certificate"
    meta = cert["metadata"]
    assert (meta["name"], meta["namespace"]) == (f"{NAME}-superlink", NS)
    assert meta["annotations"] == {"pulumi.com/waitFor": "condition=Ready"}
    spec = cert["spec"]
    assert spec["secretName"] == plan.trust.server_secret == f"{NAME}-superlink-tls"
    assert (spec["duration"], spec["renewBefore"]) == ("43800h", "360h")
    assert spec["issuerRef"] == {"name": "ca-issuer", "kind": "ClusterIssuer", "group": "cert-manager.io"}
    svc = f"{NAME}-superlink"
    assert spec["dnsNames"] == [svc, f"{svc}.{NS}", f"{svc}.{NS}.svc", f"{svc}.{NS}.svc.cluster.local",
                                "localhost", "flower.example.com"]
    assert spec["ipAddresses"] == ["127.0.0.1"]
    assert spec["privateKey"]["algorithm"] == "ECDSA"
    assert "server auth" in spec["usages"]
    # The service the certificate names is the one the render has.
    assert get(objects_of(sid), "Service", svc)["metadata"]["namespace"] == NS


def test_cert_manager_certificate_honours_its_settings():
    raw = base(GRPC_ERA, namespace="ml", clusterDomain="corp.internal", tls={
        "source": "certManager",
        "certManager": {"issuerRef": {"name": "internal-ca"}, "duration": "2160h", "renewBefore": "720h"},
        "dnsNames": ["flower.example.com", "localhost", "*.flower.example.com"],
        "ipAddresses": ["10.0.0.7", "127.0.0.1", "2001:db8::1"]})
    spec = trust.certificate(load_plan(raw, "dev"))["spec"]
    assert (spec["duration"], spec["renewBefore"]) == ("2160h", "720h")
    assert spec["issuerRef"] == {"name": "internal-ca", "kind": "Issuer", "group": "cert-manager.io"}
    assert spec["dnsNames"] == ["sec-superlink", "sec-superlink.ml", "sec-superlink.ml.svc",
                                "sec-superlink.ml.svc.corp.internal", "localhost", "flower.example.com",
                                "*.flower.example.com"]
    assert spec["ipAddresses"] == ["127.0.0.1", "10.0.0.7", "2001:db8::1"]


def test_cert_manager_common_name_fits_the_64_byte_limit():
    """cert-manager's webhook refuses a Certificate whose commonName exceeds 64 bytes
    (X.509 ub-common-name). A legal name and namespace must not produce one: either the
    CN stays within the limit or validation says why before anything is applied."""
    raw = base(name="flower-production", namespace="federated-learning-prod",
               tls={"source": "certManager", "certManager": {"issuerRef": {"name": "ca"}}})
    try:
        plan = load_plan(raw, "dev")
    except ConfigError:
        return
    cert = trust.certificate(plan)
    assert len(cert["spec"].get("commonName", "").encode()) <= 64, cert["spec"]["commonName"]
    assert "flower-production-superlink.federated-learning-prod.svc.cluster.local" in cert["spec"]["dnsNames"]


@pytest.mark.parametrize("sid", [s for s in STACK_IDS if not s.endswith("insecure")])
def test_certificate_names_cover_every_address_clients_dial(sid):
    """Whatever the SuperNodes and SuperExecs dial with TLS is a SAN of the server
    certificate (all TLS sources share these SANs)."""
    plan = plan_of(sid)
    dns, ips = set(trust.superlink_dns_names(plan)), set(trust.superlink_ip_addresses(plan))
    dialled = []
    for _, c in containers(objects_of(sid)):
        args = c["args"]
        if "--root-certificates" in args:
            flag = "--superlink" if "--superlink" in args else "--runtime-api-address"
            dialled.append(arg_after(args, flag).rsplit(":", 1)[0])
    assert dialled
    for host in dialled:
        assert host in dns | ips, host


# --- Pod Security Standards -----------------------------------------------------------


@pytest.mark.parametrize("sid", STACK_IDS + [DEV])
def test_every_pod_template_is_restricted_and_the_namespace_enforces_it(sid):
    plan = plan_of(sid)
    templates = pod_templates(plan)
    assert len(templates) == len(workloads(objects_of(sid))) >= 2
    for t in templates:
        assert pss.restricted_violations(t) == [], t["metadata"]["labels"]
        assert t["spec"]["securityContext"] == RESTRICTED_POD_SC
        for c in t["spec"]["containers"]:
            assert c["securityContext"] == RESTRICTED_CONTAINER_SC
    labels = get(objects_of(sid), "Namespace", plan.namespace)["metadata"]["labels"]
    assert labels["pod-security.kubernetes.io/enforce"] == "restricted"
    assert labels["pod-security.kubernetes.io/warn"] == "restricted"


@pytest.mark.parametrize("sid", ["grpc-executor-kubernetes", "http-executor-kubernetes"])
def test_task_pods_of_the_kubernetes_executor_are_restricted(sid):
    for name, cfg in executor_configs(objects_of(sid)).items():
        template = {"metadata": {"labels": cfg["labels"]},
                    "spec": {"securityContext": cfg["pod-security-context"],
                             "containers": [{"name": "task", "image": cfg["image"],
                                             "securityContext": cfg["container-security-context"],
                                             "volumeMounts": cfg["volume-mounts"]}],
                             "volumes": cfg["volumes"]}}
        assert pss.restricted_violations(template) == [], name
        assert cfg["pod-security-context"] == RESTRICTED_POD_SC
        assert cfg["container-security-context"] == RESTRICTED_CONTAINER_SC
        assert {m["mountPath"] for m in cfg["volume-mounts"]} >= {"/tmp", "/app/.flwr"}


def _template() -> dict:
    """A deep copy of a real restricted pod template (SuperNode + sidecar SuperExec)."""
    objects = objects_of("grpc-process-sidecar-nodeauth")
    t = copy.deepcopy(get(objects, "StatefulSet", f"{NAME}-supernode-alpha")["spec"]["template"])
    assert pss.level(t) == "restricted" and len(t["spec"]["containers"]) == 2
    return t


def _sc(t: dict, i: int = 0) -> dict:
    return t["spec"]["containers"][i]["securityContext"]


def _privileged(t):
    _sc(t)["privileged"] = True


def _escalation(t):
    _sc(t, 1)["allowPrivilegeEscalation"] = True


def _no_escalation_field(t):
    del _sc(t)["allowPrivilegeEscalation"]


def _pod_root(t):
    t["spec"]["securityContext"]["runAsUser"] = 0


def _container_root(t):
    _sc(t, 1)["runAsUser"] = 0


def _no_seccomp(t):
    del t["spec"]["securityContext"]["seccompProfile"]
    del _sc(t)["seccompProfile"]


def _unconfined(t):
    _sc(t)["seccompProfile"] = {"type": "Unconfined"}


def _no_drop(t):
    _sc(t)["capabilities"] = {"drop": ["NET_RAW"]}


def _sys_admin(t):
    _sc(t)["capabilities"] = {"drop": ["ALL"], "add": ["SYS_ADMIN"]}


def _chown(t):
    _sc(t)["capabilities"] = {"drop": ["ALL"], "add": ["CHOWN"]}


def _host_path(t):
    t["spec"]["volumes"].append({"name": "dev", "hostPath": {"path": "/dev"}})


def _host_network(t):
    t["spec"]["hostNetwork"] = True


def _host_port(t):
    t["spec"]["containers"][0]["ports"] = [{"containerPort": 9092, "hostPort": 9092}]


def _container_non_root_false(t):
    _sc(t, 1)["runAsNonRoot"] = False


def _bare_init_container(t):
    t["spec"]["initContainers"] = [{"name": "init", "image": "busybox"}]


NEGATIVE_CONTROLS = [
    # (mutation, a violation it must produce, level)
    (_privileged, "privileged: containers[supernode]", "privileged"),
    (_escalation, "privilege escalation: containers[superexec-clientapp] must set allowPrivilegeEscalation false", "baseline"),
    (_no_escalation_field, "privilege escalation: containers[supernode] must set allowPrivilegeEscalation false", "baseline"),
    (_pod_root, "running as non-root user: spec.securityContext.runAsUser 0", "baseline"),
    (_container_root, "running as non-root user: containers[superexec-clientapp] runAsUser 0", "baseline"),
    (_no_seccomp, "seccomp: containers[supernode] needs RuntimeDefault or Localhost", "baseline"),
    (_unconfined, "seccomp: containers[supernode].securityContext.seccompProfile Unconfined", "privileged"),
    (_no_drop, "capabilities: containers[supernode] must drop ALL", "baseline"),
    (_sys_admin, "capabilities: containers[supernode] adds ['SYS_ADMIN']", "privileged"),
    (_chown, "capabilities: containers[supernode] may add only NET_BIND_SERVICE, adds ['CHOWN']", "baseline"),
    (_host_path, "hostPath volumes: volumes[dev]", "privileged"),
    (_host_network, "host namespaces: spec.hostNetwork", "privileged"),
    (_host_port, "host ports: containers[supernode] hostPort 9092", "privileged"),
    (_container_non_root_false, "running as non-root: containers[superexec-clientapp]", "baseline"),
    (_bare_init_container, "privilege escalation: initContainers[init] must set allowPrivilegeEscalation false", "baseline"),
]


@pytest.mark.parametrize("mutate,violation,expected_level", NEGATIVE_CONTROLS,
                         ids=[m.__name__.strip("_") for m, _, _ in NEGATIVE_CONTROLS])
def test_pss_checker_catches(mutate, violation, expected_level):
    t = _template()
    mutate(t)
    assert violation in pss.restricted_violations(t)
    assert pss.level(t) == expected_level
    assert pss.namespace_level([_template(), t]) == expected_level


def test_pss_checker_accepts_what_restricted_allows():
    t = _template()
    del _sc(t)["seccompProfile"]  # inherited from the pod
    del _sc(t, 1)["runAsNonRoot"]  # inherited from the pod
    _sc(t)["capabilities"] = {"drop": ["ALL"], "add": ["NET_BIND_SERVICE"]}
    _sc(t)["readOnlyRootFilesystem"] = False  # not a PSS control
    t["spec"]["volumes"].append({"name": "data", "persistentVolumeClaim": {"claimName": "data"}})
    assert pss.restricted_violations(t) == []
    assert pss.namespace_level([]) == "restricted"


def test_pss_checker_catches_pod_level_run_as_non_root_false():
    """Pod Security admission (check runAsNonRoot) rejects a pod whose
    spec.securityContext.runAsNonRoot is explicitly false under `restricted`, even when
    every container sets true. The checker must too, or the namespace we create is
    labelled restricted and its pods are refused."""
    t = _template()
    t["spec"]["securityContext"]["runAsNonRoot"] = False
    assert any(v.startswith("running as non-root") for v in pss.restricted_violations(t)), pss.restricted_violations(t)
    assert pss.level(t) == "baseline"


def _namespace_level(raw: dict) -> str:
    labels = namespace(load_plan(raw, "dev"))["metadata"]["labels"]
    assert labels["pod-security.kubernetes.io/warn"] == labels["pod-security.kubernetes.io/enforce"]
    return labels["pod-security.kubernetes.io/enforce"]


def test_namespace_is_privileged_only_for_an_amd_mount_all_pool():
    raw = base(HTTP_ERA)
    raw["supernodes"]["pools"][1]["gpu"] = {"enabled": True, "vendor": "amd", "mountAll": True, "allowPrivileged": True}
    plan = load_plan(raw, "dev")
    assert _namespace_level(raw) == "privileged"
    levels = {t["metadata"]["labels"].get(POOL, t["metadata"]["labels"][COMPONENT]): pss.level(t)
              for t in pod_templates(plan)}
    assert levels == {"superlink": "restricted", "alpha": "restricted", "beta": "privileged"}
    beta = get(all_objects(plan), "StatefulSet", f"{NAME}-supernode-beta")["spec"]["template"]["spec"]
    assert beta["containers"][0]["securityContext"]["privileged"] is True
    assert {v["hostPath"]["path"] for v in beta["volumes"] if "hostPath" in v} == {"/dev/kfd", "/dev/dri"}
    # An NVIDIA mountAll pool stays restricted (a RuntimeClass, no privileges).
    raw["supernodes"]["pools"][1]["gpu"] = {"enabled": True, "vendor": "nvidia", "mountAll": True}
    assert _namespace_level(raw) == "restricted"


@pytest.mark.parametrize("security_context,pod_security_context,expected", [
    ({"readOnlyRootFilesystem": False}, {}, "restricted"),
    ({"runAsUser": 1000}, {"runAsUser": 1000, "runAsGroup": 1000, "fsGroup": 1000}, "restricted"),
    ({"allowPrivilegeEscalation": True}, {}, "baseline"),
    ({"seccompProfile": {"type": "Unconfined"}}, {}, "privileged"),
    ({}, {"runAsUser": 0}, "baseline"),
    ({"capabilities": {"drop": ["ALL"], "add": ["NET_RAW"]}}, {}, "privileged"),
])
def test_namespace_level_follows_weakened_security_contexts(security_context, pod_security_context, expected):
    raw = base(GRPC_ERA, isolation="process", securityContext=security_context,
               podSecurityContext=pod_security_context)
    assert _namespace_level(raw) == expected
    for t in pod_templates(load_plan(raw, "dev")):
        for c in t["spec"]["containers"]:
            for key, value in security_context.items():
                assert c["securityContext"][key] == value


# --- NetworkPolicies ------------------------------------------------------------------


def _selects(selector: dict, labels: dict) -> bool:
    assert set(selector) <= {"matchLabels"}, selector  # ours never use matchExpressions
    return all(labels.get(k) == v for k, v in selector.get("matchLabels", {}).items())


def pod_groups(objects) -> dict[str, dict[str, str]]:
    """Every set of pods of the federation, by id -> its labels: workload pod templates
    and the task pods the Kubernetes executor labels from its config."""
    groups = {f"{w['kind']}/{w['metadata']['name']}": w["spec"]["template"]["metadata"]["labels"]
              for w in workloads(objects)}
    groups.update({f"tasks/{name}": cfg["labels"] for name, cfg in executor_configs(objects).items()})
    return groups


def _peer_matches(peer: dict, labels: dict, namespace_name: str) -> bool:
    """Does a NetworkPolicyPeer select pods with `labels` in our namespace?"""
    if "ipBlock" in peer:
        return False
    if "namespaceSelector" in peer:
        ns_labels = {"kubernetes.io/metadata.name": namespace_name}
        if not _selects(peer["namespaceSelector"], ns_labels):
            return False
    return _selects(peer.get("podSelector", {}), labels)


def _port_matches(rule: dict, port: int, protocol: str) -> bool:
    ports = rule.get("ports")
    return not ports or any(p.get("port") == port and p.get("protocol", "TCP") == protocol for p in ports)


def _rule_allows(rule: dict, direction: str, labels: dict, port: int, protocol: str, ns: str) -> bool:
    peers = rule.get(direction)
    peer_ok = not peers or any(_peer_matches(p, labels, ns) for p in peers)
    return peer_ok and _port_matches(rule, port, protocol)


def _allowed(objects, pod_labels: dict, kind: str, peer_labels: dict, port: int, protocol: str, ns: str) -> bool:
    """Do the policies selecting `pod_labels` allow this flow (`kind` ingress/egress)?"""
    policy_type = kind.capitalize()
    relevant = [p for p in by_kind(objects, "NetworkPolicy")
                if _selects(p["spec"]["podSelector"], pod_labels) and policy_type in p["spec"]["policyTypes"]]
    if not relevant:
        return True
    direction = "from" if kind == "ingress" else "to"
    return any(_rule_allows(r, direction, peer_labels, port, protocol, ns)
               for p in relevant for r in p["spec"].get(kind, []))


def expected_policy_names(plan: FederationPlan) -> set[str]:
    pools = [p.name for p in plan.spec.supernodes.pools]
    names = {f"{NAME}-superlink"} | {f"{NAME}-supernode-{p}" for p in pools}
    if plan.distributed:
        names |= {f"{NAME}-superexec-serverapp"} | {f"{NAME}-superexec-{p}" for p in pools}
    if access.kubernetes_executor(plan):
        names |= {f"{NAME}-taskexecutor-serverapp"} | {f"{NAME}-taskexecutor-{p}" for p in pools}
    return names


@pytest.mark.parametrize("sid", STACK_IDS)
def test_one_default_deny_policy_per_component(sid):
    plan, objects = plan_of(sid), objects_of(sid)
    policies = by_kind(objects, "NetworkPolicy")
    assert {p["metadata"]["name"] for p in policies} == expected_policy_names(plan)
    assert len(policies) == len(expected_policy_names(plan))
    for p in policies:
        assert p["spec"]["policyTypes"] == ["Ingress", "Egress"]
        assert isinstance(p["spec"]["ingress"], list) and isinstance(p["spec"]["egress"], list)
        assert p["metadata"]["namespace"] == NS
    # Every pod group is selected by exactly one policy, and every policy selects pods.
    groups = pod_groups(objects)
    for gid, labels in groups.items():
        selecting = [p["metadata"]["name"] for p in policies if _selects(p["spec"]["podSelector"], labels)]
        assert len(selecting) == 1, (gid, selecting)
    for p in policies:
        assert any(_selects(p["spec"]["podSelector"], labels) for labels in groups.values()), p["metadata"]["name"]


@pytest.mark.parametrize("sid", STACK_IDS)
def test_both_sides_of_every_flow_agree(sid):
    """For every rule naming our own pods, the other side's policy allows the same flow
    on the same port and protocol, in both directions."""
    objects = objects_of(sid)
    groups = pod_groups(objects)
    checked = 0
    for policy in by_kind(objects, "NetworkPolicy"):
        own = [labels for labels in groups.values() if _selects(policy["spec"]["podSelector"], labels)]
        for kind, direction, other_kind in (("egress", "to", "ingress"), ("ingress", "from", "egress")):
            for rule in policy["spec"][kind]:
                for peer in rule.get(direction, []):
                    if set(peer) != {"podSelector"} or peer["podSelector"]["matchLabels"].get(INSTANCE) != NAME:
                        continue  # DNS, the API server, configured sources: not our pods
                    others = {gid: labels for gid, labels in groups.items() if _selects(peer["podSelector"], labels)}
                    assert others, f"{policy['metadata']['name']} {kind} names pods that do not exist: {peer}"
                    for port in rule["ports"]:
                        for gid, other in others.items():
                            for mine in own:
                                assert _allowed(objects, other, other_kind, mine, port["port"], port["protocol"], NS), \
                                    (policy["metadata"]["name"], kind, gid, port)
                                checked += 1
    assert checked >= 2  # at least: the SuperLink and both pools agree on the Fleet API


def _superlink_policy(objects) -> dict:
    return get(objects, "NetworkPolicy", f"{NAME}-superlink")


def _superlink_selector() -> dict:
    return {"podSelector": {"matchLabels": {INSTANCE: NAME, COMPONENT: "superlink"}}}


@pytest.mark.parametrize("sid", STACK_IDS)
def test_in_pod_apis_are_never_reachable_from_elsewhere(sid):
    plan, objects = plan_of(sid), objects_of(sid)
    link_args = container(objects, "StatefulSet", f"{NAME}-superlink", "superlink")["args"]
    # ServerAppIo (gRPC era): bound to loopback unless distributed; only the SuperExec
    # for ServerApps (and its task pods) may reach it.
    if plan.ports.serverappio is not None:
        appio = plan.ports.serverappio
        assert arg_after(link_args, "--serverappio-api-address") == \
            f"{'0.0.0.0' if plan.distributed else '127.0.0.1'}:{appio}"
        allowed = [{INSTANCE: NAME, COMPONENT: "superexec-serverapp"},
                   {INSTANCE: NAME, COMPONENT: "taskexecutor", TASK_ROLE: "serverapp"}]
        rules = [r for r in _superlink_policy(objects)["spec"]["ingress"] if _port_matches(r, appio, "TCP")]
        assert bool(rules) == plan.distributed  # the distributed SuperExec must get through
        for r in rules:
            assert r.get("from"), r
            for peer in r["from"]:
                assert set(peer) == {"podSelector"} and peer["podSelector"]["matchLabels"] in allowed, peer
        public = get(objects, "Service", f"{NAME}-superlink")
        assert appio not in {p["port"] for p in public["spec"]["ports"]}
    # The SuperNodes' ClientAppIo / Runtime API (9094): only their own pool's SuperExec.
    for pool in plan.spec.supernodes.pools:
        node_args = container(objects, "DaemonSet" if plan.spec.mode == "DaemonSet" else "StatefulSet",
                              f"{NAME}-supernode-{pool.name}", "supernode")["args"]
        bind = "0.0.0.0" if plan.distributed else "127.0.0.1"
        if plan.ports.serverappio is not None:
            assert arg_after(node_args, "--clientappio-api-address") == f"{bind}:9094"
        else:
            assert (arg_after(node_args, "--host"), arg_after(node_args, "--port")) == (bind, "9094")
        policy = get(objects, "NetworkPolicy", f"{NAME}-supernode-{pool.name}")
        rules = [r for r in policy["spec"]["ingress"] if _port_matches(r, 9094, "TCP")]
        assert bool(rules) == plan.distributed
        if not plan.distributed:
            assert policy["spec"]["ingress"] == []
        allowed = [{INSTANCE: NAME, COMPONENT: "superexec-clientapp", POOL: pool.name},
                   {INSTANCE: NAME, COMPONENT: "taskexecutor", TASK_ROLE: pool.name}]
        for r in rules:
            assert r.get("from"), r
            for peer in r["from"]:
                assert set(peer) == {"podSelector"} and peer["podSelector"]["matchLabels"] in allowed, peer


@pytest.mark.parametrize("sid", stacks_where(lambda p: not p.spec.allow_runtime_dependency_installation
                                              and not p.spec.network_policy.allow_external_egress
                                              and not p.spec.supernodes.network_policy.allow_external_egress))
def test_supernodes_reach_only_the_fleet_api_and_dns(sid):
    plan, objects = plan_of(sid), objects_of(sid)
    to_superlink = {"to": [_superlink_selector()], "ports": [{"port": plan.ports.fleet, "protocol": "TCP"}]}
    for pool in plan.spec.supernodes.pools:
        policy = get(objects, "NetworkPolicy", f"{NAME}-supernode-{pool.name}")
        assert policy["spec"]["egress"] == [to_superlink, DNS_RULE]


@pytest.mark.parametrize("sid", STACK_IDS)
def test_superlink_accepts_outside_traffic_only_with_allow_external(sid):
    plan, objects = plan_of(sid), objects_of(sid)
    ingress = _superlink_policy(objects)["spec"]["ingress"]
    extra = plan.spec.superlink.network_policy.extra_ingress or []
    managed = ingress[: len(ingress) - len(extra)]
    assert ingress[len(managed):] == extra
    open_rules = [r for r in managed if not r.get("from")]
    for r in managed:
        for peer in r.get("from", []):
            assert "ipBlock" not in peer
    if sid.endswith("networkpolicy-knobs"):
        assert open_rules == [{"ports": [{"port": plan.ports.fleet, "protocol": "TCP"}]}]
    else:
        assert open_rules == []


@pytest.mark.parametrize("sid", ["grpc-networkpolicy-knobs", "http-networkpolicy-knobs"])
def test_networkpolicy_knobs(sid):
    plan, objects = plan_of(sid), objects_of(sid)
    api_ports = [{"port": p, "protocol": "TCP"} for p in sorted({plan.ports.fleet, plan.ports.control})]
    assert len(api_ports) == (2 if sid.startswith("grpc") else 1)
    ingress = _superlink_policy(objects)["spec"]["ingress"]
    # ingressPodMatchLabels (superlink) and ingressNSMatchLabels + ingressNSPodMatchLabels
    # (global) reach the Fleet and Control ports.
    assert {"from": [{"podSelector": {"matchLabels": {"role": "flwr-cli"}}}], "ports": api_ports} in ingress
    assert {"from": [{"namespaceSelector": {"matchLabels": {"team": "ml"}},
                      "podSelector": {"matchLabels": {"role": "flwr-cli"}}}], "ports": api_ports} in ingress
    # extraIngress is appended last.
    assert ingress[-1] == {"ports": [{"port": 9100, "protocol": "TCP"}]}
    # supernodes.allowExternalEgress: unrestricted egress for every pool, not for the SuperLink.
    for pool in ("alpha", "beta"):
        assert get(objects, "NetworkPolicy", f"{NAME}-supernode-{pool}")["spec"]["egress"] == [{}]
    assert _superlink_policy(objects)["spec"]["egress"] == [DNS_RULE]


def test_extra_egress_is_appended_and_ignored_with_allow_external_egress():
    extra = {"to": [{"ipBlock": {"cidr": "10.0.0.0/8"}}], "ports": [{"port": 5432, "protocol": "TCP"}]}
    plain = _superlink_policy(render(base(GRPC_ERA)))["spec"]["egress"]
    with_extra = _superlink_policy(render(base(GRPC_ERA, superlink={"networkPolicy": {"extraEgress": [extra]}})))
    assert with_extra["spec"]["egress"] == plain + [extra]
    opened = _superlink_policy(render(base(GRPC_ERA, superlink={"networkPolicy": {
        "extraEgress": [extra], "allowExternalEgress": True}})))
    assert opened["spec"]["egress"] == [{}]
    # A pool-level extraIngress reaches that pool only.
    raw = base(GRPC_ERA)
    raw["supernodes"]["pools"][0]["networkPolicy"] = {"extraIngress": [{"ports": [{"port": 9400, "protocol": "TCP"}]}]}
    objects = render(raw)
    assert get(objects, "NetworkPolicy", f"{NAME}-supernode-alpha")["spec"]["ingress"] == \
        [{"ports": [{"port": 9400, "protocol": "TCP"}]}]
    assert get(objects, "NetworkPolicy", f"{NAME}-supernode-beta")["spec"]["ingress"] == []


@pytest.mark.parametrize("version,isolation,placement", [
    (GRPC_ERA, "subprocess", "sidecar"), (HTTP_ERA, "process", "distributed"), (EXECUTOR_GRPC, "process", "distributed")])
def test_disabling_one_pools_policy_drops_only_that_pools_policies(version, isolation, placement):
    extra = {"executor": {"type": "kubernetes"}} if version == EXECUTOR_GRPC else {}
    raw = base(version, isolation=isolation, placement=placement, **extra)
    before = {p["metadata"]["name"]: p for p in by_kind(render(raw), "NetworkPolicy")}
    raw["supernodes"]["pools"][1]["networkPolicy"] = {"enabled": False}
    after = {p["metadata"]["name"]: p for p in by_kind(render(raw), "NetworkPolicy")}
    beta = {f"{NAME}-supernode-beta"}
    if placement == "distributed":
        beta.add(f"{NAME}-superexec-beta")
    if extra:
        beta.add(f"{NAME}-taskexecutor-beta")
    assert set(before) - set(after) == beta and beta <= set(before)
    assert after == {k: v for k, v in before.items() if k not in beta}
    # Globally disabled: no policy at all.
    assert by_kind(render(base(version, isolation=isolation, placement=placement,
                               networkPolicy={"enabled": False}, **extra)), "NetworkPolicy") == []


@pytest.mark.parametrize("version", [GRPC_ERA, HTTP_ERA])
def test_adding_a_pool_leaves_the_superlink_policy_unchanged(version):
    raw = base(version)
    before = _superlink_policy(render(raw))
    raw["supernodes"]["pools"].append({"name": "gamma", "replicas": 2})
    objects = render(raw)
    assert _superlink_policy(objects) == before
    gamma = get(objects, "NetworkPolicy", f"{NAME}-supernode-gamma")
    assert gamma["spec"]["podSelector"] == {"matchLabels": {INSTANCE: NAME, COMPONENT: "supernode", POOL: "gamma"}}


# --- ServiceAccounts and RBAC ---------------------------------------------------------


@pytest.mark.parametrize("sid", STACK_IDS + [DEV])
def test_every_workload_runs_under_its_own_service_account(sid):
    plan, objects = plan_of(sid), objects_of(sid)
    accounts = {sa["metadata"]["name"]: sa for sa in by_kind(objects, "ServiceAccount")}
    k8s_executor = access.kubernetes_executor(plan)
    used = set()
    for w in workloads(objects):
        spec = w["spec"]["template"]["spec"]
        sa_name = spec["serviceAccountName"]
        assert sa_name == w["metadata"]["name"] and sa_name in accounts
        assert accounts[sa_name]["metadata"]["namespace"] == w["metadata"]["namespace"]
        used.add(sa_name)
        is_superexec = w["metadata"]["labels"][COMPONENT].startswith("superexec")
        token = k8s_executor and is_superexec
        assert spec["automountServiceAccountToken"] is token, w["metadata"]["name"]
        assert accounts[sa_name]["automountServiceAccountToken"] is token
    # The only other account is the task pods', which never gets a token.
    assert set(accounts) - used == ({f"{NAME}-taskexecutor"} if k8s_executor else set())
    for name in set(accounts) - used:
        assert accounts[name]["automountServiceAccountToken"] is False
    assert not by_kind(objects, "ClusterRole") and not by_kind(objects, "ClusterRoleBinding")
    if not k8s_executor and not plan.spec.rbac.viewer_groups:
        assert not by_kind(objects, "Role") and not by_kind(objects, "RoleBinding")


@pytest.mark.parametrize("sid", ["grpc-executor-kubernetes", "http-executor-kubernetes"])
def test_kubernetes_executor_rbac_is_exact_and_namespaced(sid):
    objects = objects_of(sid)
    role = get(objects, "Role", f"{NAME}-executor")
    assert role["metadata"]["namespace"] == NS
    assert role["rules"] == [
        {"apiGroups": [""], "resources": ["pods"], "verbs": ["create", "delete", "list", "patch"]},
        {"apiGroups": [""], "resources": ["pods/exec"], "verbs": ["create", "get"]},
        {"apiGroups": [""], "resources": ["secrets"], "verbs": ["create", "delete", "list"]},
    ]
    superexecs = sorted(w["metadata"]["name"] for w in workloads(objects)
                        if w["metadata"]["labels"][COMPONENT].startswith("superexec"))
    assert superexecs == [f"{NAME}-superexec-alpha", f"{NAME}-superexec-beta", f"{NAME}-superexec-serverapp"]
    bindings = [b for b in by_kind(objects, "RoleBinding") if b["roleRef"]["name"] == f"{NAME}-executor"]
    assert sorted(b["subjects"][0]["name"] for b in bindings) == superexecs
    for b in bindings:
        assert b["metadata"]["namespace"] == NS
        assert b["roleRef"] == {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": f"{NAME}-executor"}
        assert b["subjects"] == [{"kind": "ServiceAccount", "name": b["subjects"][0]["name"], "namespace": NS}]
    # The SuperExecs run the executor from the mounted config.
    for name in superexecs:
        kind = "Deployment" if name.endswith("serverapp") else "StatefulSet"
        w = get(objects, kind, name)
        c = w["spec"]["template"]["spec"]["containers"][0]
        assert arg_after(c["args"], "--executor") == "kubernetes"
        assert arg_after(c["args"], "--executor-config") == "/etc/flower/executor/executor.yaml"
        assert mounts_by_name(c)["executor-config"] == {"name": "executor-config", "mountPath": "/etc/flower/executor",
                                                         "readOnly": True}
        cm = volumes_by_name(w)["executor-config"]["configMap"]["name"]
        assert cm == f"{name}-executor" and get(objects, "ConfigMap", cm)


@pytest.mark.parametrize("sid", ["grpc-executor-kubernetes", "http-executor-kubernetes"])
def test_executor_config_keeps_task_pods_confined(sid):
    plan, objects = plan_of(sid), objects_of(sid)
    configs = executor_configs(objects)
    assert set(configs) == {f"{NAME}-superexec-serverapp-executor", f"{NAME}-superexec-alpha-executor",
                            f"{NAME}-superexec-beta-executor"}
    task_sa = get(objects, "ServiceAccount", configs[f"{NAME}-superexec-alpha-executor"]["service-account-name"])
    assert task_sa["automountServiceAccountToken"] is False
    bound = {s["name"] for b in by_kind(objects, "RoleBinding") for s in b["subjects"]}
    assert task_sa["metadata"]["name"] not in bound
    for name, cfg in configs.items():
        role = "serverapp" if "serverapp" in name else name.split("-")[2]
        assert cfg["namespace"] == NS
        assert cfg["image"] == f"flwr/superexec:{plan.version}"
        assert cfg["service-account-name"] == f"{NAME}-taskexecutor"
        assert cfg["pod-security-context"] == RESTRICTED_POD_SC
        assert cfg["container-security-context"] == RESTRICTED_CONTAINER_SC
        assert cfg["resources"] == {"requests": DEFAULT_REQUESTS}
        assert cfg["labels"] == {INSTANCE: NAME, COMPONENT: "taskexecutor", TASK_ROLE: role}
        policy = get(objects, "NetworkPolicy", f"{NAME}-taskexecutor-{role}")
        assert _selects(policy["spec"]["podSelector"], cfg["labels"])
        # ...and no other workload's policy selects them.
        others = [p for p in by_kind(objects, "NetworkPolicy")
                  if p is not policy and _selects(p["spec"]["podSelector"], cfg["labels"])]
        assert others == []
    if sid.startswith("http"):
        assert all(cfg["active-pod-budget"] == 4 for cfg in configs.values())


def test_executor_image_and_user_config_reach_the_executor_config():
    raw = base(EXECUTOR_GRPC, isolation="process", placement="distributed", executor={
        "type": "kubernetes", "image": "registry.example.com/tasks:1.32.1",
        "config": {"labels": {"team": "ml"}, "node-selector": {"pool": "cpu"}}})
    for cfg in executor_configs(render(raw)).values():
        assert cfg["image"] == "registry.example.com/tasks:1.32.1"
        assert cfg["node-selector"] == {"pool": "cpu"}
        # User labels are added; the ones the NetworkPolicy selects stay.
        assert cfg["labels"]["team"] == "ml" and cfg["labels"][COMPONENT] == "taskexecutor"


@pytest.mark.parametrize("sid", ["grpc-networkpolicy-knobs", "http-networkpolicy-knobs"])
def test_viewer_role_is_read_only_without_secrets(sid):
    objects = objects_of(sid)
    role = get(objects, "Role", f"{NAME}-viewer")
    assert role["metadata"]["namespace"] == NS
    resources = [r for rule in role["rules"] for r in rule["resources"]]
    assert {"pods", "pods/log", "statefulsets", "networkpolicies"} <= set(resources)
    assert "secrets" not in resources and "*" not in resources
    for rule in role["rules"]:
        assert set(rule["verbs"]) <= {"get", "list", "watch"}
        assert "*" not in rule["apiGroups"]
    binding = get(objects, "RoleBinding", f"{NAME}-viewer")
    assert binding["roleRef"] == {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": f"{NAME}-viewer"}
    assert binding["subjects"] == [{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": "ml-team"}]
    two = render(base(HTTP_ERA, rbac={"viewerGroups": ["ml-team", "auditors"]}))
    assert [s["name"] for s in get(two, "RoleBinding", f"{NAME}-viewer")["subjects"]] == ["ml-team", "auditors"]


# --- probes ---------------------------------------------------------------------------


def _health_port(c: dict) -> Optional[int]:
    if "--health-server-address" not in c["args"]:
        return None
    host, port = arg_after(c["args"], "--health-server-address").rsplit(":", 1)
    assert host == "0.0.0.0"  # the kubelet probes the pod IP
    return int(port)


@pytest.mark.parametrize("sid", STACK_IDS + [DEV])
def test_probes_hit_the_real_health_endpoints(sid):
    plan, objects = plan_of(sid), objects_of(sid)
    grpc_era = plan.ports.serverappio is not None
    seen = set()
    for w in workloads(objects):
        pod_ports = []
        for c in w["spec"]["template"]["spec"]["containers"]:
            assert c["name"] in MANAGED_CONTAINERS
            seen.add(c["name"])
            for probe in ("livenessProbe", "readinessProbe"):
                assert probe in c, (w["metadata"]["name"], c["name"], probe)
            if c["name"] == "superlink" and not grpc_era:
                assert _health_port(c) is None
                scheme = "HTTP" if plan.spec.insecure else "HTTPS"
                for probe in ("livenessProbe", "readinessProbe"):
                    assert c[probe]["httpGet"] == {"path": "/health", "port": "api", "scheme": scheme}
                assert "api" in {p["name"] for p in c["ports"]}
                continue
            port = _health_port(c)
            sidecar = c["name"].startswith("superexec") and len(w["spec"]["template"]["spec"]["containers"]) > 1
            assert port == (8082 if sidecar else 8081), (w["metadata"]["name"], c["name"])
            pod_ports.append(port)
            for probe in ("livenessProbe", "readinessProbe"):
                assert c[probe]["grpc"] == {"port": port}
                assert "httpGet" not in c[probe]
        assert len(pod_ports) == len(set(pod_ports)), w["metadata"]["name"]  # no clash within a pod
    assert {"superlink", "supernode"} <= seen


def _probe_settings(c: dict, probe: str) -> Optional[tuple]:
    p = c.get(probe)
    if p is None:
        return None
    return (p["initialDelaySeconds"], p["periodSeconds"], p["timeoutSeconds"], p["failureThreshold"],
            p["successThreshold"])


def test_probe_settings_are_configurable_globally_and_per_side():
    default = (0, 10, 1, 3, 1)
    custom = {"livenessProbe": {"initialDelaySeconds": 5, "periodSeconds": 20, "timeoutSeconds": 2,
                                "failureThreshold": 6},
              "readinessProbe": {"periodSeconds": 5, "successThreshold": 2}}
    objects = render(base(GRPC_ERA, isolation="process", probes=custom))
    for _, c in containers(objects):
        assert _probe_settings(c, "livenessProbe") == (5, 20, 2, 6, 1)
        assert _probe_settings(c, "readinessProbe") == (0, 5, 1, 3, 2)
    # Per side: superlink.probes replaces the global settings for the SuperLink side
    # (and its sidecar SuperExec); supernodes.probes for SuperNodes and their SuperExecs.
    raw = base(GRPC_ERA, isolation="process", probes=custom)
    raw["superlink"]["probes"] = {"readinessProbe": {"enabled": False}}
    raw["supernodes"]["probes"] = {"livenessProbe": {"enabled": False}, "readinessProbe": {"timeoutSeconds": 4}}
    objects = render(raw)
    sts = f"{NAME}-superlink"
    for name in ("superlink", "superexec-serverapp"):
        c = container(objects, "StatefulSet", sts, name)
        assert _probe_settings(c, "livenessProbe") == default
        assert "readinessProbe" not in c
    for pool in ("alpha", "beta"):
        for name in ("supernode", "superexec-clientapp"):
            c = container(objects, "StatefulSet", f"{NAME}-supernode-{pool}", name)
            assert "livenessProbe" not in c
            assert _probe_settings(c, "readinessProbe") == (0, 10, 4, 3, 1)


def test_http_era_superlink_probe_is_plain_http_when_insecure():
    c = container(objects_of("http-insecure"), "StatefulSet", f"{NAME}-superlink", "superlink")
    assert c["readinessProbe"]["httpGet"]["scheme"] == "HTTP"
    c = container(objects_of("http-generate"), "StatefulSet", f"{NAME}-superlink", "superlink")
    assert c["readinessProbe"]["httpGet"]["scheme"] == "HTTPS"


# --- PodDisruptionBudgets -------------------------------------------------------------


@pytest.mark.parametrize("sid", STACK_IDS)
def test_one_disruption_budget_per_pool(sid):
    plan, objects = plan_of(sid), objects_of(sid)
    kind = "DaemonSet" if plan.spec.mode == "DaemonSet" else "StatefulSet"
    pdbs = by_kind(objects, "PodDisruptionBudget")
    assert {p["metadata"]["name"] for p in pdbs} == {f"{NAME}-supernode-alpha", f"{NAME}-supernode-beta"}
    groups = pod_groups(objects)
    for pdb in pdbs:
        workload = get(objects, kind, pdb["metadata"]["name"])
        assert pdb["spec"]["selector"] == workload["spec"]["selector"]
        assert pdb["spec"]["maxUnavailable"] == 1 and "minAvailable" not in pdb["spec"]
        # It covers exactly that pool's SuperNodes (not its SuperExecs).
        covered = [gid for gid, labels in groups.items() if _selects(pdb["spec"]["selector"], labels)]
        assert covered == [f"{kind}/{pdb['metadata']['name']}"]


def test_disruption_budget_settings():
    raw = base(GRPC_ERA)
    raw["supernodes"]["pools"][0]["disruptionBudget"] = {"minAvailable": "50%"}
    raw["supernodes"]["pools"][1]["disruptionBudget"] = {"maxUnavailable": "25%"}
    raw["supernodes"]["pools"].append({"name": "gamma", "replicas": 4, "disruptionBudget": {"minAvailable": 3}})
    raw["supernodes"]["pools"].append({"name": "delta", "replicas": 1, "disruptionBudget": {"enabled": False}})
    objects = render(raw)
    specs = {p["metadata"]["name"]: {k: v for k, v in p["spec"].items() if k != "selector"}
             for p in by_kind(objects, "PodDisruptionBudget")}
    assert specs == {f"{NAME}-supernode-alpha": {"minAvailable": "50%"},
                     f"{NAME}-supernode-beta": {"maxUnavailable": "25%"},
                     f"{NAME}-supernode-gamma": {"minAvailable": 3}}
    assert get(objects, "StatefulSet", f"{NAME}-supernode-delta")


def test_disruption_budget_percentages_above_100_are_refused():
    """The API server refuses a PodDisruptionBudget whose minAvailable/maxUnavailable is
    a percentage above 100% (IsNotMoreThan100Percent); validation should say so first."""
    raw = base(GRPC_ERA)
    raw["supernodes"]["pools"][0]["disruptionBudget"] = {"maxUnavailable": "150%"}
    with pytest.raises(ConfigError) as err:
        load_plan(raw, "dev")
    assert [p.path for p in err.value.problems] == ["federation.supernodes.pools[0].disruptionBudget.maxUnavailable"]


# --- resources ------------------------------------------------------------------------


@pytest.mark.parametrize("sid", STACK_IDS)
def test_every_managed_container_requests_the_defaults(sid):
    count = 0
    for _, c in containers(objects_of(sid)):
        assert c["resources"] == {"requests": DEFAULT_REQUESTS}, c["name"]
        count += 1
    assert count >= 3


def _requests_within_limits(objects) -> None:
    for w, c in containers(objects):
        limits, requests = c["resources"].get("limits", {}), c["resources"].get("requests", {})
        for name, amount in requests.items():
            if name in limits:
                assert parse_quantity(str(amount)) <= parse_quantity(str(limits[name])), \
                    (w["metadata"]["name"], c["name"], name, amount, limits[name])


def test_component_resources_override_the_defaults_key_by_key():
    raw = base(GRPC_ERA, isolation="process", superlink={
        "superexecImage": f"flwr/superexec:{GRPC_ERA}",
        "resources": {"requests": {"cpu": "2"}},
        "superexecResources": {"limits": {"cpu": "1"}}})
    raw["supernodes"]["pools"][0]["supernodeResources"] = {"limits": {"memory": "128Mi"}}
    raw["supernodes"]["pools"][0]["superexecResources"] = {"requests": {"memory": "1Gi"}, "limits": {"nvidia.com/gpu": 1}}
    objects = render(raw)
    res = {(w["metadata"]["name"], c["name"]): c["resources"] for w, c in containers(objects)}
    assert res[(f"{NAME}-superlink", "superlink")] == {"requests": {"cpu": "2", "memory": "256Mi"}}
    assert res[(f"{NAME}-superlink", "superexec-serverapp")] == {"requests": DEFAULT_REQUESTS, "limits": {"cpu": "1"}}
    # A memory limit below the default request lowers the request.
    assert res[(f"{NAME}-supernode-alpha", "supernode")] == {"requests": {"cpu": "100m", "memory": "128Mi"},
                                                              "limits": {"memory": "128Mi"}}
    assert res[(f"{NAME}-supernode-alpha", "superexec-clientapp")] == {
        "requests": {"cpu": "100m", "memory": "1Gi"}, "limits": {"nvidia.com/gpu": 1}}
    assert res[(f"{NAME}-supernode-beta", "supernode")] == {"requests": DEFAULT_REQUESTS}
    _requests_within_limits(objects)


def test_default_resources_are_configurable_and_lowered_under_own_limits():
    raw = base(HTTP_ERA, defaultResources={"requests": {"cpu": "1", "memory": "512Mi"}, "limits": {"memory": "2Gi"}},
               superlink={"resources": {"limits": {"cpu": "500m", "memory": "100Mi"}}})
    objects = render(raw)
    res = {(w["metadata"]["name"], c["name"]): c["resources"] for w, c in containers(objects)}
    assert res[(f"{NAME}-superlink", "superlink")] == {"requests": {"cpu": "500m", "memory": "100Mi"},
                                                      "limits": {"cpu": "500m", "memory": "100Mi"}}
    assert res[(f"{NAME}-supernode-alpha", "supernode")] == {"requests": {"cpu": "1", "memory": "512Mi"},
                                                              "limits": {"memory": "2Gi"}}
    _requests_within_limits(objects)


def test_a_request_is_never_rendered_above_its_limit():
    """A component's own request above an inherited default limit (defaults give every
    container a 1Gi memory limit, one pool needs 2Gi) renders a pod the API server
    refuses (requests must be <= limits). Either the limit follows the request, or
    validation reports it before anything is applied."""
    raw = base(GRPC_ERA, defaultResources={"requests": {"cpu": "100m", "memory": "256Mi"}, "limits": {"memory": "1Gi"}})
    raw["supernodes"]["pools"][0]["supernodeResources"] = {"requests": {"memory": "2Gi"}}
    try:
        objects = render(raw)
    except ConfigError as err:
        assert any(p.path.startswith("federation.supernodes.pools[0].supernodeResources") for p in err.problems)
        return
    _requests_within_limits(objects)


# --- TLS ------------------------------------------------------------------------------

TRUST = {
    # stack suffix -> (server Secret, CA Secret, CA key)
    "generate": ("sec-superlink-tls", "sec-ca", "ca.crt"),
    "nodeauth": ("sec-superlink-tls", "sec-ca", "ca.crt"),
    "certmanager": ("sec-superlink-tls", "sec-ca", "ca.crt"),
    "existing-copy": ("my-tls", "sec-ca", "ca.crt"),
    "existing-ca": ("my-tls", "my-ca", "root.pem"),
}


@pytest.mark.parametrize("sid", [s for s in STACK_IDS if not s.endswith("insecure")])
def test_tls_material_is_mounted_where_it_belongs(sid):
    plan, objects = plan_of(sid), objects_of(sid)
    suffix = sid.split("-", 1)[1]
    if suffix in TRUST:
        assert (plan.trust.server_secret, plan.trust.ca_secret, plan.trust.ca_key) == TRUST[suffix]
    server, ca, ca_key = plan.trust.server_secret, plan.trust.ca_secret, plan.trust.ca_key
    assert server != ca
    ca_volume = {"name": "ca", "secret": {"secretName": ca, "defaultMode": 0o444,
                                          "items": [{"key": ca_key, "path": "ca.crt"}]}}
    link = get(objects, "StatefulSet", f"{NAME}-superlink")
    vols = volumes_by_name(link)
    assert vols["tls"] == {"name": "tls", "secret": {"secretName": server, "defaultMode": 0o440,
                                                     "items": [{"key": "tls.crt", "path": "tls.crt"},
                                                               {"key": "tls.key", "path": "tls.key"}]}}
    assert vols["ca"] == ca_volume
    main = container(objects, "StatefulSet", f"{NAME}-superlink", "superlink")
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
            if secret and m["name"] != "node-auth":
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
    plan, objects = plan_of(sid), objects_of(sid)
    assert plan.trust is None
    for w, c in containers(objects):
        assert not [v for v in w["spec"]["template"]["spec"]["volumes"] if "secret" in v]
        assert not [a for a in c["args"] if a.startswith("--ssl-") or a == "--root-certificates"]
        assert not {"tls", "ca"} & set(mounts_by_name(c))
        if c["name"] in ("superlink", "supernode"):
            assert "--insecure" in c["args"]


# --- node authentication --------------------------------------------------------------

NODE_AUTH_STACKS = [s for s in STACK_IDS if STACKS[s].get("nodeAuth", {}).get("enabled")]


def test_node_auth_is_covered_in_both_modes_and_eras():
    assert {"grpc-nodeauth", "grpc-process-sidecar-nodeauth", "http-daemonset-supplied-keys",
            "http-executor-kubernetes", "http-nodeauth"} <= set(NODE_AUTH_STACKS)


@pytest.mark.parametrize("sid", NODE_AUTH_STACKS)
def test_each_supernode_uses_its_own_key(sid):
    plan, objects = plan_of(sid), objects_of(sid)
    link = container(objects, "StatefulSet", f"{NAME}-superlink", "superlink")
    assert link["args"].count("--enable-supernode-auth") == 1
    stateful = plan.spec.mode == "StatefulSet"
    var = "FLOWER_POD_INDEX" if stateful else "FLOWER_NODE_NAME"
    field = "metadata.labels['apps.kubernetes.io/pod-index']" if stateful else "spec.nodeName"
    for pool in plan.spec.supernodes.pools:
        w = get(objects, "StatefulSet" if stateful else "DaemonSet", f"{NAME}-supernode-{pool.name}")
        node = next(c for c in w["spec"]["template"]["spec"]["containers"] if c["name"] == "supernode")
        assert arg_after(node["args"], "--auth-supernode-private-key") == f"/etc/flower/node-auth/node-$({var}).key"
        assert {"name": var, "valueFrom": {"fieldRef": {"fieldPath": field}}} in node["env"]
        secret_name = f"{NAME}-supernode-{pool.name}-node-keys"
        assert volumes_by_name(w)["node-auth"] == {"name": "node-auth",
                                                    "secret": {"secretName": secret_name, "defaultMode": 0o440}}
        assert mounts_by_name(node)["node-auth"] == {"name": "node-auth", "mountPath": "/etc/flower/node-auth",
                                                      "readOnly": True}
        # Only the SuperNode container sees the keys.
        for c in w["spec"]["template"]["spec"]["containers"]:
            if c is not node:
                assert "node-auth" not in mounts_by_name(c)
        # Every pod resolves its path to a key file of the pool's Secret, each a different one.
        slots = nodeauth.slots(plan, pool, plan.node_auth_keys)
        keys = plan.node_auth_keys[pool.name] if plan.node_auth_keys else {s: f"key-{s}" for s in slots}
        files = set(nodeauth.key_secret(plan, pool, keys)["stringData"])
        if stateful:
            assert slots == [str(i) for i in range(pool.replicas)]
            pods = [pod_for(w, i) for i in range(pool.replicas)]
        else:
            assert slots == sorted(supplied_keys()[pool.name])
            pods = [pod_for(w, node=n) for n in slots]
        paths = [arg_after(container_argv(node, pod), "--auth-supernode-private-key") for pod in pods]
        assert len(set(paths)) == len(pods)
        assert {p.rsplit("/", 1)[1] for p in paths} == files


@pytest.mark.parametrize("sid", [s for s in STACK_IDS if s not in NODE_AUTH_STACKS])
def test_no_node_auth_unless_enabled(sid):
    for w, c in containers(objects_of(sid)):
        assert "--enable-supernode-auth" not in c["args"] and "--auth-supernode-private-key" not in c["args"]
        assert "node-auth" not in volumes_by_name(w)


# --- config validation ----------------------------------------------------------------


def _errors(raw: dict, **kw: Any) -> ConfigError:
    with pytest.raises(ConfigError) as err:
        load_plan(raw, "dev", **kw)
    return err.value


def assert_problems(err: ConfigError, expected: list[str]) -> None:
    lines = str(err).splitlines()
    for line in expected:
        assert f"  - {line}" in lines, f"missing {line!r} in:\n{err}"
    assert len(err.problems) == len(expected), str(err)


def _pool_field(raw: dict, i: int, **fields: Any) -> dict:
    raw["supernodes"]["pools"][i].update(fields)
    return raw


CM = {"issuerRef": {"name": "ca"}}
DAEMONSET_GENERATE = ("a DaemonSet's pods are not known in advance, so per-node keys cannot be generated; set "
                      "keySource: config and supply one key per Kubernetes node name in the secret config "
                      "nodeAuthKeys ({pool: {node-name: key}})")

CONFIG_CASES = {
    "node-auth-insecure": (
        base(insecure=True, nodeAuth={"enabled": True}),
        ["federation.nodeAuth.enabled: node authentication needs TLS (the SuperLink refuses it with insecure: true)"]),
    "node-auth-daemonset-generate": (
        base(mode="DaemonSet", nodeAuth={"enabled": True}),
        [f"federation.nodeAuth.keySource: {DAEMONSET_GENERATE}"]),
    "node-auth-before-1.23": (
        base("1.21.0", nodeAuth={"enabled": True}),
        ["federation.nodeAuth.enabled: node authentication with `flwr supernode register` needs Flower 1.23.0 "
         "or later; this federation runs 1.21.0"]),
    "tls-with-insecure": (
        base(insecure=True, tls={"source": "generate"}),
        ["federation.tls: TLS settings have no effect with insecure: true; remove one of the two"]),
    "existing-secret-unnamed": (
        base(tls={"source": "existingSecret"}),
        ["federation.tls.existingSecret: name the kubernetes.io/tls Secret (tls.crt, tls.key, optional ca.crt) "
         "for source existingSecret"]),
    "existing-secret-without-its-source": (
        base(tls={"existingSecret": "my-tls"}),
        ["federation.tls.existingSecret: only used with tls.source: existingSecret (source is generate)"]),
    "cert-manager-without-issuer": (
        base(tls={"source": "certManager"}),
        ["federation.tls.certManager.issuerRef: name the cert-manager Issuer or ClusterIssuer for source certManager"]),
    "bad-durations": (
        base(tls={"source": "certManager", "certManager": {**CM, "duration": "1y", "renewBefore": "15d"}}),
        ["federation.tls.certManager.duration: '1y' is not a duration (e.g. 43800h, 360h)",
         "federation.tls.certManager.renewBefore: '15d' is not a duration (e.g. 43800h, 360h)"]),
    "early-renewal-not-below-validity": (
        base(tls={"generate": {"validityHours": 720}}),
        ["federation.tls.generate.earlyRenewalHours: must be less than validityHours (720)"]),
    "generated-trust-without-generated-ca": (
        base(tls={"source": "existingSecret", "existingSecret": "my-tls", "trust": {"source": "generated"}}),
        ["federation.tls.trust.source: there is no generated CA with tls.source existingSecret; use "
         "copyFromServerSecret or existingSecret"]),
    "trust-existing-secret-unnamed": (
        base(tls={"trust": {"source": "existingSecret"}}),
        ["federation.tls.trust.existingSecret: name the Secret holding the CA certificate for trust.source "
         "existingSecret"]),
    "bad-dns-names-and-ips": (
        base(tls={"dnsNames": ["flower.example.com", "Bad_Name", "-x"], "ipAddresses": ["10.0.0.1", "999.1.1.1", "::1", "nope"]}),
        ["federation.tls.dnsNames[1]: 'Bad_Name' is not a DNS name",
         "federation.tls.dnsNames[2]: '-x' is not a DNS name",
         "federation.tls.ipAddresses[1]: '999.1.1.1' is not an IP address",
         "federation.tls.ipAddresses[3]: 'nope' is not an IP address"]),
    "extra-rules-unknown-field": (
        _pool_field(base(), 1, networkPolicy={"extraIngress": [{"ports": [{"port": 1}]}, {"from": [], "bogus": 1}],
                                              "extraEgress": [{"to": "x"}]}),
        ["federation.supernodes.pools[1].networkPolicy.extraIngress[1]: not a Kubernetes field here: Additional "
         "properties are not allowed ('bogus' was unexpected)",
         "federation.supernodes.pools[1].networkPolicy.extraEgress[0].to: 'x' is not of type 'array', 'null'"]),
    "ns-pod-labels-without-ns-labels": (
        base(superlink={"networkPolicy": {"ingressNSPodMatchLabels": {"role": "cli"}}}),
        ["federation.superlink.networkPolicy.ingressNSPodMatchLabels: only used together with ingressNSMatchLabels"]),
    "liveness-success-threshold": (
        base(probes={"livenessProbe": {"successThreshold": 2}},
             superlink={"probes": {"livenessProbe": {"successThreshold": 3}, "readinessProbe": {"successThreshold": 3}}}),
        ["federation.probes.livenessProbe.successThreshold: must be 1 for a liveness probe (a Kubernetes rule)",
         "federation.superlink.probes.livenessProbe.successThreshold: must be 1 for a liveness probe (a Kubernetes rule)"]),
    "executor-with-subprocess-isolation": (
        base(executor={"type": "kubernetes"}),
        ["federation.executor.type: the Kubernetes executor runs in the SuperExecs: it needs isolationMode=process"]),
    "executor-with-sidecar": (
        base(isolation="process", executor={"type": "kubernetes"}),
        ["federation.executor.type: the Kubernetes executor's pods dial the SuperExec's API address, which a "
         "sidecar has only on its pod's loopback: set superexecPlacement: distributed"]),
    "executor-before-1.32-and-managed-keys": (
        base(GRPC_ERA, isolation="process", placement="distributed",
             executor={"type": "kubernetes", "config": {"namespace": "other", "service-account-name": "admin"}}),
        ["federation.executor.type: the Kubernetes executor needs Flower 1.32.0 or later; this federation runs 1.26.1",
         "federation.executor.config.namespace: set by flower-federation (RBAC and NetworkPolicies depend on it)",
         "federation.executor.config.service-account-name: set by flower-federation (RBAC and NetworkPolicies "
         "depend on it)"]),
    "executor-settings-without-executor": (
        base(executor={"image": "x:1", "config": {"a": 1}}),
        ["federation.executor.image: only used with executor.type: kubernetes",
         "federation.executor.config: only used with executor.type: kubernetes"]),
    "disruption-budget": (
        _pool_field(_pool_field(base(), 0, disruptionBudget={"maxUnavailable": 1, "minAvailable": "50%"}),
                    1, disruptionBudget={"maxUnavailable": "half", "minAvailable": -1}),
        ["federation.supernodes.pools[0].disruptionBudget: set maxUnavailable or minAvailable, not both",
         "federation.supernodes.pools[1].disruptionBudget: set maxUnavailable or minAvailable, not both",
         "federation.supernodes.pools[1].disruptionBudget.maxUnavailable: 'half' must be a count or a percentage "
         "from 0% to 100%",
         "federation.supernodes.pools[1].disruptionBudget.minAvailable: must not be negative"]),
    "security-context-not-a-mapping": (
        base(securityContext="restricted"),
        ["federation.securityContext: must be a mapping"]),
    "security-contexts-wrong-types": (
        base(securityContext={"runAsUser": "root"}, podSecurityContext={"runAsNonRoot": "yes"}),
        ["federation.securityContext.runAsUser: 'root' is not of type 'integer', 'null'",
         "federation.podSecurityContext.runAsNonRoot: 'yes' is not of type 'boolean', 'null'"]),
}


@pytest.mark.parametrize("case", sorted(CONFIG_CASES))
def test_config_rules(case):
    raw, expected = CONFIG_CASES[case]
    assert_problems(_errors(copy.deepcopy(raw)), expected)


def test_cert_manager_renew_before_must_be_shorter_than_duration():
    """cert-manager's webhook refuses renewBefore >= duration; like earlyRenewalHours for
    generated certificates, validation should report it at the config path."""
    err = _errors(base(tls={"source": "certManager", "certManager": {**CM, "duration": "240h", "renewBefore": "360h"}}))
    assert [p.path for p in err.problems] == ["federation.tls.certManager.renewBefore"]


# --- supplied node keys (nodeAuthKeys) ------------------------------------------------

KEY_CONFIG = {"enabled": True, "keySource": "config"}
KEY_HINT = "must be an ECDSA P-384 private key in OpenSSH format (ssh-keygen -t ecdsa -b 384 -N '' -f key)"


@functools.lru_cache(maxsize=None)
def _keys(n: int = 8) -> tuple[str, ...]:
    return tuple(new_openssh_key() for _ in range(n))


def _full_keys() -> dict[str, dict[str, str]]:
    k = _keys()
    return {"alpha": {"0": k[0], "1": k[1], "2": k[2]}, "beta": {"0": k[3]}}


def test_supplied_keys_are_accepted_and_normalised():
    k = _keys()
    plan = load_plan(base(nodeAuth=KEY_CONFIG), "dev", node_auth_keys={"alpha": {0: k[0], 1: k[1], 2: k[2]},
                                                                        "beta": {0: k[3]}})
    assert plan.node_auth_keys == _full_keys()
    pool = plan.spec.supernodes.pools[0]
    assert nodeauth.key_secret(plan, pool, plan.node_auth_keys["alpha"])["stringData"] == {
        "node-0.key": k[0], "node-1.key": k[1], "node-2.key": k[2]}


@functools.lru_cache(maxsize=None)
def _wrong_keys() -> dict[str, str]:
    rsa_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    return {"rsa": rsa_key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.OpenSSH,
                                         serialization.NoEncryption()).decode(),
            "p256": new_openssh_key("P256"),
            "garbage": "-----BEGIN OPENSSH PRIVATE KEY-----\nbm90IGEga2V5\n-----END OPENSSH PRIVATE KEY-----\n"}


def _supplied_cases() -> dict[str, tuple]:
    k = _keys()
    full = _full_keys()
    wrong = _wrong_keys()
    return {
        "missing-entirely": (None, [
            "nodeAuthKeys: missing: nodeAuth.keySource is config, so set one key per SuperNode with "
            "`pulumi config set --secret --path 'nodeAuthKeys.<pool>.<slot>' \"$(cat key)\"`"]),
        "missing-replicas": ({"alpha": {"0": k[0]}}, [
            "nodeAuthKeys.alpha: missing keys for replicas 1, 2",
            "nodeAuthKeys.beta: missing keys for replicas 0"]),
        "extra-ordinal": ({**full, "alpha": {**full["alpha"], "3": k[4]}}, [
            "nodeAuthKeys.alpha[\"3\"]: pool 'alpha' has replicas 0..2; no SuperNode would use this key"]),
        "wrong-key-types": ({**full, "alpha": {"0": wrong["rsa"], "1": wrong["p256"], "2": wrong["garbage"]}}, [
            f"nodeAuthKeys.alpha[\"0\"]: {KEY_HINT}",
            f"nodeAuthKeys.alpha[\"1\"]: {KEY_HINT}",
            f"nodeAuthKeys.alpha[\"2\"]: {KEY_HINT}; it could not be read (passphrase-protected keys are not supported)"]),
        "not-a-key-at-all": ({**full, "beta": {"0": "hunter2"}}, [f"nodeAuthKeys.beta[\"0\"]: {KEY_HINT}"]),
        "duplicate-key": ({"alpha": {"0": k[0], "1": k[1], "2": k[0]}, "beta": {"0": k[1]}}, [
            "nodeAuthKeys.alpha[\"2\"]: the same key as alpha.0: every SuperNode needs its own",
            "nodeAuthKeys.beta[\"0\"]: the same key as alpha.1: every SuperNode needs its own"]),
        "unknown-pool": ({**full, "gamma": {"0": k[5]}}, [
            "nodeAuthKeys.gamma: no pool named 'gamma' (pools: alpha, beta)"]),
    }


@pytest.mark.parametrize("case", ["missing-entirely", "missing-replicas", "extra-ordinal", "wrong-key-types",
                                  "not-a-key-at-all", "duplicate-key", "unknown-pool"])
def test_supplied_key_problems(case):
    keys, expected = _supplied_cases()[case]
    err = _errors(base(nodeAuth=KEY_CONFIG), node_auth_keys=keys)
    assert all(p.path.startswith("nodeAuthKeys") for p in err.problems)
    assert_problems(err, expected)


def test_supplied_daemonset_key_problems():
    k = _keys()
    err = _errors(base(mode="DaemonSet", nodeAuth=KEY_CONFIG), node_auth_keys={"alpha": {"Node_A": k[0]}})
    assert_problems(err, ["nodeAuthKeys.alpha.Node_A: DaemonSet keys are named by Kubernetes node name",
                          "nodeAuthKeys.beta: missing: give one key per Kubernetes node name"])


def test_keys_are_not_read_unless_key_source_is_config():
    plan = load_plan(base(nodeAuth={"enabled": True}), "dev", node_auth_keys={"bogus": "ignored"})
    assert plan.node_auth_keys is None


def test_the_same_key_written_differently_is_still_a_duplicate():
    """`pulumi config set --secret ... "$(cat key)"` drops the key's trailing newline; a
    YAML block scalar keeps it. The same private key under two slots must be refused
    however its text ends, or two SuperNodes share one registered identity."""
    k = _keys()
    keys = {"alpha": {"0": k[0], "1": k[0].rstrip("\n"), "2": k[2]}, "beta": {"0": k[3]}}
    err = _errors(base(nodeAuth=KEY_CONFIG), node_auth_keys=keys)
    assert [p.path for p in err.problems] == ['nodeAuthKeys.alpha["1"]']
    assert "the same key as alpha.0" in err.problems[0].message


# --- startup probes --------------------------------------------------------------------

@pytest.mark.parametrize("version", [GRPC_ERA, HTTP_ERA])
def test_startup_probe_holds_liveness_off_while_a_program_starts(version):
    # A SuperLink killed by liveness during its first migration would leave a
    # half-migrated --database on the PVC; the startup probe gives it 2 minutes.
    templates = pod_templates(load_plan(base(version, nodeAuth={"enabled": True}), "dev"))
    probed = [c for t in templates for c in t["spec"]["containers"] if "livenessProbe" in c]
    assert probed
    for c in probed:
        startup = c["startupProbe"]
        handler = {k: v for k, v in c["livenessProbe"].items() if k in ("grpc", "httpGet")}
        assert handler and handler.items() <= startup.items()
        assert startup["periodSeconds"] * startup["failureThreshold"] == 120
        assert startup["successThreshold"] == 1


def test_startup_probe_is_configurable_and_checked():
    raw = base(HTTP_ERA, probes={"startupProbe": {"enabled": False}})
    templates = pod_templates(load_plan(raw, "dev"))
    assert not any("startupProbe" in c for t in templates for c in t["spec"]["containers"])
    with pytest.raises(ConfigError) as err:
        load_plan(base(HTTP_ERA, superlink={"probes": {"startupProbe": {"successThreshold": 2}}}), "dev")
    assert "federation.superlink.probes.startupProbe.successThreshold: must be 1 for a startup probe (a Kubernetes rule)" in str(err.value)
