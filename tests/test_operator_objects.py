"""The operator README's examples (tests/support/operator_examples.py) give the
operator's objects, named as the operator names them, with its containers, images,
isolation and gRPC-era SuperLink flags, plus our deliberate differences: TLS, state on a
PVC, restricted pods, valid Kubernetes; each switched off again on request. The real
Pulumi program registers exactly what the core renders for them."""

from __future__ import annotations

import copy

import kubernetes_validate
import pytest

from flower_federation.cli.offline import run_program
from tests.support.defaults import CA_FILE, FLOWER_UID, RESTRICTED_CONTAINER_SC
from tests.support.generated import without_generated
from tests.support.manifests import arg_after, container, index, pod_spec, volume
from tests.support.operator_examples import (
    BY_ID,
    EXAMPLES,
    NAMESPACE,
    Example,
    each_example,
    each_pool,
    pool_workload,
    superlink_sts,
)
from tests.support.render import core_objects
from tests.support.schema import validate


def test_example_table_matches_the_configs():
    # The expectation table names exactly the pools each pasted config declares.
    assert len(EXAMPLES) == len(BY_ID) >= 20
    for ex in EXAMPLES:
        assert [p["name"] for p in ex.config["supernodes"]["pools"]] == list(ex.pools), ex.id
        assert ex.config.get("isolationMode") == ex.isolation, ex.id


# --- Objects, kinds and names ------------------------------------------------------------


@each_example
def test_objects_are_named_like_the_operators(ex: Example):
    # The operator's objects, plus what we add around each workload: a ServiceAccount,
    # a NetworkPolicy, and for each pool a PodDisruptionBudget.
    superlink = f"{ex.name}-superlink"
    expected = {
        ("Namespace", NAMESPACE),
        ("StatefulSet", superlink),
        ("Service", superlink),
        ("ServiceAccount", superlink),
        ("NetworkPolicy", superlink),
    }
    for pool, want in ex.pools.items():
        workload = f"{ex.name}-supernode-{pool}"
        expected |= {("ServiceAccount", workload), ("NetworkPolicy", workload), ("PodDisruptionBudget", workload)}
        if want.replicas is None:
            expected.add(("DaemonSet", workload))
        else:
            expected |= {("StatefulSet", workload), ("Service", workload)}
    objects = core_objects(ex.config)
    assert set(index(objects)) == expected
    # Everything but the Namespace itself lives in the default namespace `flower`.
    assert all(o["metadata"]["namespace"] == NAMESPACE for o in objects if o["kind"] != "Namespace")


@each_pool
def test_pool_workload_shape(ex: Example, pool: str):
    objs = index(core_objects(ex.config))
    want = ex.pools[pool]
    workload = pool_workload(objs, ex, pool)
    selector = workload["spec"]["selector"]["matchLabels"]
    assert selector.items() <= workload["spec"]["template"]["metadata"]["labels"].items()
    if want.replicas is None:
        assert workload["kind"] == "DaemonSet"
        assert "replicas" not in workload["spec"]
        assert ("Service", workload["metadata"]["name"]) not in objs
    else:
        assert workload["kind"] == "StatefulSet"
        assert workload["spec"]["replicas"] == want.replicas
        # Headless Service of the same name gives pods stable DNS names.
        service = objs[("Service", workload["metadata"]["name"])]
        assert workload["spec"]["serviceName"] == service["metadata"]["name"]
        assert service["spec"]["clusterIP"] == "None"
        assert service["spec"]["selector"] == selector


# --- Containers, images and isolation ----------------------------------------------------


@each_example
def test_superlink_containers_and_images(ex: Example):
    sts = superlink_sts(index(core_objects(ex.config)), ex)
    names = [c["name"] for c in pod_spec(sts)["containers"]]
    if ex.process:
        assert names == ["superlink", "superexec-serverapp"]
        assert container(sts, "superexec-serverapp")["image"] == ex.superexec_image
    else:
        assert names == ["superlink"]
    assert container(sts, "superlink")["image"] == ex.superlink_image


