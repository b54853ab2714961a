"""Declarative node registration: two Jobs in the SuperLink's cluster that make the
SuperLink's registered SuperNode keys exactly the trusted set (the pools' own keys and
every admitted site's), on each `pulumi up` that changes the set, in the order that keeps
every SuperNode admitted throughout a key rotation:

1. `N-node-registration-<digest>` (phase `register`) registers the trusted keys that are
   not registered yet and revokes nothing. The pools' node-keys Secrets and workloads
   wait for it, so a SuperNode never starts with a key the SuperLink does not know.
2. `N-node-revocation-<digest>` (phase `revoke`) unregisters the nodes whose key is no
   longer trusted and registers nothing. It waits for the pools' workloads (pulumi-kubernetes
   waits for a StatefulSet's rollout), so no SuperNode still running an old key is cut off.

The Job runs `scripts/register_nodes.py` with the SuperLink image's Python against the
in-cluster Control API (TLS, the federation's CA), under a ServiceAccount of its own with
no API token. Its ConfigMap carries the script, the `flwr` connection config and the
trusted keys; the shell fills in the keys (the pools' are generated at deploy time) and
names the Jobs after their digest, so a new set is a new pair of Jobs and an unchanged set
is no change at all. Registrations live in the SuperLink's state (its PVC), so they survive a
restart; the register script stays exported for anyone who cannot run Jobs.

At scale the trusted keys are sharded (`keys_sharded`): a consortium hub of 500 sites x 20 keys holds
about 2.2 MB of OpenSSH lines, and the API server refuses a ConfigMap whose data passes 1 MiB
(kube/limits.py). While the keys fit comfortably in one object (SINGLE_BUDGET, half the limit, so
the estimate of keys generated at deploy time never nears it) they stay in `N-node-registration` as
ever; beyond, they go to SHARDS ConfigMaps `N-node-registration-keys-NN`, each key by a hash of its
key material (`shard_of`), which the Job mounts beside the script (one projected volume) and the script
reads as one set. Why this design:

- a key's shard depends on the key alone, so adding or removing one key changes exactly one shard
  ConfigMap (and the Job pair, named after the whole set as before); no other object changes;
- one Job pair over the union, not a Job per shard: the revocation phase must know the whole trusted
  set to tell which registered node is no longer trusted, and the script registers only the keys the
  SuperLink lacks (one ListNodes, then one call per changed key), so a one-key change is one call;
- not compression: gzip of base64 keys saves about a third, so 10,000 keys would still be about 1 MiB
  in one object, and a gzip blob hides the changed key from `pulumi preview --diff` and `diff`;
- a fixed SHARDS (16), not one ConfigMap per site: few objects keep the render fast (each is a Pulumi
  registration) and about 75,000 keys fit before any shard nears the limit; past that the render
  refuses the config by `sites`, the number of keys named (builders/limits.py).

The one change of shape, crossing SINGLE_BUDGET, moves the keys from `N-node-registration` into the
shards in one `pulumi up` (ConfigMaps only: the trusted set, and so the Jobs' names, is unchanged by
the move itself).

The keys' ConfigMaps are bound to their content (issue 32 (d)): each one's Kubernetes name carries a
digest of its whole data (`bound_name`) and it is `immutable: true`; the Jobs mount them by that name
(`bind_volumes`). A Job therefore always reads the set it was made for: a new set is a new ConfigMap
(Pulumi replaces it: its Pulumi name, and so its URN, stays `N-node-registration`), never an update in
place under an older Job that may still be retrying. Pulumi deletes the replaced ConfigMap only at the end
of the `up`, after the Jobs that mount it (they depend on it, and were replaced too: their names or pod
templates changed with it); a pod of an old Job started before that read its keys at its start.

A trusted key the SuperLink can never accept (stale: a key it revoked before, which Flower does not
register again) never blocks a revocation (issue 32 (c)): the registration Job registers the other keys
and reports it; the revocation Job, which runs after it whatever it reported, revokes every key no longer
trusted and only then exits EXIT_REFUSED, on which the Job's podFailurePolicy fails the Job at once, so
`pulumi up` fails, saying why, rather than retrying until its deadline.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import tomli_w

from flower_federation.builders import node_auth, resources
from flower_federation.builders.access import service_account
from flower_federation.builders.pod_pipeline import PodRecipe, finish_pod
from flower_federation.builders.workload_parts import ca_mounts, ca_volumes, managed_container
from flower_federation.flower.layout import REGISTRATION_DIR, REGISTRATION_VOLUME, WRITABLE_PATHS
from flower_federation.kube.naming import NODE_REGISTRATION, REGISTRATION_DIGEST_LENGTH
from flower_federation.kube.objects import Manifest
from flower_federation.plan import FederationPlan

# The script goes into the registration ConfigMap byte for byte, comments included: a comment there names this
# module by its path before the package moved, and stays so, since any change to the script would re-run every
# federation's registration Job for a comment.
SCRIPT = Path(__file__).resolve().parents[1] / "flower" / "scripts" / "register_nodes.py"
SCRIPT_FILE = "register_nodes.py"
CONFIG_FILE = "config.toml"
KEYS_FILE = "trusted-keys"
# Sharded keys (`keys_sharded`): SHARDS ConfigMaps, each key by `shard_of`, once the keys' estimated size
# passes SINGLE_BUDGET (half the API server's 1 MiB, kube/limits.DATA_MAX).
SHARDS = 16
SINGLE_BUDGET = 512 * 1024
# An OpenSSH ECDSA public key line without its comment, at most (nistp521: 20 + 232 characters), a
# space, and the newline: what a pool's key (generated or supplied at deploy time) adds, with its comment.
KEY_LINE_MAX = 254
# Long enough for a SuperLink that is still being scheduled and started.
TIMEOUT_SECONDS = 600
# register_nodes.EXIT_REFUSED: retrying cannot help (the script runs in the Flower image
# and imports nothing of ours; a test keeps the two equal).
EXIT_REFUSED = 3
CONNECTION = "federation"
# The script's phases (register_nodes.PHASES; a test keeps the two equal).
REGISTER, REVOKE = "register", "revoke"
PHASES = (REGISTER, REVOKE)
JOB_ANNOTATIONS = {
    "checkov.io/skip1": "CKV_K8S_8=a Job runs to completion: nothing to keep alive",
    "checkov.io/skip2": "CKV_K8S_9=a Job runs to completion: no traffic to gate",
    # A Job that failed (the SuperLink was down, say) runs again on the next `pulumi up`
    # with the same keys, instead of being kept as it is (pulumi-kubernetes replaces it).
    "pulumi.com/replaceUnready": "true",
}


def connection_config(plan: FederationPlan) -> str:
    """The Job's `flwr` config: the in-cluster Control API, verified with the CA."""
    conn = {"address": plan.control_address}
    if plan.client_ca_file:
        conn["root-certificates"] = plan.client_ca_file
    else:
        conn["insecure"] = True  # type: ignore[assignment]
    return tomli_w.dumps({"superlink": {"default": CONNECTION, CONNECTION: conn}})


