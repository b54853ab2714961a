"""Node authentication in the rendered manifests: the SuperLink enables it, each
SuperNode pod resolves its own key file of its pool's Secret (by ordinal, or by node name
in a DaemonSet), only the SuperNode container mounts the keys, and nothing of it appears
unless enabled."""

from __future__ import annotations

import pytest

from tests.support.kube import container_argv, pod_for
from tests.support.manifests import arg_after, containers, get, mounts_by_name, volumes_by_name, workload_container
from tests.support.render import node_key_secret_of, node_key_slots
from tests.support.security_matrix import NAME, STACK_IDS, STACKS, security_objects, security_plan, supplied_keys

NODE_AUTH_STACKS = [s for s in STACK_IDS if STACKS[s].get("nodeAuth", {}).get("enabled")]


def test_node_auth_is_covered_in_both_modes_and_eras():
    assert {
        "grpc-nodeauth",
        "grpc-process-sidecar-nodeauth",
        "http-daemonset-supplied-keys",
        "http-executor-kubernetes",
        "http-nodeauth",
    } <= set(NODE_AUTH_STACKS)


@pytest.mark.parametrize("sid", NODE_AUTH_STACKS)
def test_each_supernode_uses_its_own_key(sid):
    plan, objects = security_plan(sid), security_objects(sid)
    link = workload_container(objects, "StatefulSet", f"{NAME}-superlink", "superlink")
    assert link["args"].count("--enable-supernode-auth") == 1
    stateful = plan.spec.mode == "StatefulSet"
    var = "FLOWER_POD_INDEX" if stateful else "FLOWER_NODE_NAME"
    field = "metadata.labels['apps.kubernetes.io/pod-index']" if stateful else "spec.nodeName"
    for pool in plan.spec.supernodes.pools:
        w = get(objects, "StatefulSet" if stateful else "DaemonSet", f"{NAME}-supernode-{pool.name}")
        node = next(c for c in w["spec"]["template"]["spec"]["containers"] if c["name"] == "supernode")
        assert arg_after(node["args"], "--auth-supernode-private-key") == f"/etc/flower/node-auth/node-$({var}).key"
        assert {"name": var, "valueFrom": {"fieldRef": {"fieldPath": field}}} in node["env"]
        secret_name = f"{NAME}-supernode-{pool.name}-node-keys"
        assert volumes_by_name(w)["node-auth"] == {
            "name": "node-auth",
            "secret": {"secretName": secret_name, "defaultMode": 0o440},
        }
        assert mounts_by_name(node)["node-auth"] == {
            "name": "node-auth",
            "mountPath": "/etc/flower/node-auth",
            "readOnly": True,
        }
        # Only the SuperNode container sees the keys.
        for c in w["spec"]["template"]["spec"]["containers"]:
            if c is not node:
                assert "node-auth" not in mounts_by_name(c)
        # Every pod resolves its path to a key file of the pool's Secret, each a different one.
        slots = node_key_slots(plan, pool)
        keys = plan.node_auth_keys[pool.name] if plan.node_auth_keys else {s: f"key-{s}" for s in slots}
        files = set(node_key_secret_of(plan, pool, keys)["stringData"])
        if stateful:
            assert slots == [str(i) for i in range(pool.replicas)]
            pods = [pod_for(w, i) for i in range(pool.replicas)]
        else:
            assert slots == sorted(supplied_keys()[pool.name])
            pods = [pod_for(w, node=n) for n in slots]
        paths = [arg_after(container_argv(node, pod), "--auth-supernode-private-key") for pod in pods]
        assert len(set(paths)) == len(pods)
        assert {p.rsplit("/", 1)[1] for p in paths} == files


@pytest.mark.parametrize("sid", [s for s in STACK_IDS if s not in NODE_AUTH_STACKS])
def test_no_node_auth_unless_enabled(sid):
    for w, c in containers(security_objects(sid)):
        assert "--enable-supernode-auth" not in c["args"] and "--auth-supernode-private-key" not in c["args"]
        assert "node-auth" not in volumes_by_name(w)
