"""Pre-releases of Flower (PEP 440 `aN`, `bN`, `rcN`, `.devN`; Flower's nightly images are tagged
`<version>.dev<YYYYMMDD>`, e.g. `1.43.0.dev20261026`): recognised as such, planned as their release (every
gate and rule of it), and named in a warning by validate and the preview. A malformed version or version tag is
refused, never read as the release it starts with."""

from __future__ import annotations

from pathlib import Path

import pytest

from flower_federation.flower.versions import GRPC_HEALTH_UNTIL, VERSION_FORM, VERSION_TAG_FORM, FlowerVersion
from flower_federation.plan.outputs import warnings
from tests.support.validation import assert_valid, cfg, problems
from tests.test_new_user_cli import cli

NIGHTLY = "1.43.0.dev20261026"


@pytest.mark.parametrize(
    "text, pre",
    [
        (NIGHTLY, ".dev20261026"),
        ("1.43.0a1", "a1"),
        ("1.43.0b2", "b2"),
        ("1.43.0rc1", "rc1"),
        ("1.43.0rc1.dev3", "rc1.dev3"),
        ("v1.43.0rc1", "rc1"),
        (f"{NIGHTLY}-py3.13-ubuntu24.04", ".dev20261026"),  # an image tag: a build suffix after `-`
        ("1.43.0", ""),
        ("1.43.0-py3.13-ubuntu24.04", ""),
    ],
)
def test_each_pre_release_form_is_a_pre_release_of_its_release(text, pre):
    v = FlowerVersion.parse(text)
    assert v is not None and v.pre == pre and v.is_prerelease is bool(pre)
    assert v.release == FlowerVersion(1, 43, 0)
    # Gated as the release: the 1.43 nightly has no gRPC health server, as 1.43.0.
    assert v >= GRPC_HEALTH_UNTIL and not v < GRPC_HEALTH_UNTIL
    # ... yet not the release itself: the image-skew warning tells them apart.
    assert (v == FlowerVersion(1, 43, 0)) is not bool(pre)


@pytest.mark.parametrize(
    "text",
    ["1.43.0.dev", "1.43.0rc", "1.43.0.1", "1.43.0-rc1", "1.43.0-dev", "1.42.0-beta", "1.43.0.nightly", "nightly"],
)
def test_malformed_versions_parse_as_none(text):
    assert FlowerVersion.parse(text) is None


def test_a_nightly_version_is_planned_as_its_release_and_named_in_a_warning():
    plan = assert_valid(cfg(version=NIGHTLY))
    assert str(plan.version) == NIGHTLY and plan.dialect.name == "HTTP era"
    assert plan.superlink_image == f"flwr/superlink:{NIGHTLY}"  # the nightly's real image tag
    said = [w for w in warnings(plan) if "pre-release" in w]
    assert said == [
        f"Flower {NIGHTLY} is a pre-release of 1.43.0 (a development build, as Flower's nightlies are): it is "
        "planned as 1.43.0 (its command lines, feature gates and rules), which it may not yet match, and its state "
        "migrations are not final either (keep the backup the state guard takes before it opens the state). Run a "
        "release in production."
    ]
    # Negative control: a release says nothing of the kind.
    assert not [w for w in warnings(assert_valid(cfg(version="1.42.0"))) if "pre-release" in w]


@pytest.mark.parametrize("tag, kind", [("1.43.0rc1", "a release candidate"), ("1.43.0b2", "a beta")])
def test_the_version_from_a_pre_release_image_tag_is_the_pre_release(tag, kind):
    plan = assert_valid(cfg(superlink={"image": f"flwr/superlink:{tag}"}))
    assert str(plan.version) == tag
    assert [w for w in warnings(plan) if w.startswith(f"Flower {tag} is a pre-release of 1.43.0 ({kind})")]


def test_an_image_of_a_pre_release_beside_the_release_is_named_as_one():
    plan = assert_valid(cfg(version="1.43.0", supernodes={"image": f"flwr/supernode:{NIGHTLY}"}))
    said = [w for w in warnings(plan) if "talk across Flower versions" in w]
    assert said and said[0].startswith(
        f"Pool a's SuperNodes run Flower {NIGHTLY} (a pre-release) (flwr/supernode:{NIGHTLY}) in a federation of "
        "Flower 1.43.0"
    )


@pytest.mark.parametrize("version", ["1.43.0.dev", "1.43.0rc", "1.43.0-py3.13", "1.43.0.dev20261026 "])
def test_a_malformed_version_is_refused_quoting_it(version):
    assert problems(cfg(version=version)) == [
        ("federation.version", f"'{version}' is not a Flower version: expected {VERSION_FORM}")
    ]


def test_every_malformed_version_tag_is_refused_at_once_by_its_path():
    raw = cfg(
        version="1.42.0",
        superlink={"image": "flwr/superlink:1.43.0.dev"},
        supernodes={"image": {"repository": "flwr/supernode", "tag": "1.43.0-rc1"}},
    )
    why = "which starts like a Flower version but is not one: a version tag is " + VERSION_TAG_FORM
    assert problems(raw) == [
        ("federation.superlink.image", f"'flwr/superlink:1.43.0.dev' has tag `1.43.0.dev`, {why}"),
        ("federation.supernodes.image.tag", f"'1.43.0-rc1' has tag `1.43.0-rc1`, {why}"),
    ]


def test_validate_prints_the_pre_release_warning(tmp_path: Path):
    stack = tmp_path / "Pulumi.nightly.yaml"
    stack.write_text(
        "config:\n  flower-federation:federation:\n    name: demo\n"
        f"    version: {NIGHTLY}\n    supernodes:\n      pools:\n        - name: a\n          replicas: 1\n"
    )
    code, out, err = cli("validate", "--config-file", str(stack))
    assert code == 0, err
    assert f"Flower {NIGHTLY} (HTTP era)" in out
    assert err.startswith(f"warning: Flower {NIGHTLY} is a pre-release of 1.43.0 (a development build")
