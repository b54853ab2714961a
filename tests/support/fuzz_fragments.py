"""Hypothesis building blocks for the config fuzzer (tests/test_config_fuzzing.py): the
Kubernetes fragments a config carries (env, volumes, mounts, claims, resources, security
contexts, podTemplate patches, NetworkPolicy rules, probes), each drawn from values a user
would write and, now and then, from values that are wrong in one way (a typo, a wrong
type, a reserved name, a clash with what flower-federation sets itself).

Names come from small alphabets on purpose, so that volumes, mounts, containers and pools
collide with each other and with ours. Every fragment is a fresh copy: builders must
never see two configs share a mapping.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from hypothesis import strategies as st

T = TypeVar("T")
Draw = Callable[[st.SearchStrategy[T]], T]


# Built once: `st.integers(0, 99)` per call cost about a third of `chance`'s time (some 150 calls an
# example), for the same draws.
_PERCENT = st.integers(0, 99)


def chance(draw: Draw[Any], percent: int) -> bool:
    """True `percent`% of the time; shrinks towards False (the simpler config)."""
    return bool(draw(_PERCENT) >= 100 - percent)


def one(draw: Draw[Any], options: Sequence[Any]) -> Any:
    """A fresh copy of one of `options` (shrinks towards the first)."""
    return copy.deepcopy(draw(st.sampled_from(options)))


def pick(draw: Draw[Any], good: Sequence[Any], bad: Sequence[Any], bad_percent: int = 4) -> Any:
    """Mostly one of `good`, sometimes one of `bad`."""
    return one(draw, bad if chance(draw, bad_percent) else good)


def some(draw: Draw[Any], item: Callable[[Draw[Any]], Any], most: int = 2) -> list[Any]:
    """0..most items, each drawn by `item`."""
    return [item(draw) for _ in range(draw(st.integers(0, most)))]


# --- env ------------------------------------------------------------------------------------

ENV_GOOD = [
    {"name": "LOG_LEVEL", "value": "debug"},
    {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
    {"name": "TOKEN", "valueFrom": {"secretKeyRef": {"name": "api", "key": "token"}}},
    {"name": "CFG", "valueFrom": {"configMapKeyRef": {"name": "cfg", "key": "k", "optional": True}}},
    {"name": "MEM", "valueFrom": {"resourceFieldRef": {"resource": "limits.memory"}}},
    {"name": "EMPTY"},
    {"name": "REF", "value": "$(LOG_LEVEL)-$$"},
    {"name": "NVIDIA_VISIBLE_DEVICES", "value": "0"},  # also set by nvidia mountAll
    {"name": "LOG_LEVEL", "value": "info"},  # the same name again
]
ENV_BAD = [
    {"name": "FLOWER_POD_INDEX", "value": "1"},  # reserved
    {"name": "FLOWER_SUPERNODE_HOST", "value": "x"},  # reserved
    {"value": "no-name"},
    {"name": "X", "valu": "1"},
    {"name": 5, "value": "1"},
    {"name": "X", "value": 1},
    "LOG_LEVEL=debug",
    None,
]


def env(draw: Draw[Any]) -> list[Any]:
    return some(draw, lambda d: pick(d, ENV_GOOD, ENV_BAD))


# --- volumes, mounts, claims -------------------------------------------------------------

VOLUME_NAMES = ["data", "cfg"]
RESERVED_VOLUME_NAMES = ["tls", "ca", "state", "node-auth", "scratch-supernode", "scratch-superlink", "dev-kfd"]
MOUNT_PATHS = ["/data", "/srv/cfg", "/data/sub"]
RESERVED_MOUNT_PATHS = ["/etc/flower/tls", "/etc/flower/ca", "/app/.flwr", "/tmp", "/var/lib/flower"]


def volume_source(draw: Draw[Any]) -> dict[str, Any]:
    return one(
        draw,
        [
            {"emptyDir": {}},
            {"configMap": {"name": "cfg"}},
            {"secret": {"secretName": "datasets"}},
            {"persistentVolumeClaim": {"claimName": "datasets", "readOnly": True}},
            {"emptyDir": {"medium": "Memory", "sizeLimit": "1Gi"}},
            {"projected": {"sources": [{"configMap": {"name": "cfg"}}, {"secret": {"name": "api"}}]}},
            {"hostPath": {"path": "/mnt/data", "type": "Directory"}},  # not restricted: the namespace says so
        ],
    )


def volumes(draw: Draw[Any], names: Sequence[str] = VOLUME_NAMES) -> list[Any]:
    """0-2 volumes named after `names`; now and then one named like another or like ours,
    misspelt, or not a mapping."""
    out: list[Any] = [{"name": n, **volume_source(draw)} for n in names[: draw(st.integers(0, len(names)))]]
    if out and chance(draw, 5):
        out.append(
            one(
                draw,
                [
                    {"name": one(draw, RESERVED_VOLUME_NAMES), "emptyDir": {}},
                    {"name": out[0]["name"], "emptyDir": {}},
                    {"name": "typo", "emtpyDir": {}},
                    {"emptyDir": {}},
                    {"name": "bad", "secret": {"secretName": 7}},
                    "data",
                ],
            )
        )
    return out


def names_of(items: Sequence[Any]) -> list[str]:
    """The names of the volumes (or claims) among `items`."""
    found = [i.get("name", (i.get("metadata") or {}).get("name")) for i in items if isinstance(i, dict)]
    return [n for n in found if isinstance(n, str)]


def mounts(draw: Draw[Any], volumes: Sequence[str]) -> list[Any]:
    """0-2 mounts of `volumes` (what the section declares) at distinct paths; now and then a
    mount of something else, at a path of ours or at one taken, or a malformed one."""
    out: list[Any] = []
    for path in MOUNT_PATHS[: draw(st.integers(0, 2))] if volumes else []:
        m: dict[str, Any] = {"name": one(draw, volumes), "mountPath": path}
        if chance(draw, 30):
            m["readOnly"] = True
        if chance(draw, 10):
            m["subPath"] = "sub"
        out.append(m)
    if chance(draw, 4):
        name = one(draw, list(volumes) or VOLUME_NAMES)
        out.append(
            one(
                draw,
                [
                    {"name": name, "mountPath": one(draw, RESERVED_MOUNT_PATHS)},
                    {"name": "elsewhere", "mountPath": "/elsewhere"},
                    {"name": name, "mountPath": "/data"},
                    {"name": name},
                    {"name": name, "mountPath": "/ro", "readOnly": "yes"},
                ],
            )
        )
    return out


def claim(draw: Draw[Any]) -> Any:
    if chance(draw, 5):
        return one(
            draw,
            [
                {"metadata": {"name": "state"}, "spec": {"accessModes": ["ReadWriteOnce"]}},
                {"metadata": {"name": "cache"}, "spec": {"acessModes": ["ReadWriteOnce"]}},
                {"spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}},
            ],
        )
    spec: dict[str, Any] = {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}
    if chance(draw, 20):
        spec["storageClassName"] = "fast"
    return {"metadata": {"name": one(draw, ["cache", "data"])}, "spec": spec}


# --- resources and security contexts --------------------------------------------------------

RESOURCES_GOOD = [
    {"requests": {"cpu": "250m", "memory": "512Mi"}},
    {"limits": {"memory": "1Gi"}},
    {"limits": {"cpu": "50m"}},  # below the default request: the request gives way
    {"requests": {"cpu": 1}, "limits": {"cpu": 2}},
    {"requests": {"ephemeral-storage": "1Gi"}},
    {"limits": {"nvidia.com/gpu": 1}},
    {"requests": {"cpu": 0.5}},
    {},
]
RESOURCES_BAD = [
    {"requests": {"memory": "2Gi"}, "limits": {"memory": "1Gi"}},
    {"requests": {"cpu": "lots"}},
    {"requests": {"cpu": True}},
    {"limit": {"cpu": "1"}},
    {"requests": {"memory": "-1Gi"}},
    {"requests": "1"},
    "250m",
]


def resources(draw: Draw[Any]) -> Any:
    return pick(draw, RESOURCES_GOOD, RESOURCES_BAD)


CONTAINER_SECURITY_GOOD = [
    {"readOnlyRootFilesystem": True},
    {"runAsUser": 1000},
    {"runAsNonRoot": False},
    {"allowPrivilegeEscalation": True},  # baseline, not restricted
    {"capabilities": {"add": ["NET_BIND_SERVICE"], "drop": ["ALL"]}},
    {"capabilities": {"add": ["NET_ADMIN"]}},
    {"seccompProfile": {"type": "Unconfined"}},
    {"privileged": True},
]
CONTAINER_SECURITY_BAD = [{"runAsUser": "root"}, {"privilegd": True}, {"capabilities": {"add": "NET_ADMIN"}}, []]

POD_SECURITY_GOOD = [
    {"fsGroupChangePolicy": "OnRootMismatch"},
    {"runAsUser": 1001, "runAsGroup": 1001},
    {"supplementalGroups": [100]},
    {"sysctls": [{"name": "net.ipv4.ip_local_port_range", "value": "1024 65535"}]},
    {"runAsNonRoot": False},
    {"seccompProfile": {"type": "Localhost", "localhostProfile": "profiles/flower.json"}},
]
POD_SECURITY_BAD = [{"fsGroup": "x"}, {"runAsUsr": 1}, {"sysctls": {"a": "b"}}]


def container_security(draw: Draw[Any]) -> Any:
    return pick(draw, CONTAINER_SECURITY_GOOD, CONTAINER_SECURITY_BAD)


def pod_security(draw: Draw[Any]) -> Any:
    return pick(draw, POD_SECURITY_GOOD, POD_SECURITY_BAD)


# --- podTemplate ---------------------------------------------------------------------------

RESTRICTED = {
    "allowPrivilegeEscalation": False,
    "runAsNonRoot": True,
    "capabilities": {"drop": ["ALL"]},
    "seccompProfile": {"type": "RuntimeDefault"},
}


def container_patch(draw: Draw[Any], i: int, managed: Sequence[str], volumes: Sequence[str]) -> Any:
    """A patch of one of our containers (merged by name; now and then one these pods do not
    run), or a container of the user's."""
    ours = chance(draw, 60)
    if ours:
        name = pick(draw, managed, ["superexec-clientapp", "superexec-serverapp", "node-registration"])
    else:
        name = ["sidecar", "log-shipper"][i]
    c: dict[str, Any] = {"name": name}
    if not ours and not chance(draw, 4):
        c["image"] = "busybox:1.36"
        if chance(draw, 70):
            c["securityContext"] = copy.deepcopy(RESTRICTED)
    if chance(draw, 30):
        c["env"] = env(draw)
    if chance(draw, 30):
        c["resources"] = resources(draw)
    if chance(draw, 20):
        c["securityContext"] = container_security(draw)
    if chance(draw, 30):
        c["volumeMounts"] = mounts(draw, volumes)
    if chance(draw, 10):
        c["ports"] = [{"containerPort": one(draw, [9092, 8000, 9999]), "name": "extra"}]
    if chance(draw, 6):  # managed fields of our containers: refused
        c[one(draw, ["image", "args", "command"])] = one(draw, ["evil:1", ["sh", "-c", "true"]])
    if chance(draw, 4):
        c["imagePullPolicy"] = one(draw, ["Always", 3])
    return c


