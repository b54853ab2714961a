"""The config fuzzer's strategy (tests/test_config_fuzzing.py): whole stacks as a user
writes them, small (one or two pools of one or two replicas) so that thousands run in CI.

The big choices are drawn first (role, Flower version of either era, mode, isolation and
placement, TLS source or insecure, node auth and its key source, clusters), then every
section consistent with them most of the time and wrong in one way now and then, so that
about half the examples are valid configs (rendered and checked) and half are refused
(one report, nothing registered). What each example also needs from outside the config
comes with it: the secret `nodeAuthKeys`, other stacks' outputs for `fromStack`, and
whether the federation config is secret (a kubeconfig in it must be).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional

from hypothesis import strategies as st

from tests.support import fuzz_settings
from tests.support.fuzz_fragments import (
    Draw,
    chance,
    claim,
    container_security,
    env,
    mounts,
    names_of,
    network_policy,
    one,
    pick,
    pod_security,
    pod_template,
    probes,
    resources,
    volumes,
)
from tests.support.fuzz_stacks import hub_sites, node_auth_keys, site_superlink, stack_outputs

GRPC_VERSIONS = ["1.26.1", "1.32.1", "1.22.0", "1.25.0", "1.28.0", "1.34.0"]
HTTP_VERSIONS = ["1.41.0", "1.40.0", "1.43.0", "1.50.2"]
BAD_VERSIONS = ["1.35.0", "2.0.0", "1.20.0", "latest", 1.41, ""]


@dataclass
class Case:
    """One example: the `federation` config value and what the run needs besides it."""

    federation: Any
    stack: str = "dev"
    node_auth_keys: Optional[Any] = None
    federation_is_secret: bool = False
    preview: bool = False  # `pulumi preview` (what runs on PRs) or `pulumi up`
    stack_outputs: dict[str, dict[str, Any]] = field(default_factory=dict, repr=False)  # the same every time

    def program_config(self) -> dict[str, Any]:
        config: dict[str, Any] = {"federation": self.federation}
        if self.node_auth_keys is not None:
            config["nodeAuthKeys"] = self.node_auth_keys
        return config

    @property
    def secret_config(self) -> tuple[str, ...]:
        return ("federation",) if self.federation_is_secret else ()


def _parse(version: Any) -> tuple[int, int]:
    try:
        major, minor = str(version).split(".")[:2]
        return int(major), int(minor)
    except ValueError:
        return 0, 0


@st.composite
def cases(draw: Draw[Any]) -> Case:
    role = one(draw, ["federation"] * 7 + ["hub", "site", "federation"])
    if chance(draw, 4):
        version: Any = one(draw, BAD_VERSIONS)
    else:
        version = one(draw, HTTP_VERSIONS if chance(draw, 50) else GRPC_VERSIONS)
    v = _parse(version)
    http = v >= (1, 40)
    tag = version if isinstance(version, str) and version else "1.41.0"
    other_era = "1.26.1" if http else "1.41.0"
    raw: dict[str, Any] = {}
    if role != "federation" or chance(draw, 3):
        raw["role"] = role if not chance(draw, 3) else one(draw, ["server", "Hub"])
    if role != "site" and chance(draw, 10):
        raw["superlink"] = {"image": f"flwr/superlink:{tag}"}  # the version from the image tag
    else:
        raw["version"] = version
    _identity(draw, raw)

    mode = "DaemonSet" if chance(draw, 15) else "StatefulSet"
    if mode == "DaemonSet" or chance(draw, 3):
        raw["mode"] = mode
    process = chance(draw, 35)
    distributed = process and mode == "StatefulSet" and chance(draw, 60)
    if process or chance(draw, 1):
        raw["isolationMode"] = "process"
    if distributed or chance(draw, 2):
        raw["superexecPlacement"] = "distributed"
    if distributed and v >= (1, 32) and chance(draw, 50) or chance(draw, 1):
        raw["executor"] = {"type": "kubernetes"}
        if chance(draw, 30):
            raw["executor"]["config"] = pick(
                draw,
                [{"active-pod-budget": 2}, {"node-selector": {"pool": "apps"}, "labels": {"team": "ml"}}],
                [{"namespace": "elsewhere"}, {"service-account-name": "x"}],
            )
        if chance(draw, 20):
            raw["executor"]["image"] = f"flwr/superexec:{tag}"

    insecure = chance(draw, 10)
    if insecure:
        raw["insecure"] = True
    node_auth = not insecure and v >= (1, 23) and chance(draw, 95 if role == "hub" else 45) or chance(draw, 2)
    key_source = "config" if node_auth and chance(draw, 85 if mode == "DaemonSet" else 25) else "generate"
    if node_auth:
        raw["nodeAuth"] = {"enabled": True} | ({"keySource": "config"} if key_source == "config" else {})
    if role != "site" and (not insecure and chance(draw, 45) or chance(draw, 3)):
        raw["tls"] = _tls(draw)

    clusters = _clusters(draw, raw)
    pools = _pools(draw, raw, role, mode, process, tag, other_era, clusters)
    if role == "site":
        site_superlink(draw, raw, insecure, http)
    else:
        _superlink(draw, raw, role, process, http, tag, other_era, clusters, pools)
        if node_auth and (role == "hub" or chance(draw, 15)) or chance(draw, 2):
            hub_sites(draw, raw)
    _knobs(draw, raw, v)
    if chance(draw, 3):
        raw[one(draw, ["isolatonMode", "nodeauth", "superLink"])] = {}

    case = Case(raw, stack_outputs=stack_outputs())
    case.federation_is_secret = any("kubeconfig" in c for c in clusters.values()) and not chance(draw, 10)
    if key_source == "config":
        case.node_auth_keys = node_auth_keys(draw, pools, mode)
    case.preview = chance(draw, 30)
    if chance(draw, 2):
        case.stack = "Prod_EU"
        raw.pop("name", None)
    return case


def _identity(draw: Draw[Any], raw: dict[str, Any]) -> None:
    if chance(draw, 40):
        raw["name"] = pick(draw, ["fl", "flower", "f-1", "a" * 30], ["Fl", "1abc", "a" * 60, 7])
    if chance(draw, 40):
        raw["namespace"] = pick(draw, ["flower-fz", "fl"], ["Flower_NS", "a" * 70])
    if chance(draw, 8):
        raw["createNamespace"] = False
    if chance(draw, 15):
        raw["labels"] = pick(draw, [{"cost-center": "ml"}], [{"cost-center": 1}])
    if chance(draw, 5):
        raw["clusterDomain"] = "corp.internal"


def _tls(draw: Draw[Any]) -> dict[str, Any]:
    source = one(draw, ["generate", "certManager", "existingSecret"])
    tls: dict[str, Any] = {} if source == "generate" and chance(draw, 50) else {"source": source}
    if source == "generate" and chance(draw, 20):
        tls["generate"] = pick(
            draw, [{"validityHours": 100, "earlyRenewalHours": 10}, {"caValidityHours": 1000}], [{"validityHours": 0}]
        )
        if chance(draw, 5):
            tls["generate"] = {"validityHours": 10, "earlyRenewalHours": 20}
    if source == "certManager" and not chance(draw, 5):
        tls["certManager"] = {"issuerRef": one(draw, [{"name": "ca"}, {"name": "ca", "kind": "ClusterIssuer"}])}
        if chance(draw, 20):
            tls["certManager"] |= pick(
                draw,
                [{"duration": "2160h", "renewBefore": "360h"}],
                [{"duration": "3 months"}, {"renewBefore": "1e9h"}],
            )
    if source == "existingSecret" and not chance(draw, 5):
        tls["existingSecret"] = "my-tls"
    if chance(draw, 30):
        trust = one(
            draw,
            [
                {"source": "existingSecret", "existingSecret": "my-ca", "key": "root.pem"},
                {"source": "copyFromServerSecret"},
                {"source": "generated"},
            ],
        )
        tls["trust"] = trust if source == "generate" or trust["source"] != "generated" or chance(draw, 20) else {}
    if chance(draw, 25):
        tls["dnsNames"] = pick(draw, [["flower.example.org"], ["fl.example.org", "*.example.org"]], [["Bad_Name"]])
    if chance(draw, 10):
        tls["ipAddresses"] = pick(draw, [["203.0.113.7"], ["2001:db8::7"]], [["300.1.1.1"]])
    return tls


def _clusters(draw: Draw[Any], raw: dict[str, Any]) -> dict[str, dict[str, Any]]:
    if not chance(draw, 15):
        return {}
    clusters = {"edge": pick(draw, [{"context": "edge-admin"}, {"kubeconfig": "apiVersion: v1\nkind: Config\n"}], [{}])}
    if chance(draw, 20):
        clusters[pick(draw, ["lab"], ["default", "Edge"])] = {"context": "lab"}
    raw["clusters"] = clusters
    return clusters


def _pools(
    draw: Draw[Any],
    raw: dict[str, Any],
    role: str,
    mode: str,
    process: bool,
    tag: str,
    other_era: str,
    clusters: dict[str, Any],
) -> list[dict[str, Any]]:
    count = (
        (1 if chance(draw, 5) else 0)
        if role == "hub"
        else one(draw, [1, 1, 1, 2, 2] + ([0] if chance(draw, 5) else []))
    )
    distributed = raw.get("superexecPlacement") == "distributed"
    pools = [_pool(draw, i, mode, process, distributed, tag, other_era, clusters) for i in range(count)]
    supernodes: dict[str, Any] = {}
    if pools or role != "hub":
        supernodes["pools"] = pools
    if role != "hub" or chance(draw, 5):
        if chance(draw, 10):
            supernodes["image"] = pick(draw, [f"flwr/supernode:{tag}"], [f"flwr/supernode:{other_era}"])
        if chance(draw, 15):
            supernodes["env"] = env(draw)
        if chance(draw, 8):
            supernodes["networkPolicy"] = network_policy(draw)
        if chance(draw, 8):
            supernodes["probes"] = probes(draw)
    if supernodes:
        raw["supernodes"] = supernodes
    return pools


def _pool(
    draw: Draw[Any],
    i: int,
    mode: str,
    process: bool,
    distributed: bool,
    tag: str,
    other_era: str,
    clusters: dict[str, Any],
) -> dict[str, Any]:
    # A second pool's name collides with the first's, or with the ServerApp SuperExec's, now and then.
    good = ["c", "d", "gpu-2"] if i else ["a", "gpu", "b"]
    name = pick(draw, good, ["a", "serverapp", "Bad_Name", "p" * 50, 3] if i else ["Bad_Name", "p" * 50, 3], 6)
    pool: dict[str, Any] = {"name": name}
    if mode == "StatefulSet":
        pool["replicas"] = pick(draw, [1, 2, 1], [0, "2", None, True], 3)
        if pool["replicas"] is None:
            del pool["replicas"]
    elif chance(draw, 4):
        pool["replicas"] = 1
    images: dict[str, Any] = {}
    if process and not chance(draw, 3) or chance(draw, 2):
        images["superexecClientApp"] = fuzz_settings.image(draw, "flwr/superexec", pick(draw, [tag], [other_era], 4))
    if chance(draw, 10):
        images["supernode"] = one(
            draw, [fuzz_settings.image(draw, "flwr/supernode", tag), "registry.local:5000/flwr/supernode"]
        )
    if images:
        pool["images"] = images
    if clusters and chance(draw, 50):
        pool["cluster"] = one(draw, sorted(clusters))
    elif chance(draw, 1):
        pool["cluster"] = "nowhere"
    if chance(draw, 12):
        pool["gpu"] = _gpu(draw)
    for key in ("supernodeResources", "superexecResources"):
        if chance(draw, 10):
            pool[key] = resources(draw)

    if chance(draw, 10):
        pool["extraArgs"] = pick(draw, [["--max-retries", "5"], ["--name", "$(POD_NAME)"]], [[5]])
    if chance(draw, 15):
        pool["env"] = env(draw)
    declared = _volumes(draw, pool, claims=mode == "StatefulSet" or chance(draw, 10), superexec=process)
    if chance(draw, 20):
        pool["podTemplate"] = pod_template(draw, ["supernode"] + (["superexec-clientapp"] if process else []), declared)
    if chance(draw, 20):
        pool["nodeConfig"] = pick(
            draw,
            [
                {"partition-id": "{index}", "num-partitions": "{replicas}"} if mode == "StatefulSet" else {"zone": "a"},
                {"lr": 0.1, "epochs": 3, "name": "{pool}-{node}", "debug": True},
                {"quote": 'it\'s "$(HOME)"\n'},
            ],
            [{"a b": 1}, {"x": None}, {"x": [1]}, {"id": "{index}"}],
        )
    if chance(draw, 8):
        pool["networkPolicy"] = network_policy(draw)
    fuzz_settings.pod_settings(draw, pool, mode)
    fuzz_settings.pool_api(draw, pool)
    fuzz_settings.presets(draw, pool, ["supernodeResourcesPreset"] + (["superexecResourcesPreset"] if process else []))
    if process or chance(draw, 2):
        fuzz_settings.superexec(draw, pool, distributed, "StatefulSet")
    if chance(draw, 8):
        pool["disruptionBudget"] = pick(
            draw,
            [{"minAvailable": 1}, {"maxUnavailable": "25%"}, {"enabled": False}],
            [{"minAvailable": 1, "maxUnavailable": 1}, {"maxUnavailable": "150%"}, {"minAvailable": -1}],
        )
    return pool


def _gpu(draw: Draw[Any]) -> dict[str, Any]:
    gpu: dict[str, Any] = {"enabled": not chance(draw, 10)}
    vendor = one(draw, ["nvidia", "amd", None])
    if vendor:
        gpu["vendor"] = vendor
    elif not chance(draw, 10):
        gpu["resourceName"] = "example.com/fpga"
    if chance(draw, 30):
        gpu["mountAll"] = True
        if vendor == "amd" and not chance(draw, 10):
            gpu["allowPrivileged"] = True
    if chance(draw, 20):
        gpu["count"] = pick(draw, [2], [0])
    return gpu


def _volumes(draw: Draw[Any], section: dict[str, Any], claims: bool, superexec: bool = False) -> list[str]:
    """volumes, claims, then mounts that mostly name them; the names declared."""
    if chance(draw, 20):
        section["volumes"] = volumes(draw)
    if claims and chance(draw, 10):
        section["volumeClaimTemplates"] = [claim(draw)]
    declared = names_of(section.get("volumes", [])) + names_of(section.get("volumeClaimTemplates", []))
    for key in ["volumeMounts"] + (["superexecVolumeMounts"] if superexec else []):
        if declared and chance(draw, 70) or chance(draw, 1):
            section[key] = mounts(draw, declared)
    return declared


def _superlink(
    draw: Draw[Any],
    raw: dict[str, Any],
    role: str,
    process: bool,
    http: bool,
    tag: str,
    other_era: str,
    clusters: dict[str, Any],
    pools: list[dict[str, Any]],
) -> None:
    sl: dict[str, Any] = raw.setdefault("superlink", {})
    if "image" not in sl and chance(draw, 8):
        sl["image"] = pick(draw, [f"flwr/superlink:{tag}", "registry.local:5000/flwr/superlink"], [f"x:{other_era}"])
    if process and not chance(draw, 4) or chance(draw, 3):
        sl["superexecImage"] = fuzz_settings.image(draw, "flwr/superexec", pick(draw, [tag], [other_era], 4))
    for key in ("resources", "superexecResources"):
        if chance(draw, 10):
            sl[key] = resources(draw)
    if chance(draw, 12):
        sl["env"] = env(draw)
    if chance(draw, 8):
        sl["extraArgs"] = ["--fleet-api-num-workers", "4"]
    declared = _volumes(draw, sl, claims=True)
    if chance(draw, 20):
        sidecar = process and raw.get("superexecPlacement") != "distributed"
        sl["podTemplate"] = pod_template(draw, ["superlink"] + (["superexec-serverapp"] if sidecar else []), declared)
    if chance(draw, 10):
        sl["persistence"] = pick(
            draw, [{"enabled": False}, {"size": "2Gi", "storageClassName": "fast"}], [{"size": "big"}]
        )
    if clusters and chance(draw, 30):
        sl["cluster"] = one(draw, sorted(clusters))
    if chance(draw, 8):
        sl["networkPolicy"] = network_policy(draw)
    if chance(draw, 8):
        sl["probes"] = probes(draw)
    fuzz_settings.pod_settings(draw, sl, "StatefulSet")
    fuzz_settings.presets(draw, sl, ["resourcesPreset"] + (["superexecResourcesPreset"] if process else []))
    if process or chance(draw, 2):
        fuzz_settings.superexec(draw, sl, raw.get("superexecPlacement") == "distributed", "Deployment")

    service: dict[str, Any] = {}
    remote_pools = any(p.get("cluster") != sl.get("cluster") for p in pools)
    exposed = role == "hub" or remote_pools
    if role == "hub" and chance(draw, 40) or chance(draw, 5):
        sl["ingress"] = pick(
            draw, [{"host": "fl.example.org"}, {"host": "fl.example.org", "className": "traefik"}], [{"host": "*.x"}]
        )
        exposed = True
    elif exposed and not chance(draw, 5) or chance(draw, 10):
        service["type"] = one(draw, ["LoadBalancer", "LoadBalancer", "NodePort"])
    if exposed and not chance(draw, 5) or chance(draw, 5):
        node_port = service.get("type") == "NodePort"
        sl["externalAddress"] = pick(
            draw,
            ["fl.example.org:30443", "203.0.113.5:31000"] if node_port else ["fl.example.org", "[2001:db8::1]:443"],
            ["http://fl.example.org", "a:b:c", "fl.example.org:0"],
        )
    if exposed and http and not chance(draw, 5):
        sl["exposeControlApi"] = True
    if chance(draw, 10):
        service["ports"] = pick(
            draw,
            [{"http": 8443}] if http else [{"grpc": 9443, "extra": 9444}],
            [{"grpc": 8000, "extra": 8000}, {"http": 9093, "grpc": 9092}],
        )
    if service.get("type") == "LoadBalancer" and chance(draw, 40):
        service["loadBalancerSourceRanges"] = pick(draw, [["198.51.100.0/24"]], [["nope"]])
    if chance(draw, 8):
        service["annotations"] = {"lb": "internal"}
        service["labels"] = {"expose": "yes"}
    if service:
        sl["service"] = service
    if chance(draw, 10):
        raw["cli"] = pick(
            draw,
            [
                {"address": "flower.example.org:9093"},
                {"rootCertificates": "/etc/ssl/ca.crt"},
                {"connectionName": "prod"},
            ],
            [{"rootCertificates": "ca.crt"}, {"adress": "x"}],
        )
    if not sl:
        del raw["superlink"]


def _knobs(draw: Draw[Any], raw: dict[str, Any], v: tuple[int, int]) -> None:
    fuzz_settings.top_level(draw, raw)
    if chance(draw, 8):
        raw["probes"] = probes(draw)
    if chance(draw, 8):
        raw["networkPolicy"] = network_policy(draw)
    if chance(draw, 5):
        raw["rbac"] = pick(draw, [{"viewerGroups": ["ml-team"]}], [{"viewerGroups": "ml-team"}])
    if chance(draw, 8):
        raw["securityContext"] = container_security(draw)
    if chance(draw, 8):
        raw["podSecurityContext"] = pod_security(draw)
    if chance(draw, 8):
        raw["defaultResources"] = resources(draw)
    if v >= (1, 29) and chance(draw, 5) or chance(draw, 1):
        raw["allowRuntimeDependencyInstallation"] = True
