"""Every feature of the config at once, through the real Pulumi program under mocks, with
each TLS source and with node authentication: the render succeeds, every object passes
the Kubernetes schema strictly, every pod is Pod Security `restricted`, and each
podTemplate / volume / env / probe / GPU / executor setting arrives where it should,
next to the checksums the shell adds.

(A podTemplate with TLS on used to crash the render with a traceback, because the
template already held Pulumi Outputs when the patch was deep-copied; nothing tested a
podTemplate through the real program with TLS.)"""

from __future__ import annotations

import copy
from typing import Any

import kubernetes_validate
import pytest
import yaml

from flower_federation.builders import node_auth, trust
from flower_federation.cli.offline import run_program
from flower_federation.kube import pod_security
from flower_federation.kube.objects import pod_template_of

K8S = "1.34.0"
NS = "flower-all"
TLS_SOURCES: dict[str, dict[str, Any]] = {
    "generate": {},
    "certManager": {"source": "certManager", "certManager": {"issuerRef": {"name": "ca", "kind": "ClusterIssuer"}}},
    "existingSecret": {"source": "existingSecret", "existingSecret": "my-tls"},
    "existingSecret+trust": {
        "source": "existingSecret",
        "existingSecret": "my-tls",
        "trust": {"source": "existingSecret", "existingSecret": "my-ca", "key": "root.pem"},
    },
}
USER_SECRETS = {
    ("kubernetes:core/v1:Secret", f"{NS}/my-tls"): {"data": {"tls.crt": "Q1JU", "ca.crt": "Q0E="}},
    ("kubernetes:core/v1:Secret", f"{NS}/my-ca"): {"data": {"root.pem": "Uk9PVA=="}},
}


def _pod_template_patch(marker: str) -> dict[str, Any]:
    return {
        "metadata": {"labels": {"team": marker}, "annotations": {"owner": marker}},
        "spec": {
            "nodeSelector": {"pool": marker},
            "tolerations": [{"key": "gpu", "operator": "Exists", "effect": "NoSchedule"}],
            "priorityClassName": "flower",
            "volumes": [{"name": "scratch", "emptyDir": {}}, {"name": "user-config", "configMap": {"name": "cfg"}}],
            "initContainers": [
                {
                    "name": "fetch",
                    "image": "busybox:1.36",
                    "command": ["true"],
                    # Mounted: a distributed pool's pods keep only the podTemplate volumes they use.
                    "volumeMounts": [
                        {"name": "scratch", "mountPath": "/scratch"},
                        {"name": "user-config", "mountPath": "/config", "readOnly": True},
                    ],
                    "securityContext": {
                        "allowPrivilegeEscalation": False,
                        "runAsNonRoot": True,
                        "capabilities": {"drop": ["ALL"]},
                        "seccompProfile": {"type": "RuntimeDefault"},
                    },
                }
            ],
        },
    }


