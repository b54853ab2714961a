"""Config validation: every rule reports the exact config path and message, every
problem of a config is reported at once (in a deterministic order), and an invalid config
stops `pulumi preview` / the CLI with that list: no traceback, nothing registered.

Messages of the flower-operator CRD's CEL rules are spelled out literally here (not
imported from `federation.rules`), so a reworded message fails a test.
"""

from __future__ import annotations

import asyncio
import copy
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

import pulumi

from components import offline
from federation.errors import ConfigError, Problem
from federation.plan import load_plan

ROOT = Path(__file__).resolve().parent.parent

PYTHON = ROOT / ".venv" / "bin" / "python"
SUPPORTED = "supported: 1.21-1.34 (gRPC era) or 1.40 - 1.x, not 2.0 (HTTP era)"
DNS_NAME_MSG = "must be a DNS label: lowercase letters, digits and '-', starting with a letter"
POOL_NAME_MSG = "pool names must be DNS labels: lowercase letters, digits and '-'"

# The operator's CEL messages, verbatim.
CEL_NO_POOLS = "spec.supernodes.pools must contain at least one pool"
CEL_DS_REPLICAS = "replicas must not be set for pools when mode is DaemonSet"
CEL_STS_REPLICAS = "replicas must be set (>=1) for every pool when mode is StatefulSet"
CEL_SUPEREXEC_REQUIRED = "spec.superlink.superexecImage is required when isolationMode=process"
CEL_CLIENTAPP_REQUIRED = "spec.supernodes.pools[*].images.superexecClientApp is required when isolationMode=process"
CEL_SUPEREXEC_EMPTY = "spec.superlink.superexecImage must be empty when isolationMode=subprocess"
CEL_CLIENTAPP_EMPTY = "spec.supernodes.pools[*].images.superexecClientApp must be empty when isolationMode=subprocess"
CEL_GPU_VENDOR = "spec.supernodes.pools[*].gpu.vendor is required when gpu.mountAll=true"

SUPEREXEC = "flwr/superexec:1.41.0"


# --- helpers ---------------------------------------------------------------------------


def pool(name: str = "a", **fields: Any) -> dict[str, Any]:
    return {"name": name, **fields}


def sts_pool(name: str = "a", replicas: int = 1, **fields: Any) -> dict[str, Any]:
    return {"name": name, "replicas": replicas, **fields}


def cfg(*pools: dict[str, Any], **top: Any) -> dict[str, Any]:
    """A federation config; with no pools, the minimal valid one-pool StatefulSet."""
    raw: dict[str, Any] = dict(top)
    supernodes = dict(raw.pop("supernodes", {}))
    supernodes["pools"] = list(pools) if pools else [sts_pool()]
    raw["supernodes"] = supernodes
    return raw


def process_cfg(*pools: dict[str, Any], **top: Any) -> dict[str, Any]:
    """Valid process-isolation config: every pool gets a ClientApp SuperExec image."""
    pools = pools or (sts_pool(),)
    pools = tuple({**p, "images": {"superexecClientApp": SUPEREXEC, **p.get("images", {})}} for p in pools)
    superlink = {"superexecImage": SUPEREXEC, **top.pop("superlink", {})}
    return cfg(*pools, isolationMode="process", superlink=superlink, **top)


def problems(raw: Any, stack: str = "dev") -> list[tuple[str, str]]:
    """(path, message) of every problem `load_plan` reports, in its order."""
    with pytest.raises(ConfigError) as info:
        load_plan(raw, stack)
    found = info.value.problems
    assert found, "ConfigError without problems"
    assert all(isinstance(p, Problem) for p in found)
    assert len(set(found)) == len(found), f"a problem is listed twice: {found}"
    return [(p.path, p.message) for p in found]


def assert_valid(raw: Any, stack: str = "dev"):
    try:
        return load_plan(raw, stack)
    except ConfigError as err:  # pragma: no cover - shows the problems on failure
        pytest.fail(f"expected a valid config, got:\n{err}")


def test_minimal_config_is_valid_with_documented_defaults():
    plan = assert_valid({"supernodes": {"pools": [{"name": "a", "replicas": 1}]}})
    assert plan.name == "dev"
    assert plan.spec.mode == "StatefulSet"
    assert plan.spec.isolation_mode == "subprocess"
    assert str(plan.version) == "1.41.0"
    assert plan.dialect.name == "HTTP era"


# --- the operator's CEL rules ------------------------------------------------------------


@pytest.mark.parametrize(
    "raw",
    [
        pytest.param({}, id="no-supernodes"),
        pytest.param({"supernodes": {}}, id="no-pools-key"),
        pytest.param({"supernodes": {"pools": []}}, id="empty-pools"),
    ],
)
def test_cel_at_least_one_pool(raw):
    assert problems(raw) == [("federation.supernodes.pools", CEL_NO_POOLS)]


def test_cel_daemonset_pools_must_not_set_replicas():
    raw = cfg(pool("a"), pool("b", replicas=2), mode="DaemonSet")
    assert problems(raw) == [("federation.supernodes.pools[1].replicas", CEL_DS_REPLICAS)]


def test_daemonset_pools_without_replicas_are_valid():
    assert_valid(cfg(pool("a"), pool("b"), mode="DaemonSet"))


@pytest.mark.parametrize(
    "second",
    [
        pytest.param(pool("b"), id="missing"),
        pytest.param(pool("b", replicas=0), id="zero"),
        pytest.param(pool("b", replicas=-1), id="negative"),
    ],
)
def test_cel_statefulset_pools_need_replicas(second):
    raw = cfg(sts_pool("a"), second)
    assert problems(raw) == [("federation.supernodes.pools[1].replicas", CEL_STS_REPLICAS)]


