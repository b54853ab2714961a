"""Rendered objects: valid against the Kubernetes 1.34 OpenAPI schema in strict mode,
and the behaviours config asks for (ports end to end, podTemplate, distributed
SuperExec, persistence)."""

from __future__ import annotations

import itertools
import subprocess
import sys

import pytest
import yaml

from tests.support.flower import GRPC_ERA, HTTP_ERA
from tests.support.kube import container_argv, pod_for
from tests.support.manifests import get
from tests.support.paths import ROOT
from tests.support.render import core_objects, plan_objects, plan_of, stack_outputs_of
from tests.support.schema import validate_all


def matrix():
    for version, mode, (isolation, placement), insecure, svc in itertools.product(
        (GRPC_ERA, HTTP_ERA),
        ("StatefulSet", "DaemonSet"),
        (("subprocess", "sidecar"), ("process", "sidecar"), ("process", "distributed")),
        (False, True),
        ("ClusterIP", "LoadBalancer"),
    ):
        if placement == "distributed" and mode == "DaemonSet":
            continue
        process = isolation == "process"
        pool = {
            "name": "p",
            "gpu": {"enabled": True, "vendor": "nvidia", "count": 2},
            "supernodeResources": {"requests": {"cpu": "100m"}},
            "podTemplate": {
                "spec": {"nodeSelector": {"gpu": "yes"}, "tolerations": [{"key": "gpu", "operator": "Exists"}]}
            },
            "volumes": [{"name": "data", "emptyDir": {}}],
            "volumeMounts": [{"name": "data", "mountPath": "/data"}],
        }
        if mode == "StatefulSet":
            pool["replicas"] = 2
            pool["volumeClaimTemplates"] = [
                {
                    "metadata": {"name": "cache"},
                    "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}},
                }
            ]
            pool["volumeMounts"].append({"name": "cache", "mountPath": "/cache"})
        raw = {
            "version": version,
            "mode": mode,
            "isolationMode": isolation,
            "insecure": insecure,
            "superlink": {"service": {"type": svc}},
            "supernodes": {"pools": [pool]},
        }
        if process:
            raw["superexecPlacement"] = placement
            raw["superlink"]["superexecImage"] = f"flwr/superexec:{version}"
            pool["images"] = {"superexecClientApp": f"flwr/superexec:{version}"}
        yield pytest.param(
            raw, id=f"{version}-{mode}-{isolation}-{placement}-{'insecure' if insecure else 'tls'}-{svc}"
        )


@pytest.mark.parametrize("raw", list(matrix()))
def test_every_object_passes_strict_schema(raw):
    validate_all(core_objects(raw, "fed"))


def test_dev_stack_render_parses_back_and_validates():
    out = subprocess.run(
        [sys.executable, "-m", "flower_federation", "render"], cwd=ROOT, capture_output=True, text=True, check=True
    )
    docs = list(yaml.safe_load_all(out.stdout))
    kinds = sorted(d["kind"] for d in docs)
    assert kinds.count("StatefulSet") == 3 and "Namespace" in kinds
    validate_all(docs)
    assert out.stderr == ""


def test_custom_ports_are_honoured_end_to_end():
    raw = {
        "version": GRPC_ERA,
        "superlink": {"service": {"type": "NodePort", "ports": {"grpc": 19092, "extra": 19093, "serverAppIO": 19091}}},
        "supernodes": {"pools": [{"name": "p", "replicas": 1}]},
    }
    objects = core_objects(raw, "fed")
    svc = get(objects, "Service", "fed-superlink")
    # A NodePort leaves the cluster: it carries Fleet only; Control (its own port in the gRPC era) stays inside.
    assert {p["name"]: p["port"] for p in svc["spec"]["ports"]} == {"fleet": 19092}
    assert svc["spec"]["type"] == "NodePort"
    control = get(objects, "Service", "fed-superlink-control")
    assert control["spec"]["type"] == "ClusterIP" and [p["port"] for p in control["spec"]["ports"]] == [19093]
    sts = get(objects, "StatefulSet", "fed-superlink")
    args = sts["spec"]["template"]["spec"]["containers"][0]["args"]
    assert "0.0.0.0:19092" in args and "0.0.0.0:19093" in args and "127.0.0.1:19091" in args
    node = get(objects, "StatefulSet", "fed-supernode-p")
    assert "fed-superlink.flower.svc.cluster.local:19092" in node["spec"]["template"]["spec"]["containers"][0]["args"]