DIGEST = "sha256:" + "5e" * 32
ZONE = {"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["eu-1a"]}
IDENTITY = {"iam.gke.io/gcp-service-account": "fl@project.iam.gserviceaccount.com"}
PRE_STOP = {"preStop": {"sleep": {"seconds": 2}}}


def every_feature(tls: dict[str, Any]) -> dict[str, Any]:
    """Process isolation with distributed SuperExecs and the Kubernetes executor, node
    auth, and every per-component Kubernetes knob the config has (the Helm chart's too)."""
    probes = {
        "livenessProbe": {"periodSeconds": 20},
        "readinessProbe": {"failureThreshold": 6},
        "startupProbe": {"failureThreshold": 30},
    }
    pool = {
        "name": "gpu",
        "replicas": 2,
        "images": {"supernode": "flwr/supernode:1.41.0", "superexecClientApp": "flwr/superexec:1.41.0"},
        "gpu": {"enabled": True, "vendor": "nvidia", "count": 1},
        "supernodeResources": {"requests": {"cpu": "250m"}, "limits": {"memory": "2Gi"}},
        "superexecResources": {"requests": {"memory": "1Gi"}},
        "superexecResourcesPreset": "large",
        "podTemplate": _pod_template_patch("gpu"),
        "extraArgs": ["--max-retries", "5"],
        "env": [{"name": "POOL_ENV", "value": "gpu"}],
        "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": "datasets"}}],
        "volumeMounts": [{"name": "data", "mountPath": "/data", "readOnly": True}],
        "superexecVolumeMounts": [{"name": "cache", "mountPath": "/cache"}],
        "volumeClaimTemplates": [
            {
                "metadata": {"name": "cache"},
                "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "5Gi"}}},
            }
        ],
        "nodeConfig": {"partition-id": "{index}", "num-partitions": "{replicas}", "name": "{pool}-{index}"},
        "networkPolicy": {"allowExternalEgress": True},
        "disruptionBudget": {"minAvailable": 1},
        "podAnnotations": {"example.org/pod": "supernode"},
        "lifecycle": PRE_STOP,
        "serviceAccount": {"annotations": IDENTITY},
        "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"partition": 0}},
        "superexec": {
            "podAnnotations": {"example.org/pod": "superexec"},
            "env": [{"name": "SUPEREXEC_ONLY", "value": "1"}],
            "lifecycle": PRE_STOP,
            "serviceAccount": {"annotations": IDENTITY},
            "updateStrategy": {"type": "OnDelete"},
        },
    }
    pool["images"] = {
        "supernode": {
            "registry": "registry.example.org",
            "repository": "flwr/supernode",
            "tag": "1.41.0",
            "digest": DIGEST,
        },
        "superexecClientApp": "flwr/superexec:1.41.0",
    }
    pools = [pool, {"name": "cpu", "replicas": 1, "images": {"superexecClientApp": "flwr/superexec:1.41.0"}}]
    if tls.get("source") == "existingSecret":  # the user's own Runtime API certificates too
        pools = [{**p, "runtimeApiSecret": f"my-runtime-{p['name']}"} for p in pools]
    return {
        "name": "all",
        "namespace": NS,
        "version": "1.41.0",
        "labels": {"cost-center": "ml"},
        "annotations": {"example.org/owner": "ml-platform"},
        "podLabels": {"team-all": "fl"},
        "tolerations": [{"key": "dedicated", "operator": "Equal", "value": "flower", "effect": "NoSchedule"}],
        "affinity": {"podAntiAffinity": "soft", "nodeAffinity": {"matchExpressions": [ZONE]}},
        "imagePullSecrets": ["regcred"],
        "isolationMode": "process",
        "superexecPlacement": "distributed",
        "executor": {
            "type": "kubernetes",
            "resourcesPreset": "xlarge",
            "config": {"active-pod-budget": 2, "resources": {"limits": {"memory": "8Gi"}}},
        },
        "nodeAuth": {"enabled": True},
        "tls": {**copy.deepcopy(tls), "dnsNames": ["flower.example.org"]},
        "probes": probes,
        "networkPolicy": {"ingressNSMatchLabels": {"team": "ml"}},
        "rbac": {"viewerGroups": ["ml-team"]},
        "securityContext": {"readOnlyRootFilesystem": True},
        "podSecurityContext": {"fsGroupChangePolicy": "OnRootMismatch"},
        "defaultResources": {"requests": {"cpu": "50m", "memory": "128Mi"}},
        "superlink": {
            "superexecImage": "flwr/superexec:1.41.0",
            "service": {"type": "LoadBalancer", "annotations": {"lb": "internal"}, "labels": {"expose": "yes"}},
            "persistence": {"size": "2Gi", "storageClassName": "fast"},
            "env": [{"name": "SL_ENV", "value": "1"}],
            "extraArgs": ["--fleet-api-num-workers", "4"],
            "volumes": [{"name": "audit", "emptyDir": {}}],
            "volumeMounts": [{"name": "audit", "mountPath": "/audit"}],
            "podTemplate": _pod_template_patch("superlink"),
            "probes": probes,
            "serviceAccount": {"annotations": IDENTITY},
            "lifecycle": PRE_STOP,
            "superexec": {"replicas": 1, "podLabels": {"side": "serverapp"}},
        },
        "supernodes": {
            "env": [{"name": "ALL_NODES", "value": "1"}],
            "pools": pools,
        },
        "cli": {"address": "flower.example.org:8000"},
    }


@pytest.fixture(params=sorted(TLS_SOURCES), scope="module")
def rendered(request: pytest.FixtureRequest) -> tuple[str, list[dict[str, Any]]]:
    run = run_program({"federation": every_feature(TLS_SOURCES[request.param])}, "dev", existing=USER_SECRETS)
    return request.param, run.manifests()


