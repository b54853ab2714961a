"""`python -m flower_federation import helm`: the chart's scheduling, security, probe, SuperExec and other
settings (docs/helm-parameters.md) reach the rendered pods, and real Flower parses the command
lines they shape."""

from __future__ import annotations

from tests.support.flower import HTTP_ERA, PROGRAMS
from tests.support.importing import (
    render,
    run_import,
    stack_config,
    write,
)
from tests.support.manifests import by_kind, get, pod_spec


def test_scheduling_security_and_probes_reach_the_pods(tmp_path, capsys):
    values = {
        "global": {
            "labels": {"team": "ml"},
            "nodeSelector": {"zone": "a"},
            "tolerations": [{"key": "gpu", "operator": "Exists"}],
            "env": [{"name": "A", "value": "1"}],
            "podSecurityContext": {"readOnlyRootFilesystem": False},
            "securityContext": {"fsGroup": 1000},
        },
        "supernode": {
            "image": {"tag": "1.26.1", "digest": "sha256:" + "a" * 64, "pullPolicy": "Always"},
            "nodeSelector": {"disk": "ssd"},
            "podLabels": {"app": "x"},
            "resources": {"limits": {"memory": "2Gi"}},
            "env": [{"name": "B", "value": "2"}],
            "livenessProbe": {"periodSeconds": 20},
            "networkPolicy": {"allowExternalEgress": False, "extraEgress": [{"ports": [{"port": 443}]}]},
        },
        "superexec": {
            "enabled": True,
            "nodeSelector": {"disk": "ssd"},
            "livenessProbe": {"periodSeconds": 20},
            "networkPolicy": {"allowExternalEgress": False},
        },
        "tls": {"enabled": False},
    }
    code, out, err = run_import(capsys, "helm", write(tmp_path, "v.yaml", values), "--release", "r")
    assert code == 0, err
    config = stack_config(out)
    assert config["insecure"] is True and config["isolationMode"] == "process"
    assert config["superexecPlacement"] == "distributed"
    objects = render(config, "r")
    workload = get(objects, "StatefulSet", "r-flower-client-supernode-supernode")
    pod = pod_spec(workload)
    assert pod["nodeSelector"] == {"zone": "a", "disk": "ssd"}
    assert pod["tolerations"] == [{"key": "gpu", "operator": "Exists"}]
    assert pod["securityContext"]["fsGroup"] == 1000
    assert workload["spec"]["template"]["metadata"]["labels"]["app"] == "x"
    assert workload["metadata"]["labels"]["team"] == "ml"
    (supernode,) = pod["containers"]
    superexec_pod = pod_spec(get(objects, "StatefulSet", "r-flower-client-superexec-supernode"))
    (superexec,) = superexec_pod["containers"]
    assert superexec_pod["nodeSelector"] == {"zone": "a", "disk": "ssd"}
    assert supernode["image"].endswith("flwr/supernode-ee:1.26.1@sha256:" + "a" * 64)
    assert supernode["imagePullPolicy"] == "Always" and superexec["imagePullPolicy"] == "IfNotPresent"
    assert supernode["securityContext"]["readOnlyRootFilesystem"] is False
    assert superexec["securityContext"]["readOnlyRootFilesystem"] is False
    assert supernode["resources"]["limits"]["memory"] == "2Gi"
    # Here a pool's env reaches its SuperExecs too (under their own superexec.env).
    assert {e["name"] for e in supernode["env"]} >= {"A", "B"} and {e["name"] for e in superexec["env"]} >= {"A", "B"}
    assert supernode["livenessProbe"]["periodSeconds"] == 20 == superexec["livenessProbe"]["periodSeconds"]
    egress = get(objects, "NetworkPolicy", "r-flower-client-supernode-supernode")["spec"]["egress"]
    assert {"ports": [{"port": 443}]} in egress