@pytest.mark.parametrize("replicas", ["0", "-2", 0.0, False], ids=["str-0", "str-neg", "float-0", "false"])
def test_cel_statefulset_replicas_below_one_in_any_spelling_is_rejected(replicas):
    raw = cfg(sts_pool("a"), pool("b", replicas=replicas))
    found = problems(raw)
    assert [path for path, _ in found] == ["federation.supernodes.pools[1].replicas"]


def test_cel_superexec_image_required_for_process_isolation():
    raw = process_cfg()
    del raw["superlink"]["superexecImage"]
    assert problems(raw) == [("federation.superlink.superexecImage", CEL_SUPEREXEC_REQUIRED)]


def test_cel_clientapp_image_required_for_process_isolation():
    raw = process_cfg(sts_pool("a"), sts_pool("b"))
    del raw["supernodes"]["pools"][1]["images"]["superexecClientApp"]
    assert problems(raw) == [("federation.supernodes.pools[1].images.superexecClientApp", CEL_CLIENTAPP_REQUIRED)]


def test_process_isolation_both_images_missing_reports_both():
    raw = cfg(isolationMode="process")
    assert problems(raw) == [
        ("federation.superlink.superexecImage", CEL_SUPEREXEC_REQUIRED),
        ("federation.supernodes.pools[0].images.superexecClientApp", CEL_CLIENTAPP_REQUIRED),
    ]


def test_process_isolation_with_all_images_is_valid():
    plan = assert_valid(process_cfg(sts_pool("a"), sts_pool("b")))
    assert plan.process_isolation


def test_cel_superexec_image_must_be_empty_for_subprocess_isolation():
    raw = cfg(superlink={"superexecImage": SUPEREXEC})
    assert problems(raw) == [("federation.superlink.superexecImage", CEL_SUPEREXEC_EMPTY)]


def test_cel_clientapp_image_must_be_empty_for_subprocess_isolation():
    raw = cfg(sts_pool("a"), sts_pool("b", images={"superexecClientApp": SUPEREXEC}))
    assert problems(raw) == [("federation.supernodes.pools[1].images.superexecClientApp", CEL_CLIENTAPP_EMPTY)]


def test_cel_gpu_vendor_required_with_mount_all():
    raw = cfg(sts_pool("a"), sts_pool("b", gpu={"enabled": True, "mountAll": True}))
    assert problems(raw) == [("federation.supernodes.pools[1].gpu.vendor", CEL_GPU_VENDOR)]


def test_gpu_mount_all_with_vendor_is_valid():
    assert_valid(cfg(sts_pool("a", gpu={"enabled": True, "mountAll": True, "vendor": "nvidia"})))


# --- unknown keys -----------------------------------------------------------------------


@pytest.mark.parametrize(
    "raw, path, suggestion",
    [
        pytest.param(cfg(isolatonMode="process"), "federation.isolatonMode", "isolationMode", id="top-level-typo"),
        pytest.param(cfg(isolation_mode="subprocess"), "federation.isolation_mode", "isolationMode", id="snake-case"),
        pytest.param(cfg(create_namespace=False), "federation.create_namespace", "createNamespace", id="snake-case-2"),
        pytest.param(cfg(superlink={"service": {"ports": {"htp": 8000}}}),
                     "federation.superlink.service.ports.htp", "http", id="nested-model"),
        pytest.param(cfg(sts_pool("a", gpu={"mountall": False})),
                     "federation.supernodes.pools[0].gpu.mountall", "mountAll", id="in-list-item"),
        pytest.param(cfg(sts_pool("a", images={"superexecClientapp": None})),
                     "federation.supernodes.pools[0].images.superexecClientapp", "superexecClientApp", id="case"),
    ],
)
def test_unknown_key_suggests_nearest_valid_name(raw, path, suggestion):
    key = path.rsplit(".", 1)[1]
    assert problems(raw) == [(path, f"unknown key '{key}'; did you mean '{suggestion}'?")]


def test_unknown_pool_key_is_reported_alongside_the_rule_it_breaks():
    # `replica` is not `replicas`: the pool really has no replicas, and both are said.
    raw = cfg(pool("a", replica=2))
    assert problems(raw) == [
        ("federation.supernodes.pools[0].replica", "unknown key 'replica'; did you mean 'replicas'?"),
        ("federation.supernodes.pools[0].replicas", CEL_STS_REPLICAS),
    ]


def test_unknown_key_without_close_match_lists_valid_keys():
    [(path, message)] = problems(cfg(zzz=1))
    assert path == "federation.zzz"
    assert message.startswith("unknown key 'zzz'; valid keys: ")
    listed = message.split("valid keys: ", 1)[1].split(", ")
    assert listed == sorted(listed)
    assert {"isolationMode", "supernodes", "superlink", "version", "mode"} <= set(listed)
    assert "isolation_mode" not in listed


@pytest.mark.parametrize(
    "raw, expected",
    [
        pytest.param(None, ("federation", "missing: set the flower-federation:federation config key"), id="missing"),
        pytest.param([1], ("federation", "must be a mapping, not list"), id="list"),
        pytest.param("x", ("federation", "must be a mapping, not str"), id="str"),
        pytest.param(cfg(sts_pool("a"), "oops"), ("federation.supernodes.pools[1]", "must be a mapping"), id="pool"),
    ],
)
def test_not_a_mapping(raw, expected):
    assert problems(raw) == [expected]


# --- names --------------------------------------------------------------------------------


def test_duplicate_pool_name_reported_at_the_second():
    raw = cfg(sts_pool("a"), sts_pool("b"), sts_pool("a"))
    assert problems(raw) == [
        ("federation.supernodes.pools[2].name", "duplicate pool name 'a' (also supernodes.pools[0])"),
    ]


@pytest.mark.parametrize("name", ["Pool", "a_b", "a.b", "-a", "a-", "", "gpu pool"])
def test_pool_name_must_be_dns_label(name):
    assert problems(cfg(sts_pool(name))) == [("federation.supernodes.pools[0].name", POOL_NAME_MSG)]


