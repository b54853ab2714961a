"""Hypothesis building blocks for the config fuzzer: the settings that came with the Helm
chart's parameters (issue 12 §2) and the resource presets, as the fuzzer adds them to a
drawn stack (tests/support/fuzz_configs.py). Each is mostly what a chart user would write
and, now and then, wrong in one way: a label that is not a label, a preset that does not
exist, an update strategy of the wrong workload kind, a port that clashes, an image in
parts without a tag or with a malformed digest, a pod setting on a sidecar SuperExec.
"""

from __future__ import annotations

from typing import Any

from tests.support.fuzz_fragments import Draw, chance, env, one, pick, probes

DIGEST = "sha256:" + "ab" * 32
PRESETS = ["none", "nano", "micro", "small", "medium", "large", "xlarge", "2xlarge"]
TOLERATION = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
NODE_TERM = {"key": "pool", "operator": "In", "values": ["fl"]}


def top_level(draw: Draw[Any], raw: dict[str, Any]) -> None:
    """The chart's `global.*`: federation-wide annotations, pod labels, scheduling, pulls."""
    if chance(draw, 8):
        raw["annotations"] = pick(draw, [{"team": "ml"}, {"example.org/owner": "fl"}], [{"a b": "x"}, {"x": 1}])
    if chance(draw, 8):
        raw["podLabels"] = pick(draw, [{"cost-center": "42"}], [{"cost center": "42"}, {"x": "y" * 70}])
    if chance(draw, 6):
        raw["nodeSelector"] = pick(draw, [{"pool": "fl"}], [{"pool": 1}])
    if chance(draw, 6):
        raw["tolerations"] = pick(draw, [[TOLERATION]], [[{"operator": "Sometimes"}]])
    if chance(draw, 8):
        raw["affinity"] = pick(
            draw,
            [
                {"podAntiAffinity": "soft"},
                {"podAntiAffinity": "hard", "nodeAffinity": {"type": "soft", "matchExpressions": [NODE_TERM]}},
                {"nodeAffinity": {"matchExpressions": [NODE_TERM]}},
            ],
            [{"podAntiAffinity": "always"}, {"nodeAffinity": {"matchExpressions": [{"key": "pool"}]}}],
        )
    if chance(draw, 6):
        raw["imagePullPolicy"] = pick(draw, ["Always", "IfNotPresent"], ["Sometimes"])
    if chance(draw, 6):
        raw["imagePullSecrets"] = pick(draw, [["regcred"]], [["Reg_Cred"], "regcred"])
    if chance(draw, 8):
        raw["resourcesPreset"] = pick(draw, PRESETS, ["tiny", "XL"])


def image(draw: Draw[Any], repository: str, tag: str) -> Any:
    """A reference string mostly, the chart's parts now and then (a digest pins it)."""
    if not chance(draw, 15):
        return f"{repository}:{tag}"
    parts: dict[str, Any] = {"repository": repository, "tag": tag}
    if chance(draw, 40):
        parts["registry"] = pick(draw, ["docker.io", "registry.example.org:5000"], ["https://docker.io"])
    if chance(draw, 30):
        parts["digest"] = pick(draw, [DIGEST], ["sha256:abc", "md5:" + "0" * 32])
        if chance(draw, 20):
            del parts["tag"]  # pinned by the digest alone: the Flower version must come from `version`
    if chance(draw, 20):
        parts["pullPolicy"] = pick(draw, ["Always", "Never"], ["always"])
    return parts