def test_superexec_settings_are_their_own(tmp_path, capsys):
    """The chart's superexec.* apply to the SuperExecs alone, which keep the chart's own probe
    values where only the SuperNode's are set (here they would inherit the SuperNodes')."""
    values = {
        "supernode": {
            "image": {"tag": "1.26.1"},
            "nodeSelector": {"disk": "hdd"},
            "livenessProbe": {"periodSeconds": 20},
        },
        "superexec": {"enabled": True, "nodeSelector": {"disk": "ssd"}},
    }
    code, out, err = run_import(capsys, "helm", write(tmp_path, "v.yaml", values), "--release", "r")
    assert code == 0, err
    objects = render(stack_config(out), "r")
    supernode = pod_spec(get(objects, "StatefulSet", "r-flower-client-supernode-supernode"))
    superexec = pod_spec(get(objects, "StatefulSet", "r-flower-client-superexec-supernode"))
    assert supernode["nodeSelector"] == {"disk": "hdd"} and superexec["nodeSelector"] == {"disk": "ssd"}
    assert supernode["containers"][0]["livenessProbe"]["periodSeconds"] == 20
    assert superexec["containers"][0]["livenessProbe"]["periodSeconds"] == 10


CHART_SETTINGS = {
    "global": {
        "annotations": {"example.org/owner": "ml-platform"},
        "podLabels": {"team": "ml"},
        "nodeSelector": {"kubernetes.io/os": "linux"},
        "tolerations": [{"key": "dedicated", "operator": "Equal", "value": "flower", "effect": "NoSchedule"}],
        "affinity": {
            "podAntiAffinity": "hard",
            "nodeAffinity": {
                "type": "soft",
                "matchExpressions": [{"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["eu-1a"]}],
            },
        },
        "image": {"pullPolicy": "Always"},
    },
    "supernode": {
        "superlink": {"address": "fl.example.org", "port": 443},
        "image": {
            "registry": "registry.example.org",
            "repository": "flwr/supernode",
            "tag": "1.41.0",
            "digest": "sha256:" + "4f" * 32,
            "pullPolicy": "IfNotPresent",
        },
        "imagePullSecrets": ["regcred"],
        "labels": {"tier": "edge"},
        "annotations": {"example.org/rollout": "manual"},
        "podAnnotations": {"prometheus.io/scrape": "false"},
        "updateStrategy": {"type": "OnDelete"},
        "lifecycle": {"preStop": {"sleep": {"seconds": 5}}},
        "serviceAccount": {
            "annotations": {"iam.gke.io/gcp-service-account": "sn@p.iam.gserviceaccount.com"},
            "labels": {"azure.workload.identity/use": "true"},
        },
        "automountServiceAccountToken": True,
        "service": {"type": "NodePort", "servicePortClientAppIo": 19094, "nodePortClientAppIo": 30094},
        "containerPorts": {"clientAppIo": 9300, "health": 9301},
        "networkPolicy": {"allowExternal": True},
    },
    "superexec": {
        "enabled": True,
        "replicas": 2,
        "extraArgs": ["--allow-runtime-dependency-installation"],
        "image": {"repository": "flwr/superexec", "tag": "1.41.0", "pullPolicy": "Never"},
        "imagePullSecrets": ["superexec-cred"],
        "podLabels": {"role": "executor"},
        "nodeSelector": {"node.example.org/pool": "gpu"},
        "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
        "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"partition": 0}},
        "lifecycle": {"postStart": {"exec": {"command": ["true"]}}},
        "serviceAccount": {"annotations": {"iam.gke.io/gcp-service-account": "se@p.iam.gserviceaccount.com"}},
        "containerPorts": {"health": 9181},
    },
}


def test_the_charts_settings_reach_the_render(tmp_path, capsys, flower):
    """issue 12 §2's settings, imported from the chart's names (docs/helm-parameters.md), are in the rendered
    objects, and real Flower 1.41 parses the command lines they shape."""
    code, out, err = run_import(capsys, "helm", write(tmp_path, "v.yaml", CHART_SETTINGS), "--release", "r")
    assert code == 0, err
    config = stack_config(out)
    objects = render(config, "r")
    name = "r-flower-client"
    for o in objects:  # global.annotations: on every object
        assert o["metadata"]["annotations"]["example.org/owner"] == "ml-platform", o["metadata"]["name"]
    supernodes = get(objects, "StatefulSet", f"{name}-supernode-supernode")
    assert supernodes["metadata"]["annotations"]["example.org/rollout"] == "manual"
    assert supernodes["spec"]["updateStrategy"] == {"type": "OnDelete"}
    template = supernodes["spec"]["template"]
    assert template["metadata"]["labels"]["team"] == "ml" and template["metadata"]["labels"]["tier"] == "edge"
    assert template["metadata"]["annotations"]["prometheus.io/scrape"] == "false"
    pod = template["spec"]
    assert pod["nodeSelector"] == {"kubernetes.io/os": "linux"}
    assert pod["tolerations"] == CHART_SETTINGS["global"]["tolerations"]
    assert pod["imagePullSecrets"] == [{"name": "regcred"}] and pod["automountServiceAccountToken"] is True
    assert "requiredDuringSchedulingIgnoredDuringExecution" in pod["affinity"]["podAntiAffinity"]  # hard
    node_terms = pod["affinity"]["nodeAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"]  # soft
    assert node_terms[0]["preference"]["matchExpressions"][0]["values"] == ["eu-1a"]
    (supernode,) = pod["containers"]
    assert supernode["image"] == "registry.example.org/flwr/supernode:1.41.0@sha256:" + "4f" * 32
    assert supernode["imagePullPolicy"] == "IfNotPresent"
    assert supernode["lifecycle"] == {"preStop": {"sleep": {"seconds": 5}}}
    parsed = flower[HTTP_ERA].parse(PROGRAMS["supernode"], supernode["args"])
    assert parsed["superlink"] == "fl.example.org:443"
    assert supernode["readinessProbe"]["grpc"]["port"] == 9301
    account = get(objects, "ServiceAccount", f"{name}-supernode-supernode")
    assert account["metadata"]["annotations"]["iam.gke.io/gcp-service-account"] == "sn@p.iam.gserviceaccount.com"
    assert account["metadata"]["labels"]["azure.workload.identity/use"] == "true"
    service = get(objects, "Service", f"{name}-supernode-supernode-clientappio")
    assert service["spec"]["type"] == "NodePort"
    assert service["spec"]["ports"][0] | {"name": "x"} == {
        "name": "x",
        "port": 19094,
        "targetPort": 9300,
        "nodePort": 30094,
        "protocol": "TCP",
    }
    superexecs = [o for o in by_kind(objects, "StatefulSet") if o["metadata"]["name"].startswith(f"{name}-superexec-")]
    assert sorted(o["metadata"]["name"] for o in superexecs) == [
        f"{name}-superexec-supernode",
        f"{name}-superexec-supernode-1",
    ]
    for workload in superexecs:
        assert workload["spec"]["updateStrategy"] == {"type": "RollingUpdate", "rollingUpdate": {"partition": 0}}
        template = workload["spec"]["template"]
        assert template["metadata"]["labels"]["role"] == "executor"
        pod = template["spec"]
        assert pod["nodeSelector"] == {"kubernetes.io/os": "linux", "node.example.org/pool": "gpu"}
        assert (
            pod["tolerations"] == CHART_SETTINGS["global"]["tolerations"] + CHART_SETTINGS["superexec"]["tolerations"]
        )
        assert pod["imagePullSecrets"] == [{"name": "superexec-cred"}]
        (superexec,) = pod["containers"]
        assert superexec["image"] == "registry.hub.docker.com/flwr/superexec:1.41.0"
        assert superexec["imagePullPolicy"] == "Never"
        assert superexec["lifecycle"] == CHART_SETTINGS["superexec"]["lifecycle"]
        assert superexec["args"][-1] == "--allow-runtime-dependency-installation"
        parsed = flower[HTTP_ERA].parse(PROGRAMS["superexec-clientapp"], superexec["args"])
        assert parsed["runtime_api_address"].endswith(":9300")
        assert parsed["health_server_address"].endswith(":9181")
    account = get(objects, "ServiceAccount", f"{name}-superexec-supernode")
    assert account["metadata"]["annotations"]["iam.gke.io/gcp-service-account"] == "se@p.iam.gserviceaccount.com"


def test_node_config_placeholders_are_not_guessed(tmp_path, capsys):
    values = {"supernode": {"image": {"tag": "1.26.1"}, "node": {"config": {"name": "client_{index}"}}}}
    code, _, err = run_import(capsys, "helm", write(tmp_path, "v.yaml", values))
    assert code == 1 and "supernode.node.config.name: 'client_{index}': the chart passes it literally" in err