def trusted_slots(plan: FederationPlan, pool_keys: dict[str, dict[str, str]]) -> dict[str, dict[str, str]]:
    """Every key the SuperLink trusts, by owner and slot: the pools' own (`pool -> slot -> key`, known at
    deploy time) and each admitted site's under `site:<name>` (slots 0, 1, ... in the site's order). The
    exported register script takes this shape; the Job's KEYS_FILE is its keys (`trusted_keys_text`)."""
    sites = {f"site:{name}": {str(i): key for i, key in enumerate(keys)} for name, keys in plan.site_keys}
    return {**pool_keys, **sites}


def trusted_keys_text(slots: dict[str, dict[str, str]]) -> str:
    """The KEYS_FILE: one OpenSSH line per key of `trusted_slots`, sorted and without duplicates, so
    the same set always gives the same file (and digest), whoever holds each key."""
    keys = {key.strip() for owned in slots.values() for key in owned.values()}
    return "".join(f"{key}\n" for key in sorted(keys))


def shard_of(line: str) -> int:
    """The shard of one OpenSSH key line: a hash of its key material (not its comment), so a key keeps its
    shard whoever holds it and whatever else is trusted."""
    fields = line.split()
    material = fields[1] if len(fields) > 1 else line.strip()
    return hashlib.sha256(material.encode()).digest()[0] % SHARDS