def pod_settings(draw: Draw[Any], section: dict[str, Any], kind: str) -> None:
    """A workload's own settings (`superlink`, a pool, a `superexec`): labels, scheduling,
    its ServiceAccount and token, pod security, update strategy and lifecycle. `kind` is
    the workload's (StatefulSet, DaemonSet or Deployment): the other kinds' strategies are
    the wrong ones."""
    if chance(draw, 6):
        section["labels"] = pick(draw, [{"tier": "fl"}], [{"tier": "a b"}])
    if chance(draw, 6):
        section["annotations"] = {"example.org/note": "fuzz"}
    if chance(draw, 6):
        section["podLabels"] = pick(draw, [{"workload": "fl"}], [{"-bad": "x"}])
    if chance(draw, 6):
        section["podAnnotations"] = {"prometheus.io/scrape": "true"}
    if chance(draw, 5):
        section["nodeSelector"] = {"zone": "a"}
    if chance(draw, 5):
        section["tolerations"] = [TOLERATION]
    if chance(draw, 5):
        section["affinity"] = pick(
            draw,
            [{"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [{}]}}}],
            [{"nodeAfinity": {}}],
        )
    if chance(draw, 5):
        section["imagePullSecrets"] = pick(draw, [["regcred"], []], [["a/b"]])
    if chance(draw, 6):
        section["serviceAccount"] = pick(
            draw,
            [
                {"annotations": {"iam.gke.io/gcp-service-account": "fl@p.iam.gserviceaccount.com"}},
                {"labels": {"azure.workload.identity/use": "true"}, "automountServiceAccountToken": False},
            ],
            [{"annotations": {"a": 1}}, {"name": "x"}],
        )
    if chance(draw, 5):
        section["automountServiceAccountToken"] = pick(draw, [True, False], ["yes"])
    if chance(draw, 6):
        section["podSecurityContext"] = pick(
            draw, [{"fsGroup": 2000}, {"runAsUser": 1001, "runAsGroup": 1001}], [{"runAsUser": 0}, {"fsGroup": "x"}]
        )
    if chance(draw, 6):
        sts = [{"type": "OnDelete"}, {"type": "RollingUpdate", "rollingUpdate": {"partition": 1}}]
        deployment = [{"type": "Recreate"}, {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 0}}]
        good = deployment if kind == "Deployment" else sts
        section["updateStrategy"] = pick(draw, good, (sts if kind == "Deployment" else deployment) + [{"type": "x"}])
    if chance(draw, 5):
        section["lifecycle"] = pick(
            draw, [{"preStop": {"exec": {"command": ["sleep", "5"]}}}], [{"preStop": {"sleep": "5"}}]
        )


def pool_api(draw: Draw[Any], pool: dict[str, Any]) -> None:
    """The SuperNode's ClientAppIo Service and container ports (the chart's
    `supernode.service.*`, `supernode.containerPorts.*`)."""
    if chance(draw, 6):
        pool["containerPorts"] = pick(
            draw, [{"clientAppIo": 9095}, {"health": 8181}], [{"clientAppIo": 8081}, {"health": 0}]
        )
    if chance(draw, 5):
        pool["service"] = pick(
            draw,
            [{"port": 9096, "portName": "appio"}, {"type": "NodePort", "nodePort": 30994}],
            [{"type": "LoadBalancer", "nodePort": 99999}, {"portName": "App_IO"}],
        )


def superexec(draw: Draw[Any], section: dict[str, Any], distributed: bool, kind: str) -> None:
    """`superlink.superexec` / `pools[].superexec`: container settings anywhere, pod and
    workload settings where the SuperExecs run in workloads of their own (a sidecar's are
    refused)."""
    settings: dict[str, Any] = {}
    if chance(draw, 10):
        settings["env"] = env(draw)
    if chance(draw, 8):
        settings["extraArgs"] = pick(draw, [["--health-server-address", "0.0.0.0:8089"]], [[3]])
    if chance(draw, 6):
        settings["probes"] = probes(draw)
    if chance(draw, 5):
        settings["containerPorts"] = pick(draw, [{"health": 8085}], [{"health": 9094}])
    if distributed and chance(draw, 15) or chance(draw, 2):
        settings["replicas"] = pick(draw, [1, 2], [0])
    if distributed and chance(draw, 20) or chance(draw, 2):
        pod_settings(draw, settings, kind)
    if settings:
        section["superexec"] = settings


def presets(draw: Draw[Any], section: dict[str, Any], keys: list[str]) -> None:
    for key in keys:
        if chance(draw, 6):
            section[key] = one(draw, PRESETS + ["tiny"])
