"""Validation, the operator's rules: every CEL rule of the flower-operator CRD with its
message verbatim at its config path, unknown keys with the nearest valid name, and
values that are not mappings. A minimal config is valid, with the documented defaults."""

from __future__ import annotations

import pytest

from flower_federation.flower.versions import DEFAULT_VERSION
from flower_federation.kube.goyaml import load_stack_file
from tests.support.validation import (
    CEL_CLIENTAPP_EMPTY,
    CEL_CLIENTAPP_REQUIRED,
    CEL_DS_REPLICAS,
    CEL_GPU_VENDOR,
    CEL_NO_POOLS,
    CEL_STS_REPLICAS,
    CEL_SUPEREXEC_EMPTY,
    CEL_SUPEREXEC_REQUIRED,
    SUPEREXEC,
    assert_valid,
    cfg,
    pool,
    problems,
    process_cfg,
    sts_pool,
)


def test_minimal_config_is_valid_with_documented_defaults():
    plan = assert_valid({"supernodes": {"pools": [{"name": "a", "replicas": 1}]}})
    assert plan.name == "dev"
    assert plan.spec.mode == "StatefulSet"
    assert plan.spec.isolation_mode == "subprocess"
    assert str(plan.version) == DEFAULT_VERSION
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
    "second, given",
    [
        pytest.param(pool("b"), "", id="missing"),
        pytest.param(pool("b", replicas=0), ", not 0", id="zero"),
        pytest.param(pool("b", replicas=-1), ", not -1", id="negative"),
    ],
)
def test_cel_statefulset_pools_need_replicas(second, given):
    # The operator's words, then the value given: -1 was refused without saying it was -1.
    raw = cfg(sts_pool("a"), second)
    assert problems(raw) == [("federation.supernodes.pools[1].replicas", CEL_STS_REPLICAS + given)]


def test_replicas_beyond_64_bits_say_why_they_read_as_a_float():
    # go-yaml (Pulumi's reader, and ours) reads 99999999999999999999999 as the float 1e+23: that is what the
    # program is given, so the message says why it reads so unlike what was written.
    raw = load_stack_file("replicas: 99999999999999999999999\n")["replicas"]
    assert raw == 1e23 and isinstance(raw, float)
    assert problems(cfg(pool("a", replicas=raw))) == [
        (
            "federation.supernodes.pools[0].replicas",
            "Input should be a valid integer, not 1e+23 (a whole number beyond 64 bits, which Pulumi reads as a float)",
        )
    ]


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
        pytest.param(
            cfg(superlink={"service": {"ports": {"htp": 8000}}}),
            "federation.superlink.service.ports.htp",
            "http",
            id="nested-model",
        ),
        pytest.param(
            cfg(sts_pool("a", gpu={"mountall": False})),
            "federation.supernodes.pools[0].gpu.mountall",
            "mountAll",
            id="in-list-item",
        ),
        pytest.param(
            cfg(sts_pool("a", images={"superexecClientapp": None})),
            "federation.supernodes.pools[0].images.superexecClientapp",
            "superexecClientApp",
            id="case",
        ),
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
        pytest.param(
            cfg(sts_pool("a"), "oops"), ("federation.supernodes.pools[1]", "must be a mapping, not 'oops'"), id="pool"
        ),
    ],
)
def test_not_a_mapping(raw, expected):
    assert problems(raw) == [expected]