@each_pool
def test_supernode_containers_and_images(ex: Example, pool: str):
    workload = pool_workload(index(core_objects(ex.config)), ex, pool)
    want = ex.pools[pool]
    names = [c["name"] for c in pod_spec(workload)["containers"]]
    if ex.process:
        assert names == ["supernode", "superexec-clientapp"]
        assert container(workload, "superexec-clientapp")["image"] == want.clientapp_image
    else:
        assert names == ["supernode"]
    assert container(workload, "supernode")["image"] == want.image


@each_example
def test_isolation_mode_and_superexec_args(ex: Example):
    objs = index(core_objects(ex.config))
    sts = superlink_sts(objs, ex)
    assert arg_after(container(sts, "superlink")["args"], "--isolation") == ex.isolation
    if ex.process:
        # gRPC era SuperExec: plaintext AppIo API inside the pod.
        assert container(sts, "superexec-serverapp")["args"] == [
            "--insecure",
            "--plugin-type",
            "serverapp",
            "--appio-api-address",
            "127.0.0.1:9091",
            "--health-server-address",
            "0.0.0.0:8082",
        ]
    for pool in ex.pools:
        workload = pool_workload(objs, ex, pool)
        assert arg_after(container(workload, "supernode")["args"], "--isolation") == ex.isolation
        if ex.process:
            assert container(workload, "superexec-clientapp")["args"] == [
                "--insecure",
                "--plugin-type",
                "clientapp",
                "--appio-api-address",
                "127.0.0.1:9094",
                "--health-server-address",
                "0.0.0.0:8082",
            ]


# --- SuperLink: gRPC era, TLS, state -----------------------------------------------------


@each_example
def test_superlink_grpc_era_args_tls_and_state(ex: Example):
    sts = superlink_sts(index(core_objects(ex.config)), ex)
    c = container(sts, "superlink")
    args = c["args"]
    assert arg_after(args, "--fleet-api-address") == "0.0.0.0:9092"
    assert arg_after(args, "--control-api-address") == "0.0.0.0:9093"
    assert arg_after(args, "--serverappio-api-address") == "127.0.0.1:9091"
    # TLS by default (the operator defaults to insecure).
    assert "--insecure" not in args
    assert arg_after(args, "--ssl-ca-certfile") == CA_FILE
    assert arg_after(args, "--ssl-certfile") == "/etc/flower/tls/tls.crt"
    assert arg_after(args, "--ssl-keyfile") == "/etc/flower/tls/tls.key"
    spec = pod_spec(sts)
    assert volume(spec, "tls")["secret"]["secretName"] == f"{ex.name}-superlink-tls"
    assert volume(spec, "ca")["secret"]["secretName"] == f"{ex.name}-ca"
    # State survives restarts: a StatefulSet with a `state` PVC holding the database.
    assert arg_after(args, "--database") == "/var/lib/flower/state.db"
    assert {"name": "state", "mountPath": "/var/lib/flower"} in c["volumeMounts"]
    assert [t["metadata"]["name"] for t in sts["spec"]["volumeClaimTemplates"]] == ["state"]
    assert sts["spec"]["replicas"] == 1


@each_example
def test_superlink_service_exposes_fleet_and_control_never_serverappio(ex: Example):
    objs = index(core_objects(ex.config))
    service = objs[("Service", f"{ex.name}-superlink")]
    assert service["spec"]["type"] == "ClusterIP"
    assert [(p["name"], p["port"]) for p in service["spec"]["ports"]] == [("fleet", 9092), ("control", 9093)]
    # The selector picks the SuperLink pods.
    labels = superlink_sts(objs, ex)["spec"]["template"]["metadata"]["labels"]
    assert service["spec"]["selector"].items() <= labels.items()


@each_pool
def test_supernode_dials_superlink_over_tls(ex: Example, pool: str):
    workload = pool_workload(index(core_objects(ex.config)), ex, pool)
    c = container(workload, "supernode")
    assert arg_after(c["args"], "--superlink") == f"{ex.name}-superlink.{NAMESPACE}.svc.cluster.local:9092"
    assert arg_after(c["args"], "--root-certificates") == CA_FILE
    assert "--insecure" not in c["args"]
    assert {"name": "ca", "mountPath": "/etc/flower/ca", "readOnly": True} in c["volumeMounts"]
    assert volume(pod_spec(workload), "ca")["secret"]["secretName"] == f"{ex.name}-ca"
    # Clients trust the CA only; they never see the server's key.
    assert "tls" not in [v["name"] for v in pod_spec(workload)["volumes"]]


