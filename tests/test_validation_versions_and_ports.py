"""Validation of versions and what follows from them: supported Flower versions (from
`version` or the SuperLink image's tag) and images of one dialect, ports valid for the
dialect and distinct, distributed SuperExec placement, runtime dependency installation
(Flower 1.29+), and the CLI's root-certificates path (absolute from flwr 1.26)."""

from __future__ import annotations

import pytest

from flower_federation.flower.versions import DEFAULT_VERSION, VERSION_FORM
from flower_federation.plan import load_plan
from tests.support.validation import SUPPORTED, assert_valid, cfg, pool, problems, process_cfg, sts_pool


@pytest.mark.parametrize("version", ["1.20.0", "1.19.3", "1.35.0", "1.37.0", "1.39.9", "0.9"])
def test_unsupported_version_names_supported_ranges(version):
    shown = version if version.count(".") == 2 else version + ".0"
    assert problems(cfg(version=version)) == [("federation.version", f"Flower {shown} is not supported; {SUPPORTED}")]


@pytest.mark.parametrize(
    "version, dialect",
    [
        ("1.21.0", "gRPC era"),
        ("1.26.1", "gRPC era"),
        ("1.34.5", "gRPC era"),
        ("1.40.0", "HTTP era"),
        ("1.41.0", "HTTP era"),
    ],
)
def test_supported_versions_and_their_dialects(version, dialect):
    plan = assert_valid(cfg(version=version))
    assert str(plan.version) == version
    assert plan.dialect.name == dialect
    assert plan.superlink_image == f"flwr/superlink:{version}"


def test_default_version_is_the_newest_release():
    plan = assert_valid(cfg())
    assert str(plan.version) == DEFAULT_VERSION == "1.42.0"
    assert plan.superlink_image == f"flwr/superlink:{DEFAULT_VERSION}"
    assert plan.supernode_image(plan.spec.supernodes.pools[0]) == f"flwr/supernode:{DEFAULT_VERSION}"


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


def test_superlink_image_without_version_tag_is_refused_as_check_fails_it():
    """An untagged image was taken for the default version (048b1d8) while `check`'s mandatory flower-images-pinned
    fails it: validate now gives check's verdict."""
    image = "registry.example.com:5000/flwr/superlink"
    ((path, message),) = problems(cfg(superlink={"image": image}))
    assert path == "federation.superlink.image" and message.startswith(f"'{image}' has no tag: it pulls `latest`")
    plan = assert_valid(cfg(superlink={"image": image + "@sha256:" + "ab" * 32}, version=DEFAULT_VERSION))
    assert str(plan.version) == DEFAULT_VERSION


def test_unsupported_superlink_image_tag_reported_at_the_image():
    assert problems(cfg(superlink={"image": "flwr/superlink:1.37.0"})) == [
        ("federation.superlink.image", f"Flower 1.37.0 is not supported; {SUPPORTED}"),
    ]


def _dialect_mismatch(tag: str, version: str, dialect: str) -> str:
    return (
        f"image tag {tag} speaks a different Flower dialect than this federation's version "
        f"{version} ({dialect}); {SUPPORTED}"
    )


def test_version_wins_over_superlink_image_and_mismatch_is_reported():
    raw = cfg(version="1.41.0", superlink={"image": "flwr/superlink:1.26.1"})
    assert problems(raw) == [("federation.superlink.image", _dialect_mismatch("1.26.1", "1.41.0", "HTTP era"))]


def test_pool_image_in_another_dialect():
    raw = cfg(sts_pool("a"), sts_pool("b", images={"supernode": "flwr/supernode:1.26.1"}))
    assert problems(raw) == [
        ("federation.supernodes.pools[1].images.supernode", _dialect_mismatch("1.26.1", DEFAULT_VERSION, "HTTP era")),
    ]


def test_supernodes_image_in_another_dialect_of_a_grpc_federation():
    raw = cfg(version="1.26.1", supernodes={"image": "flwr/supernode:1.41.0"})
    assert problems(raw) == [("federation.supernodes.image", _dialect_mismatch("1.41.0", "1.26.1", "gRPC era"))]