def test_at_most_16_pools():
    sixteen = [sts_pool(f"p{i}") for i in range(16)]
    assert_valid(cfg(*sixteen))
    seventeen = sixteen + [sts_pool("p16")]
    assert problems(cfg(*seventeen)) == [("federation.supernodes.pools", "at most 16 pools are allowed, got 17")]


@pytest.mark.parametrize("name", ["1abc", "Demo", "a_b", "a-", "a.b", ""])
def test_federation_name_must_be_dns_1035_label(name):
    assert problems(cfg(name=name)) == [("federation.name", f"name {DNS_NAME_MSG}")]


def test_default_name_is_the_stack_name():
    assert assert_valid(cfg(), stack="prod-eu").name == "prod-eu"


def test_invalid_stack_name_is_reported_when_it_is_the_default_name():
    assert problems(cfg(), stack="Prod_EU") == [
        ("federation.name", f"stack name 'Prod_EU' (the default for name) {DNS_NAME_MSG}"),
    ]
    # An explicit name makes the stack name irrelevant.
    assert assert_valid(cfg(name="prod"), stack="Prod_EU").name == "prod"


def test_namespace_must_be_dns_label():
    assert problems(cfg(namespace="Flower_NS")) == [
        ("federation.namespace", "must be a DNS label of at most 63 characters"),
    ]


STS_LIMIT = "a StatefulSet name may have at most 52 (Kubernetes adds a revision hash to it)"


def test_federation_name_length_limits():
    # Pool "a" in StatefulSet mode: `<name>-supernode-a` (name + 12) may have 52 characters.
    assert_valid(cfg(name="f" * 40))
    name = "f" * 43
    assert problems(cfg(name=name)) == [
        ("federation.name", f"object name '{name}-superlink' has 53 characters; {STS_LIMIT}"),
        ("federation.supernodes.pools[0].name", f"object name '{name}-supernode-a' has 55 characters; {STS_LIMIT}"),
    ]


def test_federation_name_not_limited_by_objects_that_are_not_rendered():
    # The ServerAppIo Service and ServerApp SuperExec Deployment exist only for distributed
    # SuperExec. DaemonSet pool "a": `<name>-supernode-a` has 54 <= 63; `<name>-superlink` 52.
    assert_valid(cfg(pool("a"), name="f" * 42, mode="DaemonSet"))


def test_distributed_superexec_object_names_are_checked_too():
    name = "f" * 44
    raw = process_cfg(name=name, version="1.26.1", superexecPlacement="distributed")
    raw["superlink"]["superexecImage"] = "flwr/superexec:1.26.1"
    raw["supernodes"]["pools"][0]["images"]["superexecClientApp"] = "flwr/superexec:1.26.1"
    assert problems(raw) == [
        ("federation.name", f"object name '{name}-superexec-serverapp' has 64 characters; a Deployment name may have at most 63"),
        ("federation.name", f"object name '{name}-superlink' has 54 characters; {STS_LIMIT}"),
        ("federation.name", f"object name '{name}-superlink-serverappio' has 66 characters; a Service name may have at most 63"),
        ("federation.supernodes.pools[0].name", f"object name '{name}-superexec-a' has 56 characters; {STS_LIMIT}"),
        ("federation.supernodes.pools[0].name", f"object name '{name}-supernode-a' has 56 characters; {STS_LIMIT}"),
    ]


def test_long_pool_name_fails_in_statefulset_mode():
    # Stack "dev": `dev-supernode-<pool>` is 14 + len(pool) characters.
    assert_valid(cfg(sts_pool("p" * 38)))
    pname = "p" * 39
    assert problems(cfg(sts_pool(pname))) == [
        ("federation.supernodes.pools[0].name", f"object name 'dev-supernode-{pname}' has 53 characters; {STS_LIMIT}"),
    ]


def test_same_pool_name_passes_in_daemonset_mode_up_to_63():
    assert_valid(cfg(pool("p" * 39), mode="DaemonSet"))
    assert_valid(cfg(pool("p" * 49), mode="DaemonSet"))
    pname = "p" * 50
    assert problems(cfg(pool(pname), mode="DaemonSet")) == [
        ("federation.supernodes.pools[0].name",
         f"object name 'dev-supernode-{pname}' has 64 characters; a DaemonSet name may have at most 63"),
    ]


# --- nodeConfig ------------------------------------------------------------------------------


def test_index_and_replicas_placeholders_only_in_statefulset_mode():
    node_config = {"i": "{index}", "r": "of-{replicas}", "p": "{pool}", "n": "{node}"}
    assert_valid(cfg(sts_pool("a", nodeConfig=node_config)))
    raw = cfg(pool("a", nodeConfig=node_config), mode="DaemonSet")
    assert problems(raw) == [
        ("federation.supernodes.pools[0].nodeConfig.i", "{index} is only available when mode is StatefulSet"),
        ("federation.supernodes.pools[0].nodeConfig.r", "{replicas} is only available when mode is StatefulSet"),
    ]


@pytest.mark.parametrize(
    "value, kind",
    [([1, 2], "list"), (None, "null"), ({"a": 1}, "dict")],
    ids=["list", "null", "dict"],
)
def test_node_config_value_types(value, kind):
    raw = cfg(sts_pool("a", nodeConfig={"ok": "x", "bad": value}))
    assert problems(raw) == [
        ("federation.supernodes.pools[0].nodeConfig.bad", f"must be a string, integer, float or boolean, not {kind}"),
    ]


def test_node_config_integer_out_of_toml_range():
    raw = cfg(sts_pool("a", nodeConfig={"big": 2**63}))
    assert problems(raw) == [("federation.supernodes.pools[0].nodeConfig.big", "integer out of TOML's 64-bit range")]


def test_node_config_scalars_are_valid():
    assert_valid(cfg(sts_pool("a", nodeConfig={"s": "x y", "i": -3, "f": 0.5, "b": True, "k_e-y9": 2**63 - 1})))