def shard_texts(keys_text: str) -> list[str]:
    """`trusted_keys_text` split into SHARDS files, each sorted as the whole was."""
    shards: list[list[str]] = [[] for _ in range(SHARDS)]
    for line in keys_text.split("\n")[:-1]:  # "\n" alone, as the script reads it (never splitlines())
        shards[shard_of(line)].append(f"{line}\n")
    return ["".join(lines) for lines in shards]


def shard_file(i: int) -> str:
    return f"{KEYS_FILE}-{i:02d}"


def shard_name(plan: FederationPlan, i: int) -> str:
    return f"{plan.names.node_registration}-keys-{i:02d}"


def pool_key_bytes(plan: FederationPlan) -> int:
    """An upper bound of the pools' key lines (made or supplied at deploy time) in the keys file."""
    total = 0
    for pool in plan.spec.supernodes.pools:
        for slot in node_auth.slots(plan, pool):
            total += KEY_LINE_MAX + len(node_auth.key_comment(plan, pool.name, slot).encode()) + 1
    return total


def site_lines(plan: FederationPlan) -> list[str]:
    return sorted({key.strip() for _, keys in plan.site_keys for key in keys})


def keys_sharded(plan: FederationPlan) -> bool:
    """Whether the trusted keys go to shards: their size (the sites' exactly, the pools' bounded) passes
    SINGLE_BUDGET. Decided from the plan, so the objects a stack registers are known at preview."""
    size = sum(len(line.encode()) + 1 for line in site_lines(plan)) + pool_key_bytes(plan)
    return size > SINGLE_BUDGET


def keys_estimate(plan: FederationPlan) -> dict[str, int]:
    """Registration ConfigMap name -> the most bytes of keys the shell adds to it at deploy time: the sites'
    lines exactly, every pool key's bound (to any shard, as a pool key's shard is known only then)."""
    if not plan.registers_nodes:
        return {}
    pools = pool_key_bytes(plan)
    lines = site_lines(plan)
    if not keys_sharded(plan):
        return {plan.names.node_registration: pools + sum(len(line.encode()) + 1 for line in lines)}
    sizes = [pools] * SHARDS
    for line in lines:
        sizes[shard_of(line)] += len(line.encode()) + 1
    return {shard_name(plan, i): size for i, size in enumerate(sizes)}


def keys_digest(keys_text: str) -> str:
    return hashlib.sha256(keys_text.encode()).hexdigest()[:REGISTRATION_DIGEST_LENGTH]


def job_name(plan: FederationPlan, keys_text: str, phase: str = REGISTER) -> str:
    base = plan.names.node_registration if phase == REGISTER else plan.names.node_revocation
    return f"{base}-{keys_digest(keys_text)}"


def shard_config_maps(plan: FederationPlan) -> list[Manifest]:
    """The key shards, without their files: the shell adds each (`shard_texts`)."""
    if not keys_sharded(plan):
        return []
    return [
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": plan.meta(shard_name(plan, i), NODE_REGISTRATION),
            "immutable": True,
        }
        for i in range(SHARDS)
    ]


def config_map(plan: FederationPlan) -> Manifest:
    """Without KEYS_FILE (or the shards' files): the shell adds it (`trusted_keys_text` of `trusted_slots`)."""
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": plan.meta(plan.names.node_registration, NODE_REGISTRATION),
        "data": {SCRIPT_FILE: SCRIPT.read_text(), CONFIG_FILE: connection_config(plan)},
        "immutable": True,
    }


def data_digest(data: Mapping[str, str]) -> str:
    """A digest of a ConfigMap's whole data (every file name and content, in name order)."""
    h = hashlib.sha256()
    for name in sorted(data):
        h.update(f"{len(name)}:{name}{len(data[name].encode())}:".encode() + data[name].encode())
    return h.hexdigest()[:REGISTRATION_DIGEST_LENGTH]


def bound_name(base: str, data: Mapping[str, str]) -> str:
    """The Kubernetes name of a registration ConfigMap (`base`, its Pulumi name, stays stable) with its data:
    the content's digest in the name and `immutable: true`, so each Job reads exactly the set it was made
    for; a new set is a new ConfigMap, and an older Job never sees it (issue 32 (d))."""
    return f"{base}-{data_digest(data)}"