def test_superexec_images_in_another_dialect():
    raw = process_cfg(superlink={"superexecImage": "flwr/superexec:1.26.1"})
    raw["supernodes"]["pools"][0]["images"]["superexecClientApp"] = "flwr/superexec:1.26.1"
    mismatch = _dialect_mismatch("1.26.1", DEFAULT_VERSION, "HTTP era")
    assert problems(raw) == [
        ("federation.superlink.superexecImage", mismatch),
        ("federation.supernodes.pools[0].images.superexecClientApp", mismatch),
    ]


def test_same_dialect_other_patch_images_are_valid():
    assert_valid(
        cfg(
            version="1.41.0",
            superlink={"image": "flwr/superlink:1.40.0"},
            supernodes={"image": "flwr/supernode:1.42.1"},
        )
    )


def test_version_that_is_not_a_version():
    assert problems(cfg(version="abc")) == [
        ("federation.version", f"'abc' is not a Flower version: expected {VERSION_FORM}")
    ]


def test_version_as_yaml_float_is_a_type_error():
    # `version: 1.41` in YAML is a float; only strings are versions, and the error says how to fix it.
    assert problems(cfg(version=1.41)) == [
        ("federation.version", 'must be a string; quote it in YAML, e.g. version: "1.41.0"'),
    ]


# --- ports -------------------------------------------------------------------------------------


HTTP_HINT = (
    "not used by the HTTP era: Flower 1.40+ serves Fleet, Control and Runtime on one port: "
    "set superlink.service.ports.http"
)
GRPC_HINT = (
    "not used by the gRPC era: superlink.service.ports.http is for Flower 1.40+; "
    "use grpc (Fleet), extra (Control), serverAppIO"
)


@pytest.mark.parametrize("key", ["grpc", "extra", "serverAppIO"])
def test_grpc_port_keys_rejected_in_http_era(key):
    raw = cfg(superlink={"service": {"ports": {key: 9000}}})
    assert problems(raw) == [(f"federation.superlink.service.ports.{key}", HTTP_HINT)]


def test_http_port_rejected_in_grpc_era():
    raw = cfg(version="1.26.1", superlink={"service": {"ports": {"http": 8080}}})
    assert problems(raw) == [("federation.superlink.service.ports.http", GRPC_HINT)]


def test_era_ports_are_accepted_in_their_era():
    plan = assert_valid(
        cfg(version="1.26.1", superlink={"service": {"ports": {"grpc": 9100, "extra": 9101, "serverAppIO": 9102}}})
    )
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


@pytest.mark.parametrize(
    "port, message",
    [
        (0, "Input should be greater than or equal to 1, not 0"),
        (65536, "Input should be less than or equal to 65535, not 65536"),
    ],
)
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
        (
            "federation.superexecPlacement",
            "distributed SuperExec pairs SuperExec replica k with SuperNode k, which needs mode=StatefulSet",
        ),
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
        (
            "federation.allowRuntimeDependencyInstallation",
            f"runtime dependency installation needs Flower 1.29.0 or later; this federation runs {version}",
        ),
    ]
    assert_valid(cfg(version=version, allowRuntimeDependencyInstallation=False))


@pytest.mark.parametrize("version", ["1.29.0", "1.34.0", "1.40.0", "1.41.0"])
def test_runtime_dependency_installation_allowed_from_flower_1_29(version):
    plan = assert_valid(cfg(version=version, allowRuntimeDependencyInstallation=True))
    assert plan.spec.allow_runtime_dependency_installation is True


def test_cli_root_certificates_must_be_absolute_from_flwr_1_26():
    # Real flwr 1.26+ refuses a relative root-certificates path in config.toml.
    assert problems(cfg(cli={"rootCertificates": "ca.crt"})) == [
        ("federation.cli.rootCertificates", f"'ca.crt': flwr {DEFAULT_VERSION} needs an absolute path here"),
    ]
    # Before 1.26 the path sits in the app's pyproject.toml, where relative paths work.
    assert load_plan(cfg(version="1.25.0", cli={"rootCertificates": "ca.crt"}), "dev").version.minor == 25
