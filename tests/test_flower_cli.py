"""Every command line we render is fed, exactly as the kubelet would start it, to the
real argparse parser of the Flower version it is meant for (every version of
requirements-flwr.txt: flwr 1.26.1 for the gRPC era, 1.41.0 and 1.42.0 for the HTTP era, and the next
Flower's nightly, flwr-nightly 1.43.0.dev20261026, for a 1.43 stack), and what Flower parsed is checked
against the manifests: addresses match Services, files are really mounted, node config arrives intact."""

from __future__ import annotations

import itertools

import pytest

from tests.support.flower import GRPC_ERA, HTTP_ERA, NEXT, PROGRAMS, REAL_FLOWERS, FlowerError
from tests.support.kube import container_argv, mounted_files, pod_for, started_containers
from tests.support.manifests import get
from tests.support.render import core_objects, plan_objects, plan_of


def stack(
    version: str,
    isolation: str,
    placement: str = "sidecar",
    insecure: bool = False,
    mode: str = "StatefulSet",
    deps: bool = False,
    persistence: bool = True,
) -> dict:
    process = isolation == "process"
    pools = [
        {
            "name": "alpha",
            "nodeConfig": {
                "partition-id": "{index}",
                "num-partitions": "{replicas}",
                "name": "client_{pool}_{index}",
                "lr": 0.05,
                "eval": True,
                "note": 'it\'s "quoted" $(HOME) `x` \\ end',
                "seven": "7",
            },
        },
        {"name": "beta", "nodeConfig": {"host": "{node}"}},
    ]
    for p in pools:
        if mode == "StatefulSet":
            p["replicas"] = 3 if p["name"] == "alpha" else 1
        if process:
            p["images"] = {"superexecClientApp": f"flwr/superexec:{version}"}
    if mode == "DaemonSet":
        pools[0]["nodeConfig"] = {"name": "client_{node}", "pool": "{pool}"}
    raw = {
        "version": version,
        "mode": mode,
        "isolationMode": isolation,
        "insecure": insecure,
        "allowRuntimeDependencyInstallation": deps,
        "superlink": {"persistence": {"enabled": persistence}},
        "supernodes": {"pools": pools},
    }
    if process:
        raw["superlink"]["superexecImage"] = f"flwr/superexec:{version}"
        raw["superexecPlacement"] = placement
    return raw


CASES = []
# Every real Flower here: each dialect, the newest release and the HTTP-era one before it.
for version, (isolation, placement), insecure in itertools.product(
    REAL_FLOWERS, (("subprocess", "sidecar"), ("process", "sidecar"), ("process", "distributed")), (False, True)
):
    CASES.append(
        pytest.param(
            stack(version, isolation, placement, insecure),
            id=f"{version}-{isolation}-{placement}-{'insecure' if insecure else 'tls'}",
        )
    )
CASES += [
    pytest.param(stack(HTTP_ERA, "subprocess", mode="DaemonSet"), id=f"{HTTP_ERA}-daemonset"),
    pytest.param(stack(GRPC_ERA, "process", mode="DaemonSet"), id=f"{GRPC_ERA}-daemonset-process"),
    pytest.param(
        stack(HTTP_ERA, "process", deps=True, persistence=False), id=f"{HTTP_ERA}-runtime-deps-no-persistence"
    ),
]


@pytest.mark.parametrize("raw", CASES)
def test_real_flower_accepts_every_command_line(raw, flower):
    plan = plan_of(raw, "fed")
    objects = plan_objects(plan)
    cli = flower[raw["version"]]
    services = {o["metadata"]["name"]: o for o in objects if o["kind"] == "Service"}
    started = list(started_containers(objects))
    assert {c["name"] for _, _, c, _ in started} >= {"superlink", "supernode"}

    for workload, pod, c, argv in started:
        parsed = cli.parse(PROGRAMS[c["name"]], argv)
        spec = workload["spec"]["template"]["spec"]
        files = mounted_files(spec, c)
        check = {"superlink": _check_superlink, "supernode": _check_supernode}.get(c["name"], _check_superexec)
        check(plan, parsed, files, workload, pod, c, services)


def _check_files(parsed, files, expected):
    """Each TLS flag names a file the container really mounts, from the right Secret."""
    for attr, (secret, key) in expected.items():
        assert parsed[attr] in files, f"{attr}={parsed[attr]} is not mounted ({sorted(files)})"
        assert files[parsed[attr]] == (secret, key)


def _check_superlink(plan, parsed, files, workload, pod, c, services):
    assert parsed["isolation"] == plan.spec.isolation_mode
    if plan.trust:
        assert parsed["insecure"] is False
        _check_files(
            parsed,
            files,
            {
                "ssl_certfile": (plan.trust.server_secret, "tls.crt"),
                "ssl_keyfile": (plan.trust.server_secret, "tls.key"),
                "ssl_ca_certfile": (plan.trust.ca_secret, "ca.crt"),
            },
        )
    else:  # nothing to mount but, with a SuperExec hop (1.40+, process), its auth secret
        assert parsed["insecure"] is True
        assert set(files) <= {parsed.get("superexec_auth_secret_file")}
    # The ports the SuperLink listens on are the ones its Service targets.
    svc_ports = {p["targetPort"]: p["port"] for p in services[plan.names.superlink]["spec"]["ports"]}
    container_ports = {p["name"]: p["containerPort"] for p in c["ports"]}
    assert {container_ports[name] for name in svc_ports} == set(svc_ports.values())
    if plan.ports.serverappio is None:  # HTTP era
        assert (parsed["host"], parsed["port"]) == ("0.0.0.0", plan.ports.fleet)
    else:
        assert parsed["fleet_api_address"] == f"0.0.0.0:{plan.ports.fleet}"
        assert parsed["control_api_address"] == f"0.0.0.0:{plan.ports.control}"
        bind = "0.0.0.0" if plan.distributed else "127.0.0.1"
        assert parsed["serverappio_api_address"] == f"{bind}:{plan.ports.serverappio}"
        assert "serverappio" not in svc_ports  # plaintext in-pod API never on the public Service
    if plan.spec.superlink.persistence.enabled:
        claims = {t["metadata"]["name"] for t in workload["spec"]["volumeClaimTemplates"]}
        mount = next(m for m in c["volumeMounts"] if m["name"] in claims)
        assert parsed["database"].startswith(mount["mountPath"] + "/")
    else:
        assert parsed["database"] == ":flwr-in-memory:"
    if "runtime_dependency_install" in parsed:
        assert parsed["runtime_dependency_install"] is plan.spec.allow_runtime_dependency_installation


