"""The config fuzzer's component sections (fuzz_configs.py draws the rest of a stack):
`supernodes`, its pools (names that collide now and then, replicas, images, clusters, GPUs,
resources, volumes and mounts, podTemplate, nodeConfig, pod settings, SuperExec settings,
PDBs), and, for a federation or a hub, `superlink` (its images, volumes, podTemplate,
persistence, cluster, exposure: Service, ingress, external address) with `cli`. Each drawn
consistent with the big choices most of the time and wrong in one way now and then."""

from __future__ import annotations

from typing import Any

from tests.support import fuzz_settings
from tests.support.fuzz_fragments import (
    Draw,
    chance,
    claim,
    env,
    mounts,
    names_of,
    network_policy,
    one,
    pick,
    pod_template,
    probes,
    resources,
    volumes,
)


def supernodes_section(
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


def superlink_section(
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
