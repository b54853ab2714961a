"""Images as the Helm chart gives them (registry, repository, tag, digest, pullPolicy; docs/helm-parameters.md),
the federation's pull policy and pull secrets: rendered where each container and pod runs, the Flower version read
from a tag and never guessed from a digest, bad parts reported by path."""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from flower_federation.flower.versions import DEFAULT_VERSION
from tests.support.certificates import ca_pem
from tests.support.manifests import by_kind, get, pod_spec, workloads
from tests.support.render import core_objects, plan_of
from tests.support.validation import assert_valid, cfg, problems, process_cfg, sts_pool

DIGEST = "sha256:" + "ab" * 32
REGISTRY = "registry.example.org:5000"
PEM = ca_pem()
UNKNOWN_VERSION = (
    "pinned by a digest without a version tag, so the Flower version (the dialect of every command line) is unknown: "
    "set `version`, or give the tag too"
)


def image(repository: str, **parts: Any) -> dict[str, Any]:
    return {"registry": REGISTRY, "repository": repository, **parts}


def _distributed(**top: Any) -> dict[str, Any]:
    pool = sts_pool(
        "a",
        2,
        images={
            "supernode": image("flwr/supernode", tag="1.41.0", digest=DIGEST, pullPolicy="Always"),
            "superexecClientApp": image("flwr/superexec", tag="1.41.0-py3.11-ubuntu24.04"),
        },
    )
    raw = process_cfg(
        pool,
        superlink={
            "image": image("flwr/superlink", tag="1.41.0", pullPolicy="Never"),
            "superexecImage": image("flwr/superexec", digest=DIGEST),
        },
        nodeAuth={"enabled": True},
        executor={"type": "kubernetes"},
        **top,
    )
    raw["superexecPlacement"] = "distributed"
    return raw