def test_plaintext_serverappio_only_behind_its_internal_service():
    raw = {
        "version": GRPC_ERA,
        "isolationMode": "process",
        "superexecPlacement": "distributed",
        "superlink": {"superexecImage": "flwr/superexec:1.26.1", "service": {"type": "LoadBalancer"}},
        "supernodes": {
            "pools": [{"name": "p", "replicas": 2, "images": {"superexecClientApp": "flwr/superexec:1.26.1"}}]
        },
    }
    objects = core_objects(raw, "fed")
    public = get(objects, "Service", "fed-superlink")
    assert public["spec"]["type"] == "LoadBalancer"
    assert 9091 not in {p["port"] for p in public["spec"]["ports"]}
    internal = get(objects, "Service", "fed-superlink-serverappio")
    assert internal["spec"]["type"] == "ClusterIP" and internal["spec"]["ports"][0]["port"] == 9091
    deploy = get(objects, "Deployment", "fed-superexec-serverapp")
    assert (
        "fed-superlink-serverappio.flower.svc.cluster.local:9091"
        in deploy["spec"]["template"]["spec"]["containers"][0]["args"]
    )
    pair = get(objects, "StatefulSet", "fed-superexec-p")
    assert pair["spec"]["replicas"] == 2
    argv = container_argv(pair["spec"]["template"]["spec"]["containers"][0], pod_for(pair, 1))
    assert "fed-supernode-p-1.fed-supernode-p.flower.svc.cluster.local:9094" in argv
    # Sidecars are gone from the SuperLink and SuperNode pods.
    assert [
        c["name"] for c in get(objects, "StatefulSet", "fed-superlink")["spec"]["template"]["spec"]["containers"]
    ] == ["superlink"]
    assert [
        c["name"] for c in get(objects, "StatefulSet", "fed-supernode-p")["spec"]["template"]["spec"]["containers"]
    ] == ["supernode"]


def test_pod_template_merges_with_generated_pod():
    raw = {
        "supernodes": {
            "pools": [
                {
                    "name": "p",
                    "replicas": 1,
                    "podTemplate": {
                        "metadata": {"labels": {"team": "ml"}, "annotations": {"a": "b"}},
                        "spec": {
                            "priorityClassName": "high",
                            "runtimeClassName": "gvisor",
                            "imagePullSecrets": [{"name": "regcred"}],
                            "topologySpreadConstraints": [
                                {
                                    "maxSkew": 1,
                                    "topologyKey": "zone",
                                    "whenUnsatisfiable": "DoNotSchedule",
                                    "labelSelector": {"matchLabels": {"team": "ml"}},
                                }
                            ],
                            "containers": [
                                {"name": "supernode", "env": [{"name": "X", "value": "1"}]},
                                {"name": "log-shipper", "image": "busybox"},
                            ],
                        },
                    },
                }
            ]
        }
    }
    objects = core_objects(raw, "fed")
    tpl = get(objects, "StatefulSet", "fed-supernode-p")["spec"]["template"]
    assert tpl["metadata"]["labels"]["team"] == "ml" and tpl["metadata"]["labels"]["flower.flwr.ai/pool"] == "p"
    assert tpl["metadata"]["annotations"] == {"a": "b"}
    spec = tpl["spec"]
    assert spec["priorityClassName"] == "high" and spec["runtimeClassName"] == "gvisor"
    assert spec["imagePullSecrets"] == [{"name": "regcred"}]
    assert [c["name"] for c in spec["containers"]] == ["supernode", "log-shipper"]
    supernode = spec["containers"][0]
    assert {"name": "X", "value": "1"} in supernode["env"] and supernode["args"]  # managed args kept
    assert spec["securityContext"]["runAsUser"] == 49999
    validate_all(objects)


def test_env_merges_with_pool_winning_in_stable_order():
    raw = {
        "supernodes": {
            "env": [{"name": "A", "value": "global"}, {"name": "B", "value": "global"}],
            "pools": [
                {"name": "p", "replicas": 1, "env": [{"name": "C", "value": "pool"}, {"name": "A", "value": "pool"}]}
            ],
        }
    }
    sts = get(core_objects(raw, "fed"), "StatefulSet", "fed-supernode-p")
    env = sts["spec"]["template"]["spec"]["containers"][0]["env"]
    assert env == [
        {"name": "FLWR_TELEMETRY_ENABLED", "value": "0"},  # ours first (tests/test_telemetry.py)
        {"name": "A", "value": "pool"},
        {"name": "B", "value": "global"},
        {"name": "C", "value": "pool"},
    ]