@pytest.mark.parametrize("key", ["a b", "a.b", "a=b", "ä"])
def test_node_config_bad_keys(key):
    raw = cfg(sts_pool("a", nodeConfig={key: 1}))
    assert problems(raw) == [
        (f'federation.supernodes.pools[0].nodeConfig["{key}"]', "keys may only hold letters, digits, '_' and '-'"),
    ]


# --- versions ----------------------------------------------------------------------------------


@pytest.mark.parametrize("version", ["1.20.0", "1.19.3", "1.35.0", "1.37.0", "1.39.9", "0.9"])
def test_unsupported_version_names_supported_ranges(version):
    shown = version if version.count(".") == 2 else version + ".0"
    assert problems(cfg(version=version)) == [("federation.version", f"Flower {shown} is not supported; {SUPPORTED}")]


@pytest.mark.parametrize(
    "version, dialect",
    [("1.21.0", "gRPC era"), ("1.26.1", "gRPC era"), ("1.34.5", "gRPC era"),
     ("1.40.0", "HTTP era"), ("1.41.0", "HTTP era")],
)
def test_supported_versions_and_their_dialects(version, dialect):
    plan = assert_valid(cfg(version=version))
    assert str(plan.version) == version
    assert plan.dialect.name == dialect
    assert plan.superlink_image == f"flwr/superlink:{version}"


def test_default_version_is_1_41_0():
    plan = assert_valid(cfg())
    assert str(plan.version) == "1.41.0"
    assert plan.superlink_image == "flwr/superlink:1.41.0"
    assert plan.supernode_image(plan.spec.supernodes.pools[0]) == "flwr/supernode:1.41.0"


@pytest.mark.parametrize(
    "image",
    [
        "flwr/superlink:1.26.1",
        "registry.example.com:5000/flwr/superlink:1.26.1",
        "flwr/superlink:1.26.1@sha256:" + "0" * 64,
        "flwr/superlink:1.26.1-py3.11-ubuntu24.04",
    ],
)
def test_version_from_superlink_image_tag(image):
    plan = assert_valid(cfg(superlink={"image": image}))
    assert str(plan.version) == "1.26.1"
    assert plan.dialect.name == "gRPC era"


def test_superlink_image_without_version_tag_uses_the_default():
    plan = assert_valid(cfg(superlink={"image": "registry.example.com:5000/flwr/superlink"}))
    assert str(plan.version) == "1.41.0"


def test_unsupported_superlink_image_tag_reported_at_the_image():
    assert problems(cfg(superlink={"image": "flwr/superlink:1.37.0"})) == [
        ("federation.superlink.image", f"Flower 1.37.0 is not supported; {SUPPORTED}"),
    ]


def _dialect_mismatch(tag: str, version: str, dialect: str) -> str:
    return (f"image tag {tag} speaks a different Flower dialect than this federation's version "
            f"{version} ({dialect}); {SUPPORTED}")


def test_version_wins_over_superlink_image_and_mismatch_is_reported():
    raw = cfg(version="1.41.0", superlink={"image": "flwr/superlink:1.26.1"})
    assert problems(raw) == [("federation.superlink.image", _dialect_mismatch("1.26.1", "1.41.0", "HTTP era"))]


def test_pool_image_in_another_dialect():
    raw = cfg(sts_pool("a"), sts_pool("b", images={"supernode": "flwr/supernode:1.26.1"}))
    assert problems(raw) == [
        ("federation.supernodes.pools[1].images.supernode", _dialect_mismatch("1.26.1", "1.41.0", "HTTP era")),
    ]


def test_supernodes_image_in_another_dialect_of_a_grpc_federation():
    raw = cfg(version="1.26.1", supernodes={"image": "flwr/supernode:1.41.0"})
    assert problems(raw) == [("federation.supernodes.image", _dialect_mismatch("1.41.0", "1.26.1", "gRPC era"))]


def test_superexec_images_in_another_dialect():
    raw = process_cfg(superlink={"superexecImage": "flwr/superexec:1.26.1"})
    raw["supernodes"]["pools"][0]["images"]["superexecClientApp"] = "flwr/superexec:1.26.1"
    mismatch = _dialect_mismatch("1.26.1", "1.41.0", "HTTP era")
    assert problems(raw) == [
        ("federation.superlink.superexecImage", mismatch),
        ("federation.supernodes.pools[0].images.superexecClientApp", mismatch),
    ]


def test_same_dialect_other_patch_images_are_valid():
    assert_valid(cfg(version="1.41.0", superlink={"image": "flwr/superlink:1.40.0"},
                     supernodes={"image": "flwr/supernode:1.42.1"}))


def test_version_that_is_not_a_version():
    assert problems(cfg(version="abc")) == [("federation.version", "'abc' is not a Flower version (expected X.Y.Z)")]


def test_version_as_yaml_float_is_a_type_error():
    # `version: 1.41` in YAML is a float; only strings are versions, and the error says how to fix it.
    assert problems(cfg(version=1.41)) == [
        ("federation.version", 'must be a string; quote it in YAML, e.g. version: "1.41.0"'),
    ]


# --- ports -------------------------------------------------------------------------------------

HTTP_HINT = ("not used by the HTTP era: Flower 1.40+ serves Fleet, Control and Runtime on one port: "
             "set superlink.service.ports.http")
GRPC_HINT = ("not used by the gRPC era: superlink.service.ports.http is for Flower 1.40+; "
             "use grpc (Fleet), extra (Control), serverAppIO")


@pytest.mark.parametrize("key", ["grpc", "extra", "serverAppIO"])
def test_grpc_port_keys_rejected_in_http_era(key):
    raw = cfg(superlink={"service": {"ports": {key: 9000}}})
    assert problems(raw) == [(f"federation.superlink.service.ports.{key}", HTTP_HINT)]


def test_http_port_rejected_in_grpc_era():
    raw = cfg(version="1.26.1", superlink={"service": {"ports": {"http": 8080}}})
    assert problems(raw) == [("federation.superlink.service.ports.http", GRPC_HINT)]