def _containers(objects: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {c["name"]: c for w in workloads(objects) for c in pod_spec(w)["containers"]}


def test_image_parts_render_as_one_reference_with_their_pull_policy(k8s_validate):
    objects = core_objects(_distributed(imagePullPolicy="Always"))
    containers = _containers(objects)
    assert containers["superlink"]["image"] == f"{REGISTRY}/flwr/superlink:1.41.0"
    assert containers["superlink"]["imagePullPolicy"] == "Never"
    # The registration Job runs the SuperLink's image, so it pulls it the same way.
    assert containers["node-registration"]["image"] == f"{REGISTRY}/flwr/superlink:1.41.0"
    assert containers["node-registration"]["imagePullPolicy"] == "Never"
    assert containers["supernode"]["image"] == f"{REGISTRY}/flwr/supernode:1.41.0@{DIGEST}"
    assert containers["supernode"]["imagePullPolicy"] == "Always"
    # A digest alone pins the image; the federation's pull policy applies where the image sets none.
    assert containers["superexec-serverapp"]["image"] == f"{REGISTRY}/flwr/superexec@{DIGEST}"
    assert containers["superexec-serverapp"]["imagePullPolicy"] == "Always"
    assert containers["superexec-clientapp"]["image"] == f"{REGISTRY}/flwr/superexec:1.41.0-py3.11-ubuntu24.04"
    for o in objects:
        k8s_validate(o)


def test_task_pods_run_the_superexecs_image_or_their_own_with_its_pull_policy():
    objects = core_objects(_distributed())
    configs = {
        o["metadata"]["name"]: yaml.safe_load(o["data"]["executor.yaml"])
        for o in by_kind(objects, "ConfigMap")
        if "executor.yaml" in o["data"]
    }
    assert configs["dev-superexec-serverapp-executor"]["image"] == f"{REGISTRY}/flwr/superexec@{DIGEST}"
    assert configs["dev-superexec-a-executor"]["image"] == f"{REGISTRY}/flwr/superexec:1.41.0-py3.11-ubuntu24.04"
    assert {c["image-pull-policy"] for c in configs.values()} == {"IfNotPresent"}
    raw = _distributed()
    raw["executor"]["image"] = image("acme/tasks", tag="1.41.0", pullPolicy="Always")
    objects = core_objects(raw)
    for o in by_kind(objects, "ConfigMap"):
        if "executor.yaml" in o["data"]:
            config = yaml.safe_load(o["data"]["executor.yaml"])
            assert config["image"] == f"{REGISTRY}/acme/tasks:1.41.0" and config["image-pull-policy"] == "Always"


def test_default_pull_policy_is_if_not_present_and_strings_still_work():
    objects = core_objects(cfg(superlink={"image": "flwr/superlink:1.41.0"}))
    containers = _containers(objects)
    assert containers["superlink"]["image"] == "flwr/superlink:1.41.0"
    assert {c["imagePullPolicy"] for c in containers.values()} == {"IfNotPresent"}


@pytest.mark.parametrize(
    "where, raw",
    [
        ("superlink", {"superlink": {"image": image("flwr/superlink", tag="1.26.1", digest=DIGEST)}}),
        ("supernodes", {"supernodes": {"image": {"repository": "flwr/supernode", "tag": "1.26.1-py3.11"}}}),
    ],
)
def test_the_version_comes_from_the_tag_even_next_to_a_digest(where, raw):
    plan = plan_of({**raw, "supernodes": {**raw.get("supernodes", {}), "pools": [sts_pool()]}})
    assert str(plan.version) == "1.26.1" and plan.dialect.name == "gRPC era"
    if where == "supernodes":  # no SuperLink image: the SuperLink runs the SuperNodes' version
        assert plan.superlink_image == "flwr/superlink:1.26.1"


def test_a_site_reads_its_version_from_the_supernode_image_tag():
    raw = {
        "role": "site",
        "supernodes": {
            "image": {"registry": "registry.hub.docker.com", "repository": "flwr/supernode", "tag": "1.26.1"},
            "superlink": {"address": "fl.example.org", "certificate": {"pem": PEM}},
            "pools": [sts_pool()],
        },
    }
    plan = assert_valid(raw)
    assert str(plan.version) == "1.26.1"
    assert plan.supernode_image(plan.spec.supernodes.pools[0]) == "registry.hub.docker.com/flwr/supernode:1.26.1"


@pytest.mark.parametrize(
    "at, value",
    [
        ("superlink.image", image("flwr/superlink", digest=DIGEST)),
        ("superlink.image", f"flwr/superlink@{DIGEST}"),
        ("supernodes.image", image("flwr/supernode", digest=DIGEST)),
    ],
)
def test_a_digest_without_a_tag_never_guesses_the_version(at, value):
    section, key = at.split(".")
    raw = cfg()
    raw.setdefault(section, {})[key] = value
    assert problems(raw) == [(f"federation.{at}", UNKNOWN_VERSION)]
    raw["version"] = "1.26.1"
    plan = assert_valid(raw)
    assert str(plan.version) == "1.26.1"


def test_an_image_that_does_not_decide_the_version_may_be_pinned_by_digest_alone():
    raw = cfg(sts_pool("a", images={"supernode": image("flwr/supernode", digest=DIGEST)}))
    plan = assert_valid(raw)
    assert str(plan.version) == DEFAULT_VERSION
    assert plan.supernode_image(plan.spec.supernodes.pools[0]) == f"{REGISTRY}/flwr/supernode@{DIGEST}"


def test_a_tag_of_another_dialect_is_refused_in_parts_too():
    raw = cfg(sts_pool("a", images={"supernode": image("flwr/supernode", tag="1.26.1", digest=DIGEST)}))
    assert problems(raw) == [
        (
            "federation.supernodes.pools[0].images.supernode",
            "image tag 1.26.1 speaks a different Flower dialect than this federation's version "
            f"{DEFAULT_VERSION} (HTTP era); supported: 1.21-1.34 (gRPC era) or 1.40 - 1.x, not 2.0 (HTTP era)",
        )
    ]


def test_bad_parts_are_reported_each_at_its_path():
    raw = cfg(
        sts_pool("a", images={"supernode": {"repository": "flwr/supernode"}}),
        superlink={
            "image": {
                "registry": "https://registry.example.org",
                "repository": "Flwr/SuperLink",
                "tag": ".1",
                "digest": "sha256:123",
                "pullPolicy": "Sometimes",
            }
        },
        supernodes={"image": 7},
        executor={"image": {"repository": "acme/tasks", "tag": "1.41.0", "pull": "Always"}},
    )
    assert problems(raw) == [
        ("federation.executor.image", "only used with executor.type: kubernetes"),
        (
            "federation.executor.image.pull",
            "unknown key 'pull'; valid keys: digest, pullPolicy, registry, repository, tag",
        ),
        (
            "federation.superlink.image",
            UNKNOWN_VERSION,
        ),
        (
            "federation.superlink.image.digest",
            "'sha256:123' is not valid here: a digest is `sha256:` and 64 lowercase hex digits (or `sha512:` and 128)",
        ),
        (
            "federation.superlink.image.pullPolicy",
            "Input should be 'Always', 'IfNotPresent' or 'Never', not 'Sometimes'",
        ),
        (
            "federation.superlink.image.registry",
            "'https://registry.example.org' is not valid here: a registry is a host name or IP, with an optional "
            "`:port` (no scheme, no path)",
        ),
        (
            "federation.superlink.image.repository",
            "'Flwr/SuperLink' is not valid here: a repository is lowercase path components (`flwr/supernode`), no "
            "tag or digest",
        ),
        (
            "federation.superlink.image.tag",
            "'.1' is not valid here: a tag is up to 128 letters, digits, '_', '.' or '-', not starting with '.' or '-'",
        ),
        (
            "federation.supernodes.image",
            "must be an image reference (a string) or a mapping (registry, repository, tag, digest, pullPolicy), not 7",
        ),
        (
            "federation.supernodes.pools[0].images.supernode",
            "give a tag or a digest: without either the image is `latest`, which moves under a running federation",
        ),
    ]


def test_pull_secrets_reach_every_pod_a_component_replaces_them(k8s_validate):
    raw = _distributed(imagePullSecrets=["regcred", "mirror"])
    raw["supernodes"]["pools"][0]["imagePullSecrets"] = ["pool-cred"]
    raw["superlink"]["imagePullSecrets"] = []
    objects = core_objects(raw)
    secrets = {w["metadata"]["name"]: pod_spec(w).get("imagePullSecrets") for w in workloads(objects)}
    assert secrets.pop("dev-supernode-a") == [{"name": "pool-cred"}]
    assert secrets.pop("dev-superlink") is None  # an empty list clears the federation's
    assert all(v == [{"name": "regcred"}, {"name": "mirror"}] for v in secrets.values()), secrets
    # Task pods: Flower's executor config takes no pull secrets; their ServiceAccount carries them.
    task_sa = get(objects, "ServiceAccount", "dev-taskexecutor")
    assert task_sa["imagePullSecrets"] == [{"name": "regcred"}, {"name": "mirror"}]
    for o in objects:
        k8s_validate(o)


def test_pull_secret_names_are_checked():
    raw = cfg(sts_pool("a", imagePullSecrets=["Reg_Cred"]), imagePullSecrets=["ok", "-bad"])
    assert problems(raw) == [
        ("federation.imagePullSecrets[1]", "'-bad' is not a Secret name (a lowercase DNS subdomain)"),
        (
            "federation.supernodes.pools[0].imagePullSecrets[0]",
            "'Reg_Cred' is not a Secret name (a lowercase DNS subdomain)",
        ),
    ]