def pod_template(draw: Draw[Any], managed: Sequence[str], declared: Sequence[str]) -> Any:
    """A PodTemplateSpec patch of a few fields, for pods that run the `managed` containers
    and have the `declared` volumes of the section."""
    if chance(draw, 5):
        return one(draw, [{"spec": {"nodeSelectr": {"a": "b"}}}, {"spec": []}, {"metadata": {"labelz": {}}}, "pod"])
    template: dict[str, Any] = {}
    meta: dict[str, Any] = {}
    if chance(draw, 30):
        meta["labels"] = pick(
            draw, [{"team": "ml"}], [{"app.kubernetes.io/name": "x"}, {"app.kubernetes.io/part-of": "research"}]
        )
    if chance(draw, 20):
        meta["annotations"] = {"owner": "ml-team"}
    if meta:
        template["metadata"] = meta
    spec: dict[str, Any] = {}
    available = list(declared)
    if chance(draw, 30):
        spec["volumes"] = volumes(draw, ["scratch", *declared[:1]])  # the second replaces the section's
        available += names_of(spec["volumes"])
    for key, values in (
        ("nodeSelector", [{"pool": "gpu"}, {"kubernetes.io/arch": "amd64"}]),
        ("tolerations", [[{"key": "gpu", "operator": "Exists", "effect": "NoSchedule"}]]),
        ("priorityClassName", ["flower"]),
        ("runtimeClassName", ["gvisor"]),
        ("serviceAccountName", ["custom-sa"]),
        ("automountServiceAccountToken", [True]),
        ("imagePullSecrets", [[{"name": "regcred"}]]),
        ("hostNetwork", [True]),
        ("terminationGracePeriodSeconds", [60]),
        (
            "affinity",
            [
                {
                    "nodeAffinity": {
                        "requiredDuringSchedulingIgnoredDuringExecution": {
                            "nodeSelectorTerms": [
                                {"matchExpressions": [{"key": "gpu", "operator": "In", "values": ["a100"]}]}
                            ]
                        }
                    }
                }
            ],
        ),
        (
            "topologySpreadConstraints",
            [[{"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "ScheduleAnyway"}]],
        ),
    ):
        if chance(draw, 10):
            spec[key] = one(draw, values)
    if chance(draw, 15):
        spec["securityContext"] = pod_security(draw)
    if chance(draw, 35):
        spec["containers"] = [container_patch(draw, i, managed, available) for i in range(draw(st.integers(1, 2)))]
    if chance(draw, 15):
        init = {"name": pick(draw, ["fetch"], ["supernode", "sidecar"]), "image": "busybox:1.36", "command": ["true"]}
        if chance(draw, 70):
            init["securityContext"] = copy.deepcopy(RESTRICTED)
        if available and chance(draw, 50):
            init["volumeMounts"] = [{"name": available[0], "mountPath": "/data"}]
        spec["initContainers"] = [init]
    if spec:
        template["spec"] = spec
    return template


# --- NetworkPolicy knobs and probes ---------------------------------------------------------


def network_policy(draw: Draw[Any]) -> Any:
    if chance(draw, 5):
        return one(
            draw,
            [
                {"extraIngress": [{"frm": []}]},
                {"ingressNSPodMatchLabels": {"role": "client"}},  # without ingressNSMatchLabels
                {"enabled": "no"},
                {"allowExternall": True},
            ],
        )
    out: dict[str, Any] = {}
    for key, values in (
        ("enabled", [False, True]),
        ("allowExternal", [True, False]),
        ("allowExternalEgress", [True]),
        (
            "extraIngress",
            [
                [{"from": [{"ipBlock": {"cidr": "10.0.0.0/8", "except": ["10.1.0.0/16"]}}], "ports": [{"port": 9092}]}],
                [{"from": [{"ipBlock": {"cidr": "10.0.0.1"}}]}],  # no prefix: refused
            ],
        ),
        ("extraEgress", [[{"to": [{"namespaceSelector": {}}], "ports": [{"port": 443, "protocol": "TCP"}]}]]),
        ("ingressPodMatchLabels", [{"role": "client"}]),
    ):
        if chance(draw, 15):
            out[key] = one(draw, values)
    if chance(draw, 15):
        out["ingressNSMatchLabels"] = {"team": "ml"}
        if chance(draw, 50):
            out["ingressNSPodMatchLabels"] = {"role": "client"}
    return out


def probes(draw: Draw[Any]) -> Any:
    if chance(draw, 8):
        return one(
            draw,
            [
                {"livenessProbe": {"successThreshold": 2}},
                {"readinessProbe": {"periodSeconds": 0}},
                {"startupProbe": {"enabled": "yes"}},
                {"livenesProbe": {}},
            ],
        )
    out: dict[str, Any] = {}
    for name in ("livenessProbe", "readinessProbe", "startupProbe"):
        if chance(draw, 30):
            out[name] = one(
                draw,
                [
                    {"periodSeconds": 20},
                    {"enabled": False},
                    {"failureThreshold": 30, "initialDelaySeconds": 5},
                    {"timeoutSeconds": 3},
                    {"successThreshold": 2} if name == "readinessProbe" else {"successThreshold": 1},
                ],
            )
    return out