# --- Restricted pods and schema validity ------------------------------------------------------


@each_example
def test_pods_run_restricted(ex: Example):
    objs = index(core_objects(ex.config))
    assert objs[("Namespace", NAMESPACE)]["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "restricted"
    workloads_ = [o for o in objs.values() if o["kind"] in ("StatefulSet", "DaemonSet")]
    assert len(workloads_) == 1 + len(ex.pools)
    for w in workloads_:
        spec = pod_spec(w)
        assert spec["securityContext"]["runAsUser"] == FLOWER_UID
        assert spec["securityContext"]["runAsNonRoot"] is True
        assert spec["automountServiceAccountToken"] is False
        for c in spec["containers"]:
            assert c["securityContext"] == RESTRICTED_CONTAINER_SC, (w["metadata"]["name"], c["name"])
            # Writable paths are emptyDir scratch, since the root filesystem is read-only.
            scratch = volume(spec, f"scratch-{c['name']}")
            assert scratch["emptyDir"] == {}
            assert {m["mountPath"] for m in c["volumeMounts"] if m["name"] == scratch["name"]} >= {"/tmp", "/app/.flwr"}


@each_example
def test_manifests_validate_against_kubernetes(ex: Example):
    objects = core_objects(ex.config)
    assert len(objects) >= 4
    for obj in objects:
        validate(obj)


def test_validator_is_live():
    # Guards the test above: a broken manifest must fail validation.
    broken = copy.deepcopy(core_objects(BY_ID["quick-start"].config)[1])
    broken["spec"]["replicas"] = "one"
    with pytest.raises(kubernetes_validate.ValidationError):
        validate(broken)


# --- Deliberate differences, switched off ---------------------------------------------------


def test_insecure_true_gives_insecure_everywhere():
    config = {**BY_ID["process"].config, "insecure": True}
    objs = index(core_objects(config))
    sts = objs[("StatefulSet", "federation-process-superlink")]
    sn = objs[("StatefulSet", "federation-process-supernode-default")]
    for c in (container(sts, "superlink"), container(sn, "supernode")):
        assert "--insecure" in c["args"]
        assert not [a for a in c["args"] if a.startswith("--ssl-") or a == "--root-certificates"]
    for w in (sts, sn):
        assert not {"tls", "ca"} & {v["name"] for v in pod_spec(w)["volumes"]}


def test_persistence_disabled_drops_state():
    config = copy.deepcopy(BY_ID["quick-start"].config)
    config["superlink"]["persistence"] = {"enabled": False}
    sts = index(core_objects(config))[("StatefulSet", "my-federation-superlink")]
    c = container(sts, "superlink")
    assert "--database" not in c["args"]
    assert "volumeClaimTemplates" not in sts["spec"]
    assert "state" not in [m["name"] for m in c["volumeMounts"]]
    assert arg_after(c["args"], "--fleet-api-address") == "0.0.0.0:9092"


# --- The real Pulumi program, under mocks ------------------------------------------------------


def pulumi_type(manifest: dict) -> str:
    group = "core/v1" if manifest["apiVersion"] == "v1" else manifest["apiVersion"]
    return f"kubernetes:{group}:{manifest['kind']}"


@pytest.mark.parametrize("example", ["quick-start", "process", "multipools", "gpu-mixed-clusters"])
def test_pulumi_program_registers_the_core_manifests(example: str):
    ex = BY_ID[example]
    run = run_program({"flower-federation:federation": copy.deepcopy(ex.config)}, "dev")
    core = core_objects(ex.config)
    manifests, secrets = without_generated(run.manifests())
    assert sorted((pulumi_type(m), m["metadata"]["name"]) for m in manifests) == sorted(
        (pulumi_type(m), m["metadata"]["name"]) for m in core
    )
    # And with exactly the core's content; TLS is on, so the shell adds its Secrets.
    assert index(manifests) == index(core)
    assert {s["metadata"]["name"] for s in secrets} == {f"{ex.name}-superlink-tls", f"{ex.name}-ca"}