def test_era_ports_are_accepted_in_their_era():
    plan = assert_valid(cfg(version="1.26.1", superlink={"service": {"ports": {"grpc": 9100, "extra": 9101, "serverAppIO": 9102}}}))
    assert (plan.ports.fleet, plan.ports.control, plan.ports.serverappio) == (9100, 9101, 9102)
    plan = assert_valid(cfg(superlink={"service": {"ports": {"http": 8443}}}))
    assert (plan.ports.fleet, plan.ports.control, plan.ports.serverappio) == (8443, 8443, None)


@pytest.mark.parametrize(
    "ports, used",
    [
        ({"grpc": 9093}, [9093, 9093, 9091]),  # collides with the default Control port
        ({"serverAppIO": 9092}, [9092, 9093, 9092]),
        ({"grpc": 9000, "extra": 9000, "serverAppIO": 9000}, [9000, 9000, 9000]),
    ],
)
def test_duplicate_ports_rejected(ports, used):
    raw = cfg(version="1.26.1", superlink={"service": {"ports": ports}})
    assert problems(raw) == [("federation.superlink.service.ports", f"ports must be distinct, got {used}")]


@pytest.mark.parametrize("port, message", [(0, "Input should be greater than or equal to 1"),
                                           (65536, "Input should be less than or equal to 65535")])
def test_port_range(port, message):
    assert problems(cfg(superlink={"service": {"ports": {"http": port}}})) == [
        ("federation.superlink.service.ports.http", message),
    ]


def test_boolean_port_is_rejected():
    found = problems(cfg(superlink={"service": {"ports": {"http": True}}}))
    assert [p for p, _ in found] == ["federation.superlink.service.ports.http"]


# --- superexecPlacement / runtime dependencies --------------------------------------------


def test_distributed_placement_needs_process_isolation():
    assert problems(cfg(superexecPlacement="distributed")) == [
        ("federation.superexecPlacement", "distributed SuperExec needs isolationMode=process"),
    ]


def test_distributed_placement_needs_statefulset_mode():
    raw = process_cfg(pool("a"), superexecPlacement="distributed", mode="DaemonSet")
    assert problems(raw) == [
        ("federation.superexecPlacement",
         "distributed SuperExec pairs SuperExec replica k with SuperNode k, which needs mode=StatefulSet"),
    ]


def test_distributed_placement_in_subprocess_daemonset_reports_both():
    raw = cfg(pool("a"), superexecPlacement="distributed", mode="DaemonSet")
    assert [m for _, m in problems(raw)] == [
        "distributed SuperExec needs isolationMode=process",
        "distributed SuperExec pairs SuperExec replica k with SuperNode k, which needs mode=StatefulSet",
    ]


def test_distributed_placement_with_process_isolation_and_statefulsets_is_valid():
    assert assert_valid(process_cfg(superexecPlacement="distributed")).distributed


@pytest.mark.parametrize("version", ["1.21.0", "1.26.1", "1.28.9"])
def test_runtime_dependency_installation_rejected_before_flower_1_29(version):
    raw = cfg(version=version, allowRuntimeDependencyInstallation=True)
    assert problems(raw) == [
        ("federation.allowRuntimeDependencyInstallation",
         f"runtime dependency installation needs Flower 1.29.0 or later; this federation runs {version}"),
    ]
    assert_valid(cfg(version=version, allowRuntimeDependencyInstallation=False))


@pytest.mark.parametrize("version", ["1.29.0", "1.34.0", "1.40.0", "1.41.0"])
def test_runtime_dependency_installation_allowed_from_flower_1_29(version):
    plan = assert_valid(cfg(version=version, allowRuntimeDependencyInstallation=True))
    assert plan.spec.allow_runtime_dependency_installation is True


# --- Kubernetes fragments ------------------------------------------------------------------


def _not_a_field(name: str) -> str:
    return f"not a Kubernetes field here: Additional properties are not allowed ('{name}' was unexpected)"


def test_pod_template_typo_superlink():
    raw = cfg(superlink={"podTemplate": {"spec": {"nodeSelectr": {"pool": "gpu"}}}})
    assert problems(raw) == [("federation.superlink.podTemplate.spec", _not_a_field("nodeSelectr"))]


def test_pod_template_typo_pool():
    raw = cfg(sts_pool("a"), sts_pool("b", podTemplate={"spec": {"tolerations": [{"key": "gpu", "efect": "NoSchedule"}]}}))
    assert problems(raw) == [
        ("federation.supernodes.pools[1].podTemplate.spec.tolerations[0]", _not_a_field("efect")),
    ]


def test_pod_template_valid_patch_is_accepted():
    assert_valid(cfg(superlink={"podTemplate": {
        "metadata": {"labels": {"team": "ml"}, "annotations": {"a": "b"}},
        "spec": {"nodeSelector": {"pool": "cpu"}, "tolerations": [{"key": "k", "effect": "NoSchedule"}],
                 "containers": [{"name": "superlink", "env": [{"name": "X", "value": "1"}]},
                                {"name": "sidecar", "image": "busybox", "args": ["sleep", "inf"]}]},
    }}))


@pytest.mark.parametrize(
    "where, raw",
    [
        ("federation.superlink.env[0]", cfg(superlink={"env": [{"value": "x"}]})),
        ("federation.supernodes.env[1]", cfg(supernodes={"env": [{"name": "A", "value": "1"}, {"value": "x"}]})),
        ("federation.supernodes.pools[0].env[0]", cfg(sts_pool("a", env=[{"value": "x"}]))),
    ],
)
def test_env_entry_without_name(where, raw):
    assert problems(raw) == [(where, "'name' is a required property")]


def test_env_value_from_typo():
    raw = cfg(superlink={"env": [{"name": "A", "valueFrom": {"secretKeyRef": {"name": "s", "kee": "k"}}}]})
    assert problems(raw) == [
        ("federation.superlink.env[0].valueFrom.secretKeyRef", "'key' is a required property"),
        ("federation.superlink.env[0].valueFrom.secretKeyRef", _not_a_field("kee")),
    ]


