"""Rules that span fields: the flower-operator CRD's CEL rules (messages verbatim),
Flower versions, object names, ports, nodeConfig and Kubernetes fragments.

They read the raw config, tolerating wrong types (pydantic reports those), so that one
run lists every problem at once.
"""

from __future__ import annotations

import ipaddress
import re
from typing import Any, Iterator, Optional

from . import nodeconfig
from .dialects import DEFAULT_VERSION, FLWR_CONFIG_TOML_SINCE, KUBERNETES_EXECUTOR_SINCE, NODE_AUTH_SINCE, RUNTIME_DEPS_SINCE, Dialect, FlowerVersion, dialect_for, supported_ranges, version_from_image
from .errors import PathPart, Problem, problem
from .k8s_schema import fragment_errors
from .naming import DNS_LABEL_MAX, STATEFULSET_NAME_MAX, Names, selector_labels
from .quantity import QUANTITY
from .pods import MANAGED_CONTAINERS, RESERVED_ENV, RESERVED_MOUNT_PATHS, RESERVED_VOLUMES

DNS1035 = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
DNS1123 = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
MAX_POOLS = 16

# CEL rules of the operator's CRD, verbatim.
MSG_NO_POOLS = "spec.supernodes.pools must contain at least one pool"
MSG_DS_REPLICAS = "replicas must not be set for pools when mode is DaemonSet"
MSG_STS_REPLICAS = "replicas must be set (>=1) for every pool when mode is StatefulSet"
MSG_SUPEREXEC_REQUIRED = "spec.superlink.superexecImage is required when isolationMode=process"
MSG_CLIENTAPP_REQUIRED = "spec.supernodes.pools[*].images.superexecClientApp is required when isolationMode=process"
MSG_SUPEREXEC_EMPTY = "spec.superlink.superexecImage must be empty when isolationMode=subprocess"
MSG_CLIENTAPP_EMPTY = "spec.supernodes.pools[*].images.superexecClientApp must be empty when isolationMode=subprocess"
MSG_GPU_VENDOR = "spec.supernodes.pools[*].gpu.vendor is required when gpu.mountAll=true"


def _get(data: Any, *keys: PathPart, default: Any = None) -> Any:
    for k in keys:
        if isinstance(k, int):
            if not isinstance(data, list) or k >= len(data):
                return default
        elif not isinstance(data, dict) or k not in data:
            return default
        data = data[k]
    return data


def _dict(v: Any) -> dict:
    return v if isinstance(v, dict) else {}


def _list(v: Any) -> list:
    return v if isinstance(v, list) else []


def _pools(raw: dict) -> list[tuple[int, dict]]:
    return [(i, p) for i, p in enumerate(_list(_get(raw, "supernodes", "pools"))) if isinstance(p, dict)]


def effective_name(raw: dict, stack: str) -> str:
    name = raw.get("name")
    return name if isinstance(name, str) else stack


def check(raw: dict, stack: str) -> list[Problem]:
    return list(_check(raw, stack))


def _check(raw: dict, stack: str) -> Iterator[Problem]:
    mode = raw.get("mode", "StatefulSet")
    isolation = raw.get("isolationMode", "subprocess")
    pools = _pools(raw)

    yield from _cel_rules(raw, mode, isolation, pools)
    yield from _names(raw, stack, mode, pools)
    dialect = yield from _versions(raw, pools)
    if dialect is not None:
        yield from _ports(raw, dialect)
        root_certs = _get(raw, "cli", "rootCertificates")
        if isinstance(root_certs, str) and not root_certs.startswith("/") and dialect.version >= FLWR_CONFIG_TOML_SINCE:
            yield problem(("cli", "rootCertificates"), f"flwr {dialect.version} needs an absolute path here")
        yield from _version_gates(raw, dialect)
        if raw.get("allowRuntimeDependencyInstallation") is True and dialect.version < RUNTIME_DEPS_SINCE:
            yield problem(("allowRuntimeDependencyInstallation",),
                          f"runtime dependency installation needs Flower {RUNTIME_DEPS_SINCE} or later; "
                          f"this federation runs {dialect.version}")
    size = _get(raw, "superlink", "persistence", "size")
    if isinstance(size, str) and not QUANTITY.match(size):
        yield problem(("superlink", "persistence", "size"), f"'{size}' is not a Kubernetes quantity (e.g. 1Gi)")
    yield from _placement(raw, mode, isolation)
    for i, pool in pools:
        if mode == "DaemonSet" and _list(pool.get("volumeClaimTemplates")):
            yield problem(("supernodes", "pools", i, "volumeClaimTemplates"),
                          "volumeClaimTemplates need mode=StatefulSet (a DaemonSet has no per-pod claims)")
        yield from _node_config(pool, i, mode)
        yield from _gpu(pool, i)
    yield from _fragments(raw, pools)
    yield from _tls(raw)
    yield from _node_auth(raw, mode)
    yield from _network_policies(raw, pools)
    yield from _probes(raw)
    yield from _executor(raw, isolation)
    for i, pool in pools:
        yield from _disruption_budget(pool, i)