def test_persistence_can_be_turned_off_and_sized():
    on = get(
        core_objects(
            {
                "superlink": {"persistence": {"size": "5Gi", "storageClassName": "fast"}},
                "supernodes": {"pools": [{"name": "p", "replicas": 1}]},
            },
            "fed",
        ),
        "StatefulSet",
        "fed-superlink",
    )
    claim = on["spec"]["volumeClaimTemplates"][0]
    assert claim["spec"]["resources"]["requests"]["storage"] == "5Gi" and claim["spec"]["storageClassName"] == "fast"
    assert "--database" in on["spec"]["template"]["spec"]["containers"][0]["args"]
    off = get(
        core_objects(
            {"superlink": {"persistence": {"enabled": False}}, "supernodes": {"pools": [{"name": "p", "replicas": 1}]}},
            "fed",
        ),
        "StatefulSet",
        "fed-superlink",
    )
    assert "volumeClaimTemplates" not in off["spec"]
    assert "--database" not in off["spec"]["template"]["spec"]["containers"][0]["args"]


def test_pods_are_restricted_by_default():
    objects = core_objects({"supernodes": {"pools": [{"name": "p", "replicas": 1}]}}, "fed")
    templates = [o["spec"]["template"]["spec"] for o in objects if "template" in o.get("spec", {})]
    assert templates
    for spec in templates:
        assert spec["securityContext"]["runAsNonRoot"] is True
        assert spec["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
        assert spec["automountServiceAccountToken"] is False
        for c in spec["containers"]:
            sc = c["securityContext"]
            assert sc["allowPrivilegeEscalation"] is False and sc["capabilities"] == {"drop": ["ALL"]}
            assert sc["readOnlyRootFilesystem"] is True
            assert {"/app/.flwr", "/tmp"} <= {m["mountPath"] for m in c["volumeMounts"]}


def test_options_reach_the_objects(flower):
    """Each of these options changes what is rendered (a test per option that would
    fail without it), and the extra args are still accepted by the real Flower."""
    raw = {
        "name": "opt",
        "namespace": "ml",
        "clusterDomain": "corp.internal",
        "labels": {"team": "ml"},
        "cli": {"address": "127.0.0.1:8000", "connectionName": "prod", "rootCertificates": "/home/me/ca.pem"},
        "superlink": {
            "extraArgs": ["--log-rotation-backup-count", "3"],
            "service": {"labels": {"expose": "yes"}, "annotations": {"lb": "internal"}},
        },
        "supernodes": {"pools": [{"name": "p", "replicas": 1, "extraArgs": ["--max-retries", "5"]}]},
    }
    plan = plan_of(raw, "dev")
    objects = plan_objects(plan)
    assert all(o["metadata"]["labels"]["team"] == "ml" for o in objects)
    assert all(
        "team" not in o["spec"]["selector"].get("matchLabels", o["spec"]["selector"])
        for o in objects
        if "selector" in o.get("spec", {})
    )
    assert all(o["metadata"].get("namespace", "ml") == "ml" for o in objects)
    svc = get(objects, "Service", "opt-superlink")
    assert svc["metadata"]["labels"]["expose"] == "yes" and svc["metadata"]["annotations"] == {"lb": "internal"}
    link = get(objects, "StatefulSet", "opt-superlink")
    node = get(objects, "StatefulSet", "opt-supernode-p")
    link_args = flower[HTTP_ERA].parse(
        "flower-superlink", container_argv(link["spec"]["template"]["spec"]["containers"][0], pod_for(link))
    )
    node_args = flower[HTTP_ERA].parse(
        "flower-supernode", container_argv(node["spec"]["template"]["spec"]["containers"][0], pod_for(node))
    )
    assert link_args["log_rotation_backup_count"] == 3
    assert node_args["max_retries"] == 5
    assert node_args["superlink"] == "opt-superlink.ml.svc.corp.internal:8000"
    conn = flower[HTTP_ERA].connection(stack_outputs_of(plan)["flwrConfig"])
    assert conn == {
        "name": "prod",
        "address": "127.0.0.1:8000",
        "insecure": False,
        "root_certificates": "/home/me/ca.pem",
    }