def test_bad_resources():
    raw = cfg(superlink={"resources": {"request": {"cpu": "1"}, "limits": {"cpu": "2 cores"}}})
    assert problems(raw) == [
        ("federation.superlink.resources", _not_a_field("request")),
        ("federation.superlink.resources.limits.cpu", "'2 cores' is not a Kubernetes quantity (e.g. 500m, 2, 1Gi)"),
    ]


def test_resource_quantity_of_wrong_type():
    raw = cfg(superlink={"resources": {"limits": {"cpu": [1]}}})
    found = problems(raw)
    assert {p for p, _ in found} == {"federation.superlink.resources.limits.cpu"}
    assert "[1] is not of type 'string', 'null'" in [m for _, m in found]


@pytest.mark.parametrize("key", ["supernodeResources", "superexecResources"])
def test_bad_pool_resources(key):
    raw = cfg(sts_pool("a", **{key: {"limts": {"cpu": "1"}}}))
    assert problems(raw) == [(f"federation.supernodes.pools[0].{key}", _not_a_field("limts"))]


def test_resources_in_usual_yaml_spellings_are_valid():
    assert_valid(cfg(sts_pool("a", supernodeResources={
        "requests": {"cpu": "500m", "memory": "1Gi"},
        "limits": {"cpu": 2, "memory": 1073741824, "nvidia.com/gpu": 1, "ephemeral-storage": "1.5e3"},
    })))


@pytest.mark.parametrize("quantity", ["2 cores", "1x", "-", "1.5.0", "Gi", "1.5e3M"])
@pytest.mark.parametrize("section", ["limits", "requests"])
def test_invalid_resource_quantity_is_reported(section, quantity):
    raw = cfg(sts_pool("a", supernodeResources={section: {"cpu": quantity}}))
    assert problems(raw) == [
        (f"federation.supernodes.pools[0].supernodeResources.{section}.cpu",
         f"'{quantity}' is not a Kubernetes quantity (e.g. 500m, 2, 1Gi)"),
    ]


@pytest.mark.parametrize("size", ["1 GB", "lots"])
def test_invalid_persistence_size_is_reported(size):
    assert problems(cfg(superlink={"persistence": {"size": size}})) == [
        ("federation.superlink.persistence.size", f"'{size}' is not a Kubernetes quantity (e.g. 1Gi)"),
    ]


@pytest.mark.parametrize("env_name", ["FLOWER_POD_INDEX", "FLOWER_NODE_NAME", "FLOWER_SUPERNODE_HOST"])
@pytest.mark.parametrize(
    "section, make",
    [
        ("federation.superlink.env", lambda env: cfg(superlink={"env": env})),
        ("federation.supernodes.env", lambda env: cfg(supernodes={"env": env})),
        ("federation.supernodes.pools[0].env", lambda env: cfg(sts_pool("a", env=env))),
    ],
    ids=["superlink", "supernodes", "pool"],
)
def test_reserved_env_names(section, make, env_name):
    raw = make([{"name": "OK", "value": "1"}, {"name": env_name, "value": "3"}])
    assert problems(raw) == [
        (f"{section}[1].name", f"{env_name} is set by flower-federation (node config placeholders)"),
    ]


@pytest.mark.parametrize("key", ["volumeMounts", "superexecVolumeMounts"])
def test_volume_mount_of_unknown_volume(key):
    raw = cfg(sts_pool("a", volumes=[{"name": "data", "emptyDir": {}}],
                       **{key: [{"name": "data", "mountPath": "/data"}, {"name": "dataa", "mountPath": "/d2"}]}))
    assert problems(raw) == [
        (f"federation.supernodes.pools[0].{key}[1].name", "no volume named 'dataa' in volumes or volumeClaimTemplates"),
    ]


def test_superlink_volume_mount_of_unknown_volume():
    raw = cfg(superlink={"volumeMounts": [{"name": "models", "mountPath": "/models"}]})
    assert problems(raw) == [
        ("federation.superlink.volumeMounts[0].name", "no volume named 'models' in volumes or volumeClaimTemplates"),
    ]


