"""The config fuzzer's strategy (tests/test_config_fuzzing.py): whole stacks as a user
writes them, small (one or two pools of one or two replicas) so that thousands run in CI.

The big choices are drawn first (role, Flower version of either era, mode, isolation and
placement, TLS source or insecure, node auth and its key source, clusters), then every
section consistent with them most of the time and wrong in one way now and then, so that
about half the examples are valid configs (rendered and checked) and half are refused
(one report, nothing registered). What each example also needs from outside the config
comes with it: the secret `nodeAuthKeys`, other stacks' outputs for `fromStack`, and
whether the federation config is secret (a kubeconfig in it must be). The component
sections, `supernodes` with its pools and `superlink`, are drawn by fuzz_components.py.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional

from hypothesis import strategies as st

from tests.support import fuzz_settings
from tests.support.fuzz_components import superlink_section, supernodes_section
from tests.support.fuzz_fragments import (
    Draw,
    chance,
    container_security,
    network_policy,
    one,
    pick,
    pod_security,
    probes,
    resources,
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
    pools = supernodes_section(draw, raw, role, mode, process, tag, other_era, clusters)
    if role == "site":
        site_superlink(draw, raw, insecure, http)
    else:
        superlink_section(draw, raw, role, process, http, tag, other_era, clusters, pools)
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