def _by(objects: list[dict[str, Any]], kind: str, name: str) -> dict[str, Any]:
    found = [o for o in objects if o["kind"] == kind and o["metadata"]["name"] == name]
    assert len(found) == 1, (kind, name)
    return found[0]


def test_every_object_passes_the_strict_schema(rendered: tuple[str, list[dict[str, Any]]]) -> None:
    _, objects = rendered
    assert len(objects) > 20
    for obj in objects:
        if obj["kind"] == "Certificate":
            continue  # a CRD; tests/test_security_manifests.py checks it field by field
        kubernetes_validate.validate(obj, K8S, strict=True)


def test_every_pod_is_restricted_and_the_namespace_enforces_it(rendered: tuple[str, list[dict[str, Any]]]) -> None:
    _, objects = rendered
    templates = [t for o in objects if (t := pod_template_of(o)) is not None]  # type: ignore[arg-type]
    # SuperLink, ServerApp SuperExec, per pool a SuperNode and a SuperExec, node registration and revocation
    assert len(templates) == 8
    assert all(pod_security.restricted_violations(t) == [] for t in templates)
    assert _by(objects, "Namespace", NS)["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "restricted"


def test_pod_template_patches_arrive_next_to_the_checksums(rendered: tuple[str, list[dict[str, Any]]]) -> None:
    _, objects = rendered
    for kind, name, marker in (
        ("StatefulSet", "all-superlink", "superlink"),
        ("StatefulSet", "all-supernode-gpu", "gpu"),
        ("StatefulSet", "all-superexec-gpu", "gpu"),
    ):
        template = _by(objects, kind, name)["spec"]["template"]
        spec = template["spec"]
        assert template["metadata"]["labels"]["team"] == marker
        assert template["metadata"]["annotations"]["owner"] == marker
        assert spec["nodeSelector"] == {"pool": marker} and spec["priorityClassName"] == "flower"
        assert {"scratch", "user-config"} <= {v["name"] for v in spec["volumes"]}
        assert [c["name"] for c in spec["initContainers"]][-1] == "fetch"
        if name != "all-superexec-gpu":  # the SuperExec mounts no certificate of ours
            assert len(template["metadata"]["annotations"][trust.CHECKSUM_ANNOTATION]) == 64
    node_template = _by(objects, "StatefulSet", "all-supernode-gpu")["spec"]["template"]
    assert len(node_template["metadata"]["annotations"][node_auth.CHECKSUM_ANNOTATION]) == 64


def test_volumes_env_probes_gpu_and_executor_reach_their_containers(rendered: tuple[str, list[dict[str, Any]]]) -> None:
    _, objects = rendered

    def container(kind: str, workload: str, name: str) -> dict[str, Any]:
        containers = _by(objects, kind, workload)["spec"]["template"]["spec"]["containers"]
        return next(c for c in containers if c["name"] == name)

    superlink = container("StatefulSet", "all-superlink", "superlink")
    assert {"name": "SL_ENV", "value": "1"} in superlink["env"]
    assert {"name": "audit", "mountPath": "/audit"} in superlink["volumeMounts"]
    assert superlink["args"][-2:] == ["--fleet-api-num-workers", "4"]
    assert superlink["livenessProbe"]["periodSeconds"] == 20
    assert superlink["readinessProbe"]["failureThreshold"] == 6

    supernode = container("StatefulSet", "all-supernode-gpu", "supernode")
    assert {"POOL_ENV", "ALL_NODES"} <= {e["name"] for e in supernode["env"]}
    assert {"name": "data", "mountPath": "/data", "readOnly": True} in supernode["volumeMounts"]
    assert supernode["resources"] == {"requests": {"cpu": "250m", "memory": "128Mi"}, "limits": {"memory": "2Gi"}}
    assert "--auth-supernode-private-key" in supernode["args"]

    superexec = container("StatefulSet", "all-superexec-gpu", "superexec-clientapp")
    # Its preset (large), defaultResources, its own resources; distributed: the GPU goes to the apps.
    assert superexec["resources"]["limits"] == {"memory": "3Gi", "nvidia.com/gpu": 1}
    assert superexec["resources"]["requests"] == {"cpu": "50m", "memory": "1Gi"}
    assert {"name": "cache", "mountPath": "/cache"} in superexec["volumeMounts"]
    assert "--executor" in superexec["args"]
    claims = _by(objects, "StatefulSet", "all-superexec-gpu")["spec"]["volumeClaimTemplates"]
    assert [c["metadata"]["name"] for c in claims] == ["cache"]
    config = _by(objects, "ConfigMap", "all-superexec-gpu-executor")["data"]["executor.yaml"]
    assert "active-pod-budget: 2" in config
    # Task pods: executor.resourcesPreset (xlarge), defaultResources, config.resources.
    assert yaml.safe_load(config)["resources"] == {
        "requests": {"cpu": "50m", "memory": "128Mi"},
        "limits": {"memory": "8Gi"},
    }


def test_secrets_hold_no_plain_material_in_the_render(rendered: tuple[str, list[dict[str, Any]]]) -> None:
    source, objects = rendered
    secrets = {o["metadata"]["name"]: o for o in objects if o["kind"] == "Secret"}
    assert {"all-supernode-gpu-node-keys", "all-supernode-cpu-node-keys"} <= set(secrets)
    if source == "generate":
        assert {"all-superlink-tls", "all-ca"} <= set(secrets)
    for secret in secrets.values():
        values = {**secret.get("stringData", {}), **secret.get("data", {})}
        assert values and set(values.values()) == {"[secret]"}, secret["metadata"]["name"]


def test_the_helm_charts_settings_arrive_next_to_the_checksums(rendered: tuple[str, list[dict[str, Any]]]) -> None:
    _, objects = rendered
    for o in objects:
        if o["kind"] != "Namespace" or o["metadata"]["name"] == NS:
            assert o["metadata"]["annotations"]["example.org/owner"] == "ml-platform", o["metadata"]["name"]
    for kind, name in (
        ("StatefulSet", "all-superlink"),
        ("StatefulSet", "all-supernode-gpu"),
        ("StatefulSet", "all-superexec-gpu"),
        ("Deployment", "all-superexec-serverapp"),
    ):
        template = _by(objects, kind, name)["spec"]["template"]
        assert template["metadata"]["labels"]["team-all"] == "fl", name
        assert template["spec"]["imagePullSecrets"] == [{"name": "regcred"}], name
        assert template["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"] == {
            "nodeSelectorTerms": [{"matchExpressions": [ZONE]}]
        }, name
        assert "podAntiAffinity" in template["spec"]["affinity"], name
        # A podTemplate's tolerations are taken as given: they replace the merged ones.
        patched = name != "all-superexec-serverapp"
        assert template["spec"]["tolerations"][0]["key"] == ("gpu" if patched else "dedicated"), name
    supernode = _by(objects, "StatefulSet", "all-supernode-gpu")
    annotations = supernode["spec"]["template"]["metadata"]["annotations"]
    assert annotations["example.org/pod"] == "supernode" and len(annotations[node_auth.CHECKSUM_ANNOTATION]) == 64
    assert supernode["spec"]["updateStrategy"] == {"type": "RollingUpdate", "rollingUpdate": {"partition": 0}}
    containers = {c["name"]: c for c in supernode["spec"]["template"]["spec"]["containers"]}
    assert containers["supernode"]["image"] == f"registry.example.org/flwr/supernode:1.41.0@{DIGEST}"
    assert containers["supernode"]["lifecycle"] == PRE_STOP
    superexec = _by(objects, "StatefulSet", "all-superexec-gpu")
    assert superexec["spec"]["updateStrategy"] == {"type": "OnDelete"}
    assert superexec["spec"]["template"]["metadata"]["annotations"]["example.org/pod"] == "superexec"
    (c,) = [c for c in superexec["spec"]["template"]["spec"]["containers"] if c["name"] == "superexec-clientapp"]
    assert c["lifecycle"] == PRE_STOP and {"name": "SUPEREXEC_ONLY", "value": "1"} in c["env"]
    for name in ("all-supernode-gpu", "all-superexec-gpu", "all-superlink"):
        sa = _by(objects, "ServiceAccount", name)
        assert (
            sa["metadata"]["annotations"]["iam.gke.io/gcp-service-account"]
            == IDENTITY["iam.gke.io/gcp-service-account"]
        )
    # Tokens stay where they were: off, except for the executor's SuperExecs.
    assert _by(objects, "ServiceAccount", "all-supernode-gpu")["automountServiceAccountToken"] is False
    assert _by(objects, "ServiceAccount", "all-superexec-gpu")["automountServiceAccountToken"] is True
    assert (
        _by(objects, "Deployment", "all-superexec-serverapp")["spec"]["template"]["metadata"]["labels"]["side"]
        == "serverapp"
    )