def test_volume_mounts_of_declared_volumes_are_valid():
    claim = {"metadata": {"name": "claim"},
             "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}}
    assert_valid(cfg(sts_pool(
        "a",
        volumes=[{"name": "vol", "emptyDir": {}}],
        volumeClaimTemplates=[claim],
        podTemplate={"spec": {"volumes": [{"name": "tpl", "emptyDir": {}}]}},
        volumeMounts=[{"name": "vol", "mountPath": "/v"}, {"name": "claim", "mountPath": "/c"},
                      {"name": "tpl", "mountPath": "/t"}],
    )))


def test_volume_claim_templates_rejected_in_daemonset_mode():
    claim = {"metadata": {"name": "data"},
             "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}}
    raw = cfg(pool("a", volumeClaimTemplates=[claim], volumeMounts=[{"name": "data", "mountPath": "/data"}]),
              mode="DaemonSet")
    assert problems(raw) == [
        ("federation.supernodes.pools[0].volumeClaimTemplates",
         "volumeClaimTemplates need mode=StatefulSet (a DaemonSet has no per-pod claims)"),
    ]
    assert_valid(cfg(sts_pool("a", volumeClaimTemplates=[claim], volumeMounts=[{"name": "data", "mountPath": "/data"}])))


def test_reserved_volume_name_and_mount_path():
    raw = cfg(sts_pool("a", volumes=[{"name": "state", "emptyDir": {}}, {"name": "d", "emptyDir": {}}],
                       volumeMounts=[{"name": "d", "mountPath": "/tmp"}]))
    assert problems(raw) == [
        ("federation.supernodes.pools[0].volumeMounts[0].mountPath", "/tmp is mounted by flower-federation"),
        ("federation.supernodes.pools[0].volumes[0].name", "volume name 'state' is used by flower-federation"),
    ]


@pytest.mark.parametrize("field, hint", [("args", "extraArgs"), ("command", "extraArgs"), ("image", "images")])
def test_pod_template_cannot_override_managed_container(field, hint):
    container = {"name": "supernode", field: ["x"] if field != "image" else "evil/supernode:1"}
    raw = cfg(sts_pool("a", podTemplate={"spec": {"containers": [container]}}))
    assert problems(raw) == [
        (f"federation.supernodes.pools[0].podTemplate.spec.containers[0].{field}",
         f"the supernode container's {field} is managed; use {hint} instead"),
    ]


def test_superlink_pod_template_cannot_override_superlink_args():
    raw = cfg(superlink={"podTemplate": {"spec": {"containers": [{"name": "sidecar"}, {"name": "superlink", "args": ["--insecure"]}]}}})
    assert problems(raw) == [
        ("federation.superlink.podTemplate.spec.containers[1].args",
         "the superlink container's args is managed; use extraArgs instead"),
    ]


@pytest.mark.parametrize("label", ["app.kubernetes.io/instance", "app.kubernetes.io/component", "flower.flwr.ai/pool"])
def test_pod_template_labels_cannot_override_selector_labels(label):
    raw = cfg(sts_pool("a", podTemplate={"metadata": {"labels": {"team": "ml", label: "other"}}}))
    assert problems(raw) == [
        (f'federation.supernodes.pools[0].podTemplate.metadata.labels["{label}"]',
         "selector labels are set by flower-federation"),
    ]


def test_superlink_pod_template_instance_label():
    raw = cfg(superlink={"podTemplate": {"metadata": {"labels": {"app.kubernetes.io/instance": "x"}}}})
    assert problems(raw) == [
        ('federation.superlink.podTemplate.metadata.labels["app.kubernetes.io/instance"]',
         "selector labels are set by flower-federation"),
    ]


# --- every problem, once, in a deterministic order ----------------------------------------------

MANY_PROBLEMS = {
    "namespace": "Flower_NS",
    "isolatonMode": "process",
    "superlink": {"podTemplate": {"spec": {"nodeSelectr": {}}}, "env": [{"name": "FLOWER_POD_INDEX"}]},
    "supernodes": {"pools": [
        {"name": "a"},
        {"name": "a", "replicas": "many"},
        {"name": "c", "replicas": 1, "nodeConfig": {"a b": 1, "x": None}},
    ]},
    "version": "1.41.0",
    "superexecPlacement": "distributed",
}
MANY_EXPECTED = [
    ("federation.isolatonMode", "unknown key 'isolatonMode'; did you mean 'isolationMode'?"),
    ("federation.namespace", "must be a DNS label of at most 63 characters"),
    ("federation.superexecPlacement", "distributed SuperExec needs isolationMode=process"),
    ("federation.superlink.env[0].name", "FLOWER_POD_INDEX is set by flower-federation (node config placeholders)"),
    ("federation.superlink.podTemplate.spec", _not_a_field("nodeSelectr")),
    ("federation.supernodes.pools[0].replicas", CEL_STS_REPLICAS),
    ("federation.supernodes.pools[1].name", "duplicate pool name 'a' (also supernodes.pools[0])"),
    ("federation.supernodes.pools[1].replicas", "Input should be a valid integer"),
    # Sorted by path: `.x` sorts before `["a b"]`.
    ("federation.supernodes.pools[2].nodeConfig.x", "must be a string, integer, float or boolean, not null"),
    ('federation.supernodes.pools[2].nodeConfig["a b"]', "keys may only hold letters, digits, '_' and '-'"),
]


def _reversed_keys(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _reversed_keys(value[k]) for k in reversed(list(value))}
    if isinstance(value, list):
        return [_reversed_keys(v) for v in value]
    return value


def test_all_problems_reported_together_each_once():
    assert problems(copy.deepcopy(MANY_PROBLEMS)) == MANY_EXPECTED


def test_problem_order_does_not_depend_on_key_order():
    assert problems(_reversed_keys(copy.deepcopy(MANY_PROBLEMS))) == MANY_EXPECTED


def test_error_text_lists_every_problem_once():
    with pytest.raises(ConfigError) as info:
        load_plan(copy.deepcopy(MANY_PROBLEMS), "dev")
    lines = str(info.value).splitlines()
    assert lines[0] == f"invalid flower-federation config ({len(MANY_EXPECTED)} problems):"
    assert lines[1:] == [f"  - {path}: {message}" for path, message in MANY_EXPECTED]


def test_single_problem_header_is_singular():
    with pytest.raises(ConfigError) as info:
        load_plan({"supernodes": {"pools": []}}, "dev")
    assert str(info.value) == f"invalid flower-federation config (1 problem):\n  - federation.supernodes.pools: {CEL_NO_POOLS}"


def test_problems_in_natural_pool_order():
    pools = [sts_pool(f"p{i}") for i in range(12)]
    pools[10] = pool("p10")
    pools[2] = pool("p2")
    assert problems(cfg(*pools)) == [
        ("federation.supernodes.pools[2].replicas", CEL_STS_REPLICAS),
        ("federation.supernodes.pools[10].replicas", CEL_STS_REPLICAS),
    ]


def test_type_error_does_not_hide_cel_rule_elsewhere():
    raw = cfg(pool("a", replicas="many"), isolationMode="process")
    assert problems(raw) == [
        ("federation.superlink.superexecImage", CEL_SUPEREXEC_REQUIRED),
        ("federation.supernodes.pools[0].images.superexecClientApp", CEL_CLIENTAPP_REQUIRED),
        ("federation.supernodes.pools[0].replicas", "Input should be a valid integer"),
    ]


def test_config_error_deduplicates_problems():
    p = Problem("federation.mode", "x")
    q = Problem("federation.name", "y")
    assert ConfigError([p, q, p]).problems == [p, q]


# --- the Pulumi program: RunError, no traceback, nothing registered ---------------------------


@pytest.fixture
def runs(monkeypatch) -> list[offline.Run]:
    """Every `Run` the offline runner creates, so a failed run can be inspected too."""
    created: list[offline.Run] = []

    class SpyRun(offline.Run):
        def __init__(self):
            super().__init__()
            created.append(self)

    monkeypatch.setattr(offline, "Run", SpyRun)
    return created


def test_valid_config_registers_resources(runs):
    # Proves the spy sees registrations, so the empty list below means something.
    result = offline.run_program({"flower-federation:federation": cfg()}, "dev")
    assert runs == [result]
    assert result.kubernetes, "a valid config registers Kubernetes objects"


def test_invalid_config_raises_run_error_and_registers_nothing(runs):
    with pytest.raises(pulumi.RunError) as info:
        offline.run_program({"flower-federation:federation": copy.deepcopy(MANY_PROBLEMS)}, "dev")
    message = str(info.value)
    for path, msg in MANY_EXPECTED:
        assert message.count(f"  - {path}: {msg}") == 1
    assert message.startswith(f"invalid flower-federation config ({len(MANY_EXPECTED)} problems):")
    assert "Traceback" not in message
    assert len(runs) == 1
    assert runs[0].registrations == []
    assert runs[0].outputs == {}


def test_missing_config_raises_run_error(runs):
    with pytest.raises(pulumi.RunError) as info:
        offline.run_program({}, "dev")
    assert str(info.value) == (
        "invalid flower-federation config (1 problem):\n"
        "  - federation: missing: set the flower-federation:federation config key"
    )
    assert runs[0].registrations == []


def test_invalid_stack_name_reaches_the_program(runs):
    with pytest.raises(pulumi.RunError) as info:
        offline.run_program({"flower-federation:federation": cfg()}, "Prod_EU")
    assert f"federation.name: stack name 'Prod_EU' (the default for name) {DNS_NAME_MSG}" in str(info.value)
    assert runs[0].registrations == []


def test_run_program_closes_every_event_loop_it_creates(monkeypatch):
    created: list[asyncio.AbstractEventLoop] = []
    real_new_event_loop = asyncio.new_event_loop

    def tracking_new_event_loop():
        loop = real_new_event_loop()
        created.append(loop)
        return loop

    monkeypatch.setattr(asyncio, "new_event_loop", tracking_new_event_loop)
    offline.run_program({"flower-federation:federation": cfg()}, "dev")
    left_open = [loop for loop in created if not loop.is_closed()]
    for loop in left_open:  # don't leave them for the garbage collector
        loop.close()
    assert created, "the offline runner creates at least its own loop"
    assert left_open == []


# --- CLI -----------------------------------------------------------------------------------------


def _write_stack(tmp_path: Path, federation: Any, filename: str = "stack.yaml") -> Path:
    path = tmp_path / filename
    path.write_text(yaml.safe_dump({"config": {"flower-federation:federation": federation}}, sort_keys=False))
    return path


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(PYTHON), "-m", "federation", *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=300)


@pytest.mark.parametrize("command", ["validate", "render"])
def test_cli_invalid_config_exits_1_with_problems_on_stderr(tmp_path, command):
    path = _write_stack(tmp_path, MANY_PROBLEMS)
    result = _cli(command, "--config-file", str(path))
    assert result.returncode == 1
    assert result.stdout == ""
    assert "Traceback" not in result.stderr
    with pytest.raises(ConfigError) as info:
        load_plan(copy.deepcopy(MANY_PROBLEMS), "dev")
    assert result.stderr == str(info.value) + "\n"


def test_cli_validate_valid_config(tmp_path):
    path = _write_stack(tmp_path, cfg(name="demo", namespace="flower-dev"))
    result = _cli("validate", "--config-file", str(path))
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""
    assert result.stdout == ("ok: federation 'demo' in namespace 'flower-dev', Flower 1.41.0 (HTTP era), "
                             "StatefulSet pools: a\n")


def test_cli_render_valid_config(tmp_path):
    path = _write_stack(tmp_path, cfg(name="demo"))
    result = _cli("render", "--config-file", str(path))
    assert result.returncode == 0, result.stderr
    # No assertion on a clean stderr here: see test_run_program_closes_every_event_loop_it_creates.
    docs = [d for d in yaml.safe_load_all(result.stdout) if d]
    kinds = {d["kind"] for d in docs}
    assert {"StatefulSet", "Service"} <= kinds
    assert "demo-supernode-a" in {d["metadata"]["name"] for d in docs}


def test_cli_stack_name_from_file_name_is_the_default_name(tmp_path):
    path = _write_stack(tmp_path, cfg(), filename="Pulumi.Prod_EU.yaml")
    result = _cli("validate", "--config-file", str(path))
    assert result.returncode == 1
    assert result.stdout == ""
    assert result.stderr == (
        "invalid flower-federation config (1 problem):\n"
        f"  - federation.name: stack name 'Prod_EU' (the default for name) {DNS_NAME_MSG}\n"
    )


def test_cli_missing_file_is_a_usage_error(tmp_path):
    result = _cli("validate", "--config-file", str(tmp_path / "nope.yaml"))
    assert result.returncode == 2
    assert result.stdout == ""
    assert result.stderr.startswith("error: no such stack settings file:")


def test_cli_root_certificates_must_be_absolute_from_flwr_1_26():
    # Real flwr 1.26+ refuses a relative root-certificates path in config.toml.
    assert problems(cfg(cli={"rootCertificates": "ca.crt"})) == [
        ("federation.cli.rootCertificates", "flwr 1.41.0 needs an absolute path here"),
    ]
    # Before 1.26 the path sits in the app's pyproject.toml, where relative paths work.
    assert load_plan(cfg(version="1.25.0", cli={"rootCertificates": "ca.crt"}), "dev").version.minor == 25