def _check_supernode(plan, parsed, files, workload, pod, c, services):
    assert parsed["superlink"] == plan.fleet_address
    host, port = parsed["superlink"].rsplit(":", 1)
    assert host == plan.service_host(plan.names.superlink)
    assert int(port) in {p["port"] for p in services[plan.names.superlink]["spec"]["ports"]}
    assert parsed["isolation"] == plan.spec.isolation_mode
    if plan.trust:
        assert parsed["insecure"] is False
        _check_files(parsed, files, {"root_certificates": (plan.trust.ca_secret, "ca.crt")})
    else:
        assert parsed["insecure"] is True
    # A SuperNode never mounts the Secret holding the server's private key.
    assert all(secret != getattr(plan.trust, "server_secret", None) for secret, _ in files.values())
    pool = next(p for p in plan.spec.supernodes.pools if plan.names.pool(p.name) == workload["metadata"]["name"])
    if pool.node_config:
        assert parsed["node_config"] is not None
    if "runtime_dependency_install" in parsed:
        assert parsed["runtime_dependency_install"] is plan.spec.allow_runtime_dependency_installation


def _check_superexec(plan, parsed, files, workload, pod, c, services):
    address = parsed.get("runtime_api_address") or parsed.get("appio_api_address")
    host, port = address.rsplit(":", 1)
    if not plan.distributed:
        assert host == "127.0.0.1"  # sidecar: the in-pod API
    elif c["name"] == "superexec-serverapp":
        assert host.split(".")[0] in services
    else:  # replica k dials SuperNode k through the pool's headless Service
        index = pod["labels"]["apps.kubernetes.io/pod-index"]
        pool_workload = workload["spec"]["serviceName"]
        assert host == f"{pool_workload}-{index}.{plan.service_host(pool_workload)}"
    if "plugin_type" in parsed and parsed["plugin_type"] is not None:
        assert parsed["plugin_type"] == c["name"].split("-")[1]
    if parsed.get("root_certificates"):
        _check_files(parsed, files, {"root_certificates": (plan.trust.ca_secret, "ca.crt")})


@pytest.mark.parametrize("version", [GRPC_ERA, HTTP_ERA])
def test_node_config_reaches_each_replica(version, flower):
    """The operator README's partitioning example: replica k of 3 sees partition k."""
    alpha = get(plan_objects(plan_of(stack(version, "subprocess"), "fed")), "StatefulSet", "fed-supernode-alpha")
    seen = []
    for k in range(3):
        pod = pod_for(alpha, k)
        argv = container_argv(alpha["spec"]["template"]["spec"]["containers"][0], pod)
        parsed = flower[version].parse("flower-supernode", argv)
        seen.append(flower[version].node_config(parsed["node_config"]))
    assert [s["partition-id"] for s in seen] == [0, 1, 2]
    assert all(s["num-partitions"] == 3 for s in seen)
    assert [s["name"] for s in seen] == ["client_alpha_0", "client_alpha_1", "client_alpha_2"]
    assert seen[0]["lr"] == 0.05 and seen[0]["eval"] is True and seen[0]["seven"] == "7"
    assert seen[0]["note"] == 'it\'s "quoted" $(HOME) `x` \\ end'


def test_daemonset_node_placeholder_is_the_node_name(flower):
    ds = get(
        plan_objects(plan_of(stack(HTTP_ERA, "subprocess", mode="DaemonSet"), "fed")),
        "DaemonSet",
        "fed-supernode-alpha",
    )
    argv = container_argv(ds["spec"]["template"]["spec"]["containers"][0], pod_for(ds, node="gpu-node-7"))
    parsed = flower[HTTP_ERA].parse("flower-supernode", argv)
    assert flower[HTTP_ERA].node_config(parsed["node_config"]) == {"name": "client_gpu-node-7", "pool": "alpha"}


def test_parsers_reject_the_other_dialect(flower):
    """Negative control: the check can fail. HTTP-era Flower refuses gRPC-era flags and
    gRPC-era Flower refuses HTTP-era ones."""
    grpc_args = core_objects(stack(GRPC_ERA, "subprocess"), "fed")
    http_args = core_objects(stack(HTTP_ERA, "subprocess"), "fed")

    def superlink_argv(objects):
        sts = get(objects, "StatefulSet", "fed-superlink")
        return container_argv(sts["spec"]["template"]["spec"]["containers"][0], pod_for(sts))

    for http_era in (HTTP_ERA, NEXT):
        with pytest.raises(FlowerError, match="serverappio-api-address"):
            flower[http_era].parse("flower-superlink", superlink_argv(grpc_args))
    with pytest.raises(FlowerError, match="--host|--port|unrecognized"):
        flower[GRPC_ERA].parse("flower-superlink", superlink_argv(http_args))
    with pytest.raises(FlowerError):
        flower[GRPC_ERA].parse("flower-superexec", ["--runtime-api-address", "127.0.0.1:9094", "--insecure"])