def bind_volumes(job_manifest: Manifest, names: Mapping[str, Any]) -> dict[str, Any]:
    """The Job's `spec` with every registration ConfigMap it mounts by its bound name (`names`: base
    name -> bound name, a value or a Pulumi Output)."""

    def bound(source: dict[str, Any]) -> dict[str, Any]:
        cm = source.get("configMap")
        # Other ConfigMaps (a CA bundle) keep their names.
        return {**source, "configMap": {**cm, "name": names.get(cm["name"], cm["name"])}} if cm else source

    volumes = []
    for volume in job_manifest["spec"]["template"]["spec"]["volumes"]:
        if "projected" in volume:
            sources = [bound(src) for src in volume["projected"]["sources"]]
            volume = {**volume, "projected": {**volume["projected"], "sources": sources}}
        volumes.append(bound(volume))
    spec = job_manifest["spec"]
    template = spec["template"]
    return {**spec, "template": {**template, "spec": {**template["spec"], "volumes": volumes}}}


def job(plan: FederationPlan, phase: str = REGISTER) -> Manifest:
    """The registration (or revocation) Job; the shell sets its name (`job_name`) and a
    pod annotation with the keys' digest."""
    names = plan.names
    files = f"{REGISTRATION_DIR}/"
    sharded = keys_sharded(plan)
    keys = [files + shard_file(i) for i in range(SHARDS)] if sharded else [files + KEYS_FILE]
    container = managed_container(
        plan,
        NODE_REGISTRATION,
        plan.superlink_image,
        [files + SCRIPT_FILE, CONNECTION, files + CONFIG_FILE, *keys, phase],
        resources=resources.registration_job(plan),
        env=[
            {"name": "FLWR_HOME", "value": WRITABLE_PATHS["flwr-home"]},
            {"name": "REGISTRATION_TIMEOUT_SECONDS", "value": str(TIMEOUT_SECONDS - 60)},
        ],
        mounts=ca_mounts(plan) + [{"name": REGISTRATION_VOLUME, "mountPath": REGISTRATION_DIR, "readOnly": True}],
        pull_policy=plan.pull_policy(plan.spec.superlink.image),
    )
    container["command"] = ["python"]
    # A stale key's REFUSED line (the log's last) is what `kubectl describe` shows for the failed pod.
    container["terminationMessagePolicy"] = "FallbackToLogsOnError"
    volume: dict[str, Any] = {"name": names.node_registration, "defaultMode": 0o444}
    if sharded:  # the script and every shard in one directory
        sources = [{"configMap": {"name": names.node_registration}}]
        sources += [{"configMap": {"name": shard_name(plan, i)}} for i in range(SHARDS)]
        volumes = ca_volumes(plan) + [
            {"name": REGISTRATION_VOLUME, "projected": {"sources": sources, "defaultMode": 0o444}}
        ]
    else:
        volumes = ca_volumes(plan) + [{"name": REGISTRATION_VOLUME, "configMap": volume}]
    pod = finish_pod(
        plan,
        PodRecipe(
            labels=plan.labels(NODE_REGISTRATION),
            containers=[container],
            volumes=volumes,
            service_account=names.node_registration,
            selector={},
            restart_policy="Never",
            spread=False,  # a Job's pod has nobody to spread from: the federation's node settings only
        ),
    )
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        # A Job runs to completion and nothing routes to it: probes have no meaning here.
        # (checkov's probe checks are skipped in JOB_ANNOTATIONS, with that reason.)
        "metadata": plan.meta(
            names.node_registration if phase == REGISTER else names.node_revocation,
            NODE_REGISTRATION,
            annotations=JOB_ANNOTATIONS,
        ),
        "spec": {
            "backoffLimit": 3,
            "activeDeadlineSeconds": TIMEOUT_SECONDS,
            # Kubernetes 1.26+ (GA in 1.31); needs restartPolicy Never.
            "podFailurePolicy": {
                "rules": [
                    {
                        "action": "FailJob",
                        "onExitCodes": {"containerName": NODE_REGISTRATION, "operator": "In", "values": [EXIT_REFUSED]},
                    }
                ]
            },
            "template": pod,
        },
    }


def objects(plan: FederationPlan) -> list[Manifest]:
    if not plan.registers_nodes:
        return []
    return [
        service_account(plan, plan.names.node_registration, NODE_REGISTRATION),
        config_map(plan),
        *shard_config_maps(plan),
        job(plan, REGISTER),
        job(plan, REVOKE),
    ]
