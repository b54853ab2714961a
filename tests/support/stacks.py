"""Stacks that cover the security features, shared by the schema, Pod Security, checkov
and Pulumi-mock tests: both dialects, every TLS source and trust source, node
authentication, process isolation (sidecar and distributed), the Kubernetes executor,
DaemonSets with supplied keys, NetworkPolicy knobs, and the insecure opt-out."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any, Optional

import yaml

from tests.support.flower import GRPC_ERA, HTTP_ERA
from tests.support.paths import ROOT
from tests.support.tls_provider import new_openssh_key

__all__ = [
    "GRPC_ERA",
    "HTTP_ERA",
    "EXECUTOR_GRPC",
    "base",
    "security_stacks",
    "daemonset_node_keys",
    "dev_settings",
    "dev_config",
    "program_config",
]
# 1.32 is the first version with the Kubernetes executor (gRPC era).
EXECUTOR_GRPC = "1.32.1"


def base(
    version: str = HTTP_ERA,
    *,
    isolation: str = "subprocess",
    placement: str = "sidecar",
    mode: str = "StatefulSet",
    **extra: Any,
) -> dict[str, Any]:
    process = isolation == "process"
    pools = [
        {"name": "alpha", "nodeConfig": {"partition-id": "{index}", "num-partitions": "{replicas}"}},
        {"name": "beta"},
    ]
    for p in pools:
        if mode == "StatefulSet":
            p["replicas"] = 3 if p["name"] == "alpha" else 1
        else:
            p.pop("nodeConfig", None)
        if process:
            p["images"] = {"superexecClientApp": f"flwr/superexec:{version}"}
    raw: dict[str, Any] = {
        "name": "sec",
        "namespace": "flower-sec",
        "version": version,
        "mode": mode,
        "isolationMode": isolation,
        "supernodes": {"pools": pools},
    }
    if process:
        raw["superlink"] = {"superexecImage": f"flwr/superexec:{version}"}
        raw["superexecPlacement"] = placement
    return _merge(raw, copy.deepcopy(extra))


def _merge(base_value: dict[str, Any], extra: dict[str, Any]) -> dict[str, Any]:
    """`extra` over `base_value`, merging nested mappings (so `supernodes=` keeps pools)."""
    out = dict(base_value)
    for key, value in extra.items():
        out[key] = _merge(out[key], value) if isinstance(value, dict) and isinstance(out.get(key), dict) else value
    return out


def security_stacks() -> dict[str, dict[str, Any]]:
    """id -> `federation` config value."""
    stacks: dict[str, dict[str, Any]] = {}
    for version in (GRPC_ERA, HTTP_ERA):
        v = "grpc" if version == GRPC_ERA else "http"
        stacks[f"{v}-generate"] = base(version)
        stacks[f"{v}-nodeauth"] = base(version, nodeAuth={"enabled": True})
        stacks[f"{v}-process-sidecar-nodeauth"] = base(version, isolation="process", nodeAuth={"enabled": True})
        stacks[f"{v}-process-distributed"] = base(version, isolation="process", placement="distributed")
        stacks[f"{v}-certmanager"] = base(
            version,
            tls={
                "source": "certManager",
                "certManager": {"issuerRef": {"name": "ca-issuer", "kind": "ClusterIssuer"}},
                "dnsNames": ["flower.example.com"],
            },
        )
        stacks[f"{v}-existing-copy"] = base(version, tls={"source": "existingSecret", "existingSecret": "my-tls"})
        stacks[f"{v}-existing-ca"] = base(
            version,
            tls={
                "source": "existingSecret",
                "existingSecret": "my-tls",
                "trust": {"source": "existingSecret", "existingSecret": "my-ca", "key": "root.pem"},
            },
        )
        stacks[f"{v}-insecure"] = base(version, insecure=True)
        stacks[f"{v}-networkpolicy-knobs"] = base(
            version,
            networkPolicy={
                "allowExternal": True,
                "ingressNSMatchLabels": {"team": "ml"},
                "ingressNSPodMatchLabels": {"role": "flwr-cli"},
            },
            superlink={
                "networkPolicy": {
                    "ingressPodMatchLabels": {"role": "flwr-cli"},
                    "extraIngress": [{"ports": [{"port": 9100, "protocol": "TCP"}]}],
                }
            },
            supernodes={"networkPolicy": {"allowExternalEgress": True}},
            rbac={"viewerGroups": ["ml-team"]},
        )
    stacks["http-executor-kubernetes"] = base(
        HTTP_ERA,
        isolation="process",
        placement="distributed",
        executor={"type": "kubernetes", "config": {"active-pod-budget": 4}},
        nodeAuth={"enabled": True},
    )
    stacks["grpc-executor-kubernetes"] = base(
        EXECUTOR_GRPC, isolation="process", placement="distributed", executor={"type": "kubernetes"}
    )
    stacks["http-daemonset-supplied-keys"] = base(
        HTTP_ERA, mode="DaemonSet", nodeAuth={"enabled": True, "keySource": "config"}
    )
    stacks["http-runtime-deps"] = base(HTTP_ERA, isolation="process", allowRuntimeDependencyInstallation=True)
    # The SuperExec hop's certificate from each TLS source, and without TLS (auth only).
    stacks["http-process-certmanager"] = base(
        HTTP_ERA,
        isolation="process",
        placement="distributed",
        tls={"source": "certManager", "certManager": {"issuerRef": {"name": "ca-issuer", "kind": "ClusterIssuer"}}},
    )
    existing = base(
        HTTP_ERA,
        isolation="process",
        tls={
            "source": "existingSecret",
            "existingSecret": "my-tls",
            "trust": {"source": "existingSecret", "existingSecret": "my-ca", "key": "root.pem"},
        },
    )
    for pool in existing["supernodes"]["pools"]:
        pool["runtimeApiSecret"] = f"my-runtime-{pool['name']}"
    stacks["http-process-existing"] = existing
    stacks["http-process-insecure"] = base(HTTP_ERA, isolation="process", placement="distributed", insecure=True)
    stacks["http-chart-settings"] = chart_settings()
    return stacks


def chart_settings() -> dict[str, Any]:
    """The Helm chart's settings (docs/helm-parameters.md) on a distributed process-isolation stack: global pod
    settings, images in parts with a digest, pull secrets, ServiceAccount annotations, lifecycle hooks, update
    strategies, moved container ports, two SuperExecs per SuperNode, and one SuperNode's ClientAppIo API exposed
    through a NodePort Service."""
    raw = base(
        HTTP_ERA,
        isolation="process",
        placement="distributed",
        nodeAuth={"enabled": True},
        annotations={"example.org/owner": "ml-platform"},
        podLabels={"team": "ml"},
        nodeSelector={"kubernetes.io/os": "linux"},
        tolerations=[{"key": "dedicated", "operator": "Equal", "value": "flower", "effect": "NoSchedule"}],
        affinity={
            "podAntiAffinity": "soft",
            "nodeAffinity": {"matchExpressions": [{"key": "topology.kubernetes.io/zone", "operator": "Exists"}]},
        },
        imagePullPolicy="Always",
        imagePullSecrets=["regcred"],
        superlink={
            "serviceAccount": {"annotations": {"iam.gke.io/gcp-service-account": "sl@p.iam.gserviceaccount.com"}},
            "lifecycle": {"preStop": {"sleep": {"seconds": 5}}},
            "updateStrategy": {"type": "RollingUpdate"},
            "superexec": {"replicas": 2, "updateStrategy": {"type": "Recreate"}, "podLabels": {"side": "server"}},
        },
        supernodes={
            "image": {
                "registry": "registry.example.org",
                "repository": "flwr/supernode",
                "tag": HTTP_ERA,
                "digest": "sha256:" + "4f" * 32,
            }
        },
    )
    alpha, beta = raw["supernodes"]["pools"]
    alpha.update(
        {
            "containerPorts": {"clientAppIo": 9300, "health": 9301},
            "service": {"port": 19094, "portName": "appio"},
            "lifecycle": {"preStop": {"sleep": {"seconds": 5}}},
            "serviceAccount": {"labels": {"azure.workload.identity/use": "true"}},
            "superexec": {
                "replicas": 2,
                "extraArgs": ["--executor", "subprocess"],
                "containerPorts": {"health": 9181},
                "env": [{"name": "OMP_NUM_THREADS", "value": "4"}],
                "nodeSelector": {"node.example.org/pool": "gpu"},
                "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
                "networkPolicy": {"allowExternalEgress": True},
                "updateStrategy": {"type": "OnDelete"},
            },
        }
    )
    beta.update(
        {
            "service": {
                "type": "NodePort",
                "nodePort": 30094,
                "externalNames": ["beta.edge.example.org", "203.0.113.7"],
            },
            "networkPolicy": {"allowExternal": True},
            "images": {
                "superexecClientApp": {"repository": "flwr/superexec", "tag": HTTP_ERA, "pullPolicy": "IfNotPresent"}
            },
        }
    )
    return raw


def daemonset_node_keys(key_factory: Callable[[], str]) -> dict[str, dict[str, str]]:
    """`nodeAuthKeys` for the DaemonSet stack: one key per node name and pool.
    `key_factory()` returns a fresh OpenSSH ECDSA P-384 private key."""
    return {"alpha": {"node-a": key_factory(), "node-b": key_factory()}, "beta": {"node-a": key_factory()}}


def program_config(stack_id: str, keys: Optional[dict[str, dict[str, str]]] = None) -> dict[str, Any]:
    """`run_program` config of a security stack: its `federation` value, plus supplied
    `nodeAuthKeys` where the stack needs them (`keys`, else fresh ones per node)."""
    raw = security_stacks()[stack_id]
    config: dict[str, Any] = {"federation": raw}
    if raw.get("nodeAuth", {}).get("keySource") == "config":
        config["nodeAuthKeys"] = keys if keys is not None else daemonset_node_keys(new_openssh_key)
    return config


def dev_settings() -> dict[str, Any]:
    """The `config` of Pulumi.dev.yaml (every key of the dev stack)."""
    return yaml.safe_load((ROOT / "Pulumi.dev.yaml").read_text())["config"]


def dev_config() -> dict[str, Any]:
    """The dev stack's `federation` config value."""
    return dev_settings()["flower-federation:federation"]