# --- security settings ---------------------------------------------------------------

GO_DURATION = re.compile(r"^([0-9]+(\.[0-9]+)?(h|m|s|ms|us|ns))+$")
DNS_NAME = re.compile(r"^(\*\.)?[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
PERCENT = re.compile(r"^[0-9]+%$")
# Keys of Flower's executor config that RBAC and NetworkPolicies depend on.
EXECUTOR_MANAGED_KEYS = ("namespace", "service-account-name")


def go_duration_seconds(text: str) -> float:
    units = {"h": 3600, "m": 60, "s": 1, "ms": 1e-3, "us": 1e-6, "ns": 1e-9}
    return sum(float(n) * units[u] for n, _, u in re.findall(r"([0-9]+(\.[0-9]+)?)(h|ms|us|ns|m|s)", text))


def _version_gates(raw: dict, dialect: Dialect) -> Iterator[Problem]:
    v = dialect.version
    if _get(raw, "nodeAuth", "enabled") is True and v < NODE_AUTH_SINCE:
        yield problem(("nodeAuth", "enabled"), f"node authentication with `flwr supernode register` needs Flower "
                                               f"{NODE_AUTH_SINCE} or later; this federation runs {v}")
    if _get(raw, "executor", "type") == "kubernetes" and v < KUBERNETES_EXECUTOR_SINCE:
        yield problem(("executor", "type"), f"the Kubernetes executor needs Flower {KUBERNETES_EXECUTOR_SINCE} or later; "
                                            f"this federation runs {v}")


def _tls(raw: dict) -> Iterator[Problem]:
    tls = raw.get("tls")
    if not isinstance(tls, dict):
        return
    if raw.get("insecure") is True and tls:
        yield problem(("tls",), "TLS settings have no effect with insecure: true; remove one of the two")
        return
    source = tls.get("source", "generate")
    if source == "existingSecret" and not tls.get("existingSecret"):
        yield problem(("tls", "existingSecret"), "name the kubernetes.io/tls Secret (tls.crt, tls.key, optional ca.crt) for source existingSecret")
    if source != "existingSecret" and tls.get("existingSecret"):
        yield problem(("tls", "existingSecret"), f"only used with tls.source: existingSecret (source is {source})")
    if source == "certManager" and not _get(tls, "certManager", "issuerRef"):
        yield problem(("tls", "certManager", "issuerRef"), "name the cert-manager Issuer or ClusterIssuer for source certManager")
    durations = {}
    for key, default in (("duration", "43800h"), ("renewBefore", "360h")):
        value = _get(tls, "certManager", key, default=default)
        if isinstance(value, str) and not GO_DURATION.match(value):
            yield problem(("tls", "certManager", key), f"'{value}' is not a duration (e.g. 43800h, 360h)")
        elif isinstance(value, str):
            durations[key] = go_duration_seconds(value)
    if len(durations) == 2 and durations["renewBefore"] >= durations["duration"]:
        yield problem(("tls", "certManager", "renewBefore"), "must be shorter than duration (cert-manager refuses it)")
    gen = _dict(tls.get("generate"))
    validity, renewal = gen.get("validityHours", 8760), gen.get("earlyRenewalHours", 720)
    if isinstance(validity, int) and isinstance(renewal, int) and renewal >= validity:
        yield problem(("tls", "generate", "earlyRenewalHours"), f"must be less than validityHours ({validity})")
    trust = _dict(tls.get("trust"))
    trust_source = trust.get("source")
    if trust_source == "generated" and source != "generate":
        yield problem(("tls", "trust", "source"), f"there is no generated CA with tls.source {source}; use copyFromServerSecret or existingSecret")
    if trust_source == "existingSecret" and not trust.get("existingSecret"):
        yield problem(("tls", "trust", "existingSecret"), "name the Secret holding the CA certificate for trust.source existingSecret")
    if trust.get("existingSecret") and trust_source != "existingSecret":
        yield problem(("tls", "trust", "existingSecret"), "only used with trust.source: existingSecret")
    for j, name in enumerate(_list(tls.get("dnsNames"))):
        if isinstance(name, str) and not (DNS_NAME.match(name) and len(name) <= 253):
            yield problem(("tls", "dnsNames", j), f"'{name}' is not a DNS name")
    for j, ip in enumerate(_list(tls.get("ipAddresses"))):
        if isinstance(ip, str):
            try:
                ipaddress.ip_address(ip)
            except ValueError:
                yield problem(("tls", "ipAddresses", j), f"'{ip}' is not an IP address")


def _node_auth(raw: dict, mode: str) -> Iterator[Problem]:
    if _get(raw, "nodeAuth", "enabled") is not True:
        return
    if raw.get("insecure") is True:
        yield problem(("nodeAuth", "enabled"), "node authentication needs TLS (the SuperLink refuses it with insecure: true)")
    if mode == "DaemonSet" and _get(raw, "nodeAuth", "keySource", default="generate") == "generate":
        yield problem(("nodeAuth", "keySource"),
                      "a DaemonSet's pods are not known in advance, so per-node keys cannot be generated; "
                      "set keySource: config and supply one key per Kubernetes node name in the secret config "
                      "nodeAuthKeys ({pool: {node-name: key}})")


def _network_policies(raw: dict, pools) -> Iterator[Problem]:
    sections = [(("networkPolicy",), raw.get("networkPolicy")),
                (("superlink", "networkPolicy"), _get(raw, "superlink", "networkPolicy")),
                (("supernodes", "networkPolicy"), _get(raw, "supernodes", "networkPolicy"))]
    sections += [(("supernodes", "pools", i, "networkPolicy"), p.get("networkPolicy")) for i, p in pools]
    for at, np in sections:
        np = _dict(np)
        yield from _list_fragment(at + ("extraIngress",), np.get("extraIngress"), "networkpolicyingressrule-networking-v1.json")
        yield from _list_fragment(at + ("extraEgress",), np.get("extraEgress"), "networkpolicyegressrule-networking-v1.json")
        if np.get("ingressNSPodMatchLabels") and not np.get("ingressNSMatchLabels"):
            yield problem(at + ("ingressNSPodMatchLabels",), "only used together with ingressNSMatchLabels")


def _probes(raw: dict) -> Iterator[Problem]:
    for at in (("probes",), ("superlink", "probes"), ("supernodes", "probes")):
        for probe in ("livenessProbe", "startupProbe"):
            value = _get(raw, *at, probe, "successThreshold")
            if isinstance(value, int) and value != 1:
                yield problem(at + (probe, "successThreshold"), f"must be 1 for a {probe[:-5]} probe (a Kubernetes rule)")


def _executor(raw: dict, isolation: str) -> Iterator[Problem]:
    executor = _dict(raw.get("executor"))
    kind = executor.get("type", "subprocess")
    if kind != "kubernetes":
        for key in ("image", "config"):
            if executor.get(key):
                yield problem(("executor", key), "only used with executor.type: kubernetes")
        return
    if isolation != "process":
        yield problem(("executor", "type"), "the Kubernetes executor runs in the SuperExecs: it needs isolationMode=process")
    elif raw.get("superexecPlacement") != "distributed":
        yield problem(("executor", "type"), "the Kubernetes executor's pods dial the SuperExec's API address, which a sidecar "
                                            "has only on its pod's loopback: set superexecPlacement: distributed")
    for key in _dict(executor.get("config")):
        if key in EXECUTOR_MANAGED_KEYS:
            yield problem(("executor", "config", key), "set by flower-federation (RBAC and NetworkPolicies depend on it)")


def _disruption_budget(pool: dict, i: int) -> Iterator[Problem]:
    budget = _dict(pool.get("disruptionBudget"))
    at = ("supernodes", "pools", i, "disruptionBudget")
    if budget.get("maxUnavailable") is not None and budget.get("minAvailable") is not None:
        yield problem(at, "set maxUnavailable or minAvailable, not both")
    for key in ("maxUnavailable", "minAvailable"):
        value = budget.get(key)
        if isinstance(value, str) and not (PERCENT.match(value) and int(value[:-1]) <= 100):
            yield problem(at + (key,), f"'{value}' must be a count or a percentage from 0% to 100%")
        if isinstance(value, int) and not isinstance(value, bool) and value < 0:
            yield problem(at + (key,), "must not be negative")


def _cel_rules(raw, mode, isolation, pools) -> Iterator[Problem]:
    raw_pools = _get(raw, "supernodes", "pools")
    if not isinstance(raw_pools, list) or len(raw_pools) == 0:
        yield problem(("supernodes", "pools"), MSG_NO_POOLS)
    elif len(raw_pools) > MAX_POOLS:
        yield problem(("supernodes", "pools"), f"at most {MAX_POOLS} pools are allowed, got {len(raw_pools)}")
    for i, pool in pools:
        at = ("supernodes", "pools", i)
        replicas = pool.get("replicas")
        if mode == "DaemonSet" and replicas is not None:
            yield problem(at + ("replicas",), MSG_DS_REPLICAS)
        if mode == "StatefulSet" and (replicas is None or (isinstance(replicas, int) and not isinstance(replicas, bool) and replicas < 1)):
            yield problem(at + ("replicas",), MSG_STS_REPLICAS)
        clientapp = _get(pool, "images", "superexecClientApp")
        if isolation == "process" and not clientapp:
            yield problem(at + ("images", "superexecClientApp"), MSG_CLIENTAPP_REQUIRED)
        if isolation == "subprocess" and clientapp:
            yield problem(at + ("images", "superexecClientApp"), MSG_CLIENTAPP_EMPTY)
        if _get(pool, "gpu", "mountAll") is True and not _get(pool, "gpu", "vendor"):
            yield problem(at + ("gpu", "vendor"), MSG_GPU_VENDOR)
    superexec = _get(raw, "superlink", "superexecImage")
    if isolation == "process" and not superexec:
        yield problem(("superlink", "superexecImage"), MSG_SUPEREXEC_REQUIRED)
    if isolation == "subprocess" and superexec:
        yield problem(("superlink", "superexecImage"), MSG_SUPEREXEC_EMPTY)


def _names(raw, stack, mode, pools) -> Iterator[Problem]:
    name = effective_name(raw, stack)
    name_ok = isinstance(name, str) and bool(DNS1035.match(name))
    if not name_ok:
        where = "name" if "name" in raw else f"stack name '{stack}' (the default for name)"
        yield problem(("name",), f"{where} must be a DNS label: lowercase letters, digits and '-', starting with a letter")
    namespace = raw.get("namespace", "flower")
    if isinstance(namespace, str) and not (DNS1123.match(namespace) and len(namespace) <= DNS_LABEL_MAX):
        yield problem(("namespace",), "must be a DNS label of at most 63 characters")

    names = Names(name if name_ok else "x")
    fixed = [(names.superlink, STATEFULSET_NAME_MAX, "StatefulSet")]
    if raw.get("superexecPlacement") == "distributed":  # objects that exist only then
        fixed += [(names.superlink_appio_service, DNS_LABEL_MAX, "Service"),
                  (names.superexec_serverapp, DNS_LABEL_MAX, "Deployment")]
    if name_ok:
        for obj, limit, kind in fixed:
            if len(obj) > limit:
                yield problem(("name",), _too_long(obj, limit, kind))

    seen: dict[str, int] = {}
    for i, pool in pools:
        at = ("supernodes", "pools", i, "name")
        pname = pool.get("name")
        if not isinstance(pname, str):
            continue
        if not DNS1123.match(pname):
            yield problem(at, "pool names must be DNS labels: lowercase letters, digits and '-'")
            continue
        if pname in seen:
            yield problem(at, f"duplicate pool name '{pname}' (also supernodes.pools[{seen[pname]}])")
        seen.setdefault(pname, i)
        if name_ok:
            limit, kind = (STATEFULSET_NAME_MAX, "StatefulSet") if mode == "StatefulSet" else (DNS_LABEL_MAX, "DaemonSet")
            objs = [names.pool(pname)] + ([names.pool_superexec(pname)] if raw.get("superexecPlacement") == "distributed" else [])
            for obj in objs:
                if len(obj) > limit:
                    yield problem(at, _too_long(obj, limit, kind))


def _too_long(obj: str, limit: int, kind: str) -> str:
    why = " (Kubernetes adds a revision hash to it)" if kind == "StatefulSet" else ""
    return f"object name '{obj}' has {len(obj)} characters; a {kind} name may have at most {limit}{why}"


def resolve_version(raw: dict) -> tuple[Optional[FlowerVersion], Optional[str]]:
    """(version, where it came from): `version`, else the SuperLink image tag, else the default."""
    text = raw.get("version")
    if isinstance(text, str):
        return FlowerVersion.parse(text), "version"
    image = _get(raw, "superlink", "image")
    if isinstance(image, str):
        v = version_from_image(image)
        if v is not None:
            return v, "superlink.image"
    return FlowerVersion.parse(DEFAULT_VERSION), None


def _versions(raw, pools):
    """Yields problems; returns the dialect when the version is usable."""
    version, source = resolve_version(raw)
    if version is None:
        yield problem(("version",), f"'{raw.get('version')}' is not a Flower version (expected X.Y.Z)")
        return None
    dialect = dialect_for(version)
    if dialect is None:
        at = ("version",) if source == "version" else ("superlink", "image")
        yield problem(at, f"Flower {version} is not supported; supported: {supported_ranges()}")
        return None
    images: list[tuple[tuple, Any]] = [
        (("superlink", "image"), _get(raw, "superlink", "image")),
        (("superlink", "superexecImage"), _get(raw, "superlink", "superexecImage")),
        (("supernodes", "image"), _get(raw, "supernodes", "image")),
    ]
    for i, pool in pools:
        at = ("supernodes", "pools", i, "images")
        images += [(at + ("supernode",), _get(pool, "images", "supernode")),
                   (at + ("superexecClientApp",), _get(pool, "images", "superexecClientApp"))]
    for at, image in images:
        if not isinstance(image, str):
            continue
        v = version_from_image(image)
        if v is not None and not dialect.contains(v):
            yield problem(at, f"image tag {v} speaks a different Flower dialect than this federation's "
                              f"version {version} ({dialect.name}); supported: {supported_ranges()}")
    return dialect


def _ports(raw, dialect: Dialect) -> Iterator[Problem]:
    ports = _dict(_get(raw, "superlink", "service", "ports"))
    for key, value in ports.items():
        if value is not None and key not in dialect.port_keys and key in ("grpc", "serverAppIO", "extra", "http"):
            hint = ("Flower 1.40+ serves Fleet, Control and Runtime on one port: set superlink.service.ports.http"
                    if key != "http" else
                    "superlink.service.ports.http is for Flower 1.40+; use grpc (Fleet), extra (Control), serverAppIO")
            yield problem(("superlink", "service", "ports", key), f"not used by the {dialect.name}: {hint}")
    resolved = dialect.resolve_ports({k: v for k, v in ports.items() if isinstance(v, int)})
    if resolved.serverappio is None:  # one shared port (HTTP era)
        return
    used = [resolved.fleet, resolved.control, resolved.serverappio]
    if len(set(used)) != len(used):
        yield problem(("superlink", "service", "ports"), f"ports must be distinct, got {used}")


def _placement(raw, mode, isolation) -> Iterator[Problem]:
    if raw.get("superexecPlacement") != "distributed":
        return
    if isolation != "process":
        yield problem(("superexecPlacement",), "distributed SuperExec needs isolationMode=process")
    if mode == "DaemonSet":
        yield problem(("superexecPlacement",),
                      "distributed SuperExec pairs SuperExec replica k with SuperNode k, which needs mode=StatefulSet")


def _node_config(pool: dict, i: int, mode: str) -> Iterator[Problem]:
    config = pool.get("nodeConfig")
    if not isinstance(config, dict):
        return
    at = ("supernodes", "pools", i, "nodeConfig")
    for key, value in config.items():
        if not nodeconfig.KEY_RE.match(str(key)):
            yield problem(at + (key,), "keys may only hold letters, digits, '_' and '-'")
        why = nodeconfig.value_problem(value)
        if why:
            yield problem(at + (key,), why)
        if mode == "DaemonSet" and isinstance(value, str):
            for ph in nodeconfig.STATEFULSET_ONLY:
                if ph in value:
                    yield problem(at + (key,), f"{ph} is only available when mode is StatefulSet")


def _gpu(pool: dict, i: int) -> Iterator[Problem]:
    gpu = _dict(pool.get("gpu"))
    at = ("supernodes", "pools", i, "gpu")
    if gpu.get("enabled") is not True:
        return
    if not gpu.get("mountAll") and not gpu.get("resourceName") and not gpu.get("vendor"):
        yield problem(at + ("resourceName",), "set resourceName (or vendor) so the GPU can be requested")
    if gpu.get("mountAll") is True and gpu.get("vendor") == "amd" and gpu.get("allowPrivileged") is not True:
        yield problem(at + ("allowPrivileged",),
                      "AMD mountAll runs the container privileged (hostPath /dev/kfd, /dev/dri); set allowPrivileged: true to accept that")


# --- Kubernetes fragments -----------------------------------------------------------

_LIST_FRAGMENTS = {
    "env": "envvar-v1.json",
    "volumes": "volume-v1.json",
    "volumeMounts": "volumemount-v1.json",
    "superexecVolumeMounts": "volumemount-v1.json",
    "volumeClaimTemplates": "persistentvolumeclaim-v1.json",
}
_DICT_FRAGMENTS = {
    "resources": "resourcerequirements-v1.json",
    "superexecResources": "resourcerequirements-v1.json",
    "supernodeResources": "resourcerequirements-v1.json",
}


def _fragments(raw: dict, pools) -> Iterator[Problem]:
    sections: list[tuple[tuple, dict, str]] = [(("superlink",), _dict(raw.get("superlink")), "superlink")]
    sections += [(("supernodes", "pools", i), pool, "pool") for i, pool in pools]
    for key, schema in (("securityContext", "securitycontext-v1.json"),
                        ("podSecurityContext", "podsecuritycontext-v1.json"),
                        ("defaultResources", "resourcerequirements-v1.json")):
        value = raw.get(key)
        if isinstance(value, dict):
            for path, msg in fragment_errors(value, schema):
                yield problem((key,) + path, msg)
            if key == "defaultResources":
                yield from _quantities((key,), value)
    supernodes = _dict(raw.get("supernodes"))
    yield from _list_fragment(("supernodes", "env"), supernodes.get("env"), "envvar-v1.json")
    yield from _reserved_env(("supernodes", "env"), supernodes.get("env"))
    for at, section, kind in sections:
        for key, schema in _LIST_FRAGMENTS.items():
            yield from _list_fragment(at + (key,), section.get(key), schema)
        for key, schema in _DICT_FRAGMENTS.items():
            value = section.get(key)
            if isinstance(value, dict):
                for path, msg in fragment_errors(value, schema):
                    yield problem(at + (key,) + path, msg)
                yield from _quantities(at + (key,), value)
        yield from _reserved_env(at + ("env",), section.get("env"))
        yield from _volume_refs(at, section)
        yield from _pod_template(at + ("podTemplate",), section.get("podTemplate"),
                                 "superlink" if kind == "superlink" else "supernode")


def _quantities(at: tuple, resources: dict) -> Iterator[Problem]:
    for section in ("limits", "requests"):
        for name, amount in _dict(resources.get(section)).items():
            if isinstance(amount, bool) or not QUANTITY.match(str(amount)):
                yield problem(at + (section, name), f"'{amount}' is not a Kubernetes quantity (e.g. 500m, 2, 1Gi)")


def _list_fragment(at: tuple, value: Any, schema: str) -> Iterator[Problem]:
    if not isinstance(value, list):
        return
    for j, item in enumerate(value):
        for path, msg in fragment_errors(item, schema):
            yield problem(at + (j,) + path, msg)


def _reserved_env(at: tuple, env: Any) -> Iterator[Problem]:
    for j, item in enumerate(_list(env)):
        if isinstance(item, dict) and item.get("name") in RESERVED_ENV:
            yield problem(at + (j, "name"), f"{item['name']} is set by flower-federation (node config placeholders)")


def _volume_refs(at: tuple, section: dict) -> Iterator[Problem]:
    declared = {v.get("name") for v in _list(section.get("volumes")) if isinstance(v, dict)}
    declared |= {_get(v, "metadata", "name") for v in _list(section.get("volumeClaimTemplates")) if isinstance(v, dict)}
    declared |= {v.get("name") for v in _list(_get(section, "podTemplate", "spec", "volumes")) if isinstance(v, dict)}
    for key in ("volumes", "volumeClaimTemplates"):
        for j, v in enumerate(_list(section.get(key))):
            vname = v.get("name") if key == "volumes" else _get(v, "metadata", "name")
            if isinstance(v, dict) and vname in RESERVED_VOLUMES:
                path = at + (key, j) + (("name",) if key == "volumes" else ("metadata", "name"))
                yield problem(path, f"volume name '{vname}' is used by flower-federation")
    for key in ("volumeMounts", "superexecVolumeMounts"):
        for j, m in enumerate(_list(section.get(key))):
            if not isinstance(m, dict):
                continue
            if isinstance(m.get("name"), str) and m["name"] not in declared:
                yield problem(at + (key, j, "name"), f"no volume named '{m['name']}' in volumes or volumeClaimTemplates")
            if m.get("mountPath") in RESERVED_MOUNT_PATHS:
                yield problem(at + (key, j, "mountPath"), f"{m['mountPath']} is mounted by flower-federation")


def _pod_template(at: tuple, template: Any, component: str) -> Iterator[Problem]:
    if not isinstance(template, dict):
        return
    spec = _dict(template.get("spec"))
    # PodSpec requires `containers`; a pod template here usually only patches, so check
    # it as if it named one container.
    probe = dict(template)
    probe["spec"] = {**spec, "containers": spec.get("containers", [{"name": component}])}
    for path, msg in fragment_errors(probe, "podtemplatespec-v1.json"):
        yield problem(at + path, msg)
    reserved = set(selector_labels("x", "x", "x"))
    for key in _dict(_get(template, "metadata", "labels")):
        if key in reserved:
            yield problem(at + ("metadata", "labels", key), "selector labels are set by flower-federation")
    for j, c in enumerate(_list(spec.get("containers"))):
        if isinstance(c, dict) and c.get("name") in MANAGED_CONTAINERS:
            for field in ("image", "command", "args"):
                if field in c:
                    hint = "images" if field == "image" else "extraArgs"
                    yield problem(at + ("spec", "containers", j, field),
                                  f"the {c['name']} container's {field} is managed; use {hint} instead")
    for j, v in enumerate(_list(spec.get("volumes"))):
        if isinstance(v, dict) and v.get("name") in RESERVED_VOLUMES:
            yield problem(at + ("spec", "volumes", j, "name"), f"volume name '{v['name']}' is used by flower-federation")
