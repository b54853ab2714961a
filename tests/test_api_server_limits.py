"""Every object fits the API server (kube/limits.py, builders/limits.py), checked at render: a consortium
hub of 500 sites x 20 keys renders with every object inside the limits (its keys sharded,
builders/registration.py); a stack that would break a limit is refused by the setting that breaks it, with
nothing registered (each with its negative control just under the limit); adding one key changes exactly
one shard and the Jobs named after the set. Speed is measured in `make bench`, never here."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from flower_federation.builders import registration
from flower_federation.cli.diff_command import resources
from flower_federation.cli.stack_file import StackFile
from flower_federation.kube import limits
from flower_federation.kube.objects import Manifest
from flower_federation.review import changes
from tests.support import hub_scale
from tests.support.importing import render, run
from tests.support.manifests import bound
from tests.support.render import core_objects

CONFIG_KEY = "flower-federation:federation"


@pytest.fixture(scope="module")
def big_hub() -> list[Manifest]:
    return render(hub_scale.hub(500, 20), "hub")


def _refusal(config: dict[str, Any]) -> str:
    with pytest.raises(Exception) as refused:
        run(config, "hub")
    return str(refused.value)


def test_a_hub_of_500_sites_x_20_keys_renders_with_every_object_inside_the_limits(big_hub: list[Manifest]) -> None:
    assert [str(b) for m in big_hub for b in limits.breaches(m)] == []
    shards = [m for m in big_hub if m["kind"] == "ConfigMap" and "-keys-" in m["metadata"]["name"]]
    assert len(shards) == registration.SHARDS
    lines = [line for m in shards for text in m["data"].values() for line in text.splitlines()]
    assert len(lines) == len(set(lines)) == 10_000
    assert max(limits.data_size(m) for m in shards) < registration.SINGLE_BUDGET  # far from 1 MiB each
    main = bound(big_hub, "ConfigMap", "hub-node-registration")
    assert registration.KEYS_FILE not in main["data"]
    # Each ConfigMap bound to its content (issue 32 (d)): a shard's name is its own data's digest.
    assert all(m["immutable"] is True for m in [main, *shards])
    for i in range(registration.SHARDS):
        assert bound(shards, "ConfigMap", f"hub-node-registration-keys-{i:02d}")["metadata"]["name"] == (
            registration.bound_name(f"hub-node-registration-keys-{i:02d}", shards[i]["data"])
        )
    job = next(m for m in big_hub if m["kind"] == "Job" and m["metadata"]["name"].startswith("hub-node-registration-"))
    args = job["spec"]["template"]["spec"]["containers"][0]["args"]
    assert [a.rsplit("/", 1)[-1] for a in args[3:-1]] == [registration.shard_file(i) for i in range(16)]
    (volume,) = [v for v in job["spec"]["template"]["spec"]["volumes"] if "projected" in v]
    names = {s["configMap"]["name"] for s in volume["projected"]["sources"]}
    assert names == {main["metadata"]["name"], *(m["metadata"]["name"] for m in shards)}


def test_a_small_key_set_keeps_one_configmap_as_before() -> None:
    objects = render(hub_scale.hub(3, 2), "hub")
    maps = [m["metadata"]["name"] for m in objects if m["kind"] == "ConfigMap"]
    assert not any("-keys-" in n for n in maps)
    main = bound(objects, "ConfigMap", "hub-node-registration")
    assert len(main["data"][registration.KEYS_FILE].splitlines()) == 6


def _review(old: dict[str, Any], new: dict[str, Any]) -> changes.Review:
    return changes.review(
        resources(StackFile({CONFIG_KEY: old}, "hub"), {}), resources(StackFile({CONFIG_KEY: new}, "hub"), {})
    )


def test_adding_or_removing_one_key_changes_one_shard_and_the_jobs_named_after_the_set() -> None:
    old = hub_scale.hub(60, 50)  # 3,000 keys: sharded
    new = copy.deepcopy(old)
    added = hub_scale.site_keys(1, 1, offset=3_000)[0][0]
    new["sites"][7]["publicKeys"].append(added)
    for a, b, key in ((old, new, added), (new, old, added)):
        review = _review(a, b)
        assert review.changed == ()
        # The one shard's ConfigMap is bound to its content (issue 32 (d)): replaced by a new one (a new name,
        # the same Pulumi name); the Jobs are named after the set: the pair is replaced; nothing else changes.
        shard = f"hub-node-registration-keys-{registration.shard_of(key):02d}"
        for side in (review.added, review.removed):
            assert sorted(r.type for r in side) == ["kubernetes:batch/v1:Job"] * 2 + ["kubernetes:core/v1:ConfigMap"]
            assert [r.name for r in side if r.type == "kubernetes:core/v1:ConfigMap"] == [shard]


def test_too_many_keys_are_refused_by_sites_with_nothing_registered(monkeypatch: pytest.MonkeyPatch) -> None:
    # One shard, so that a few thousand keys reach the limit a hub of ~75,000 would reach with 16.
    monkeypatch.setattr(registration, "SHARDS", 1)
    message = _refusal(hub_scale.hub(50, 100))  # 5,000 keys of ~221 bytes: 1.1 MB in one object
    assert "federation.sites: 5,000 trusted site keys" in message and message.count("trusted site keys") == 1
    assert "the API server refuses more than 1,048,576" in message and "please report" not in message
    run(hub_scale.hub(45, 100), "hub")  # 4,500 keys: just under, renders


def test_huge_annotations_are_refused_by_annotations() -> None:
    big = {f"example.org/a{i}": "x" * 1000 for i in range(270)}  # 270 KB > 256 KiB
    message = _refusal(hub_scale.hub(2, 2, annotations=big))
    assert "federation.annotations: " in message and "262,144" in message
    run(hub_scale.hub(2, 2, annotations=dict(list(big.items())[:250])), "hub")  # 250 KB: under


def test_a_bad_label_is_refused_by_labels() -> None:
    # The config's rules refuse it before any render; the render's check stands behind them for any object.
    message = _refusal(hub_scale.hub(2, 2, labels={"team": "x" * 64}))
    assert "federation.labels.team: " in message and "at most 63" in message
    run(hub_scale.hub(2, 2, labels={"team": "x" * 63}), "hub")
    job: Manifest = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "j", "labels": {"a": "x" * 64, "b/c/d": ""}},
    }
    assert [b.what for b in limits.breaches(job)] == ["labels", "labels"]


def _pool_stack(node_config: dict[str, str]) -> dict[str, Any]:
    return {
        "name": "big",
        "version": "1.41.0",
        "supernodes": {
            "pools": [{"name": "a", "replicas": 1}, {"name": "b", "replicas": 1, "nodeConfig": node_config}]
        },
    }


def test_a_giant_node_config_is_refused_by_that_pools_node_config() -> None:
    giant = {f"k{i}": "v" * 1000 for i in range(1400)}  # 1.4 MB in the SuperNode's args
    with pytest.raises(Exception) as refused:
        core_objects(_pool_stack(giant))
    message = str(refused.value)
    assert "federation.supernodes.pools[1].nodeConfig: StatefulSet" in message and "1,310,720" in message
    assert "please report" not in message
    core_objects(_pool_stack(dict(list(giant.items())[:1000])))  # 1 MB: under the whole-object limit


def test_the_limits_count_as_the_api_server_does() -> None:
    # ValidateConfigMap sums the values' bytes (not the key names); binaryData counts decoded.
    cm: Manifest = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"}, "data": {"k" * 200: "é" * 10}}
    assert limits.data_size(cm) == 20
    cm["binaryData"] = {"b": "AAAA"}
    assert limits.data_size(cm) == 23
    assert limits.qualified_name_problem("example.org/ok") is None
    assert limits.qualified_name_problem("Example.org/ok") and limits.qualified_name_problem("a/b/c")
    assert limits.qualified_name_problem("x" * 64) and limits.qualified_name_problem("x" * 63) is None


def test_a_stack_whose_own_pools_overfill_the_keys_is_refused_once_by_the_pools_replicas() -> None:
    """A million SuperNodes with node authentication: each of the 16 shards and both of its limits break for the one
    cause; one problem, at the pool's replicas (it was 32 at `sites`, which this stack does not have)."""
    raw = {"name": "demo", "nodeAuth": {"enabled": True}, "supernodes": {"pools": [{"name": "cpu", "replicas": 10**6}]}}
    message = _refusal(raw)
    assert message.startswith("invalid flower-federation config (1 problem):"), message
    assert "federation.supernodes.pools[0].replicas: 0 trusted site keys and 1,000,000 of the pools'" in message
    assert "(and 15 more of its ConfigMaps)" in message and "pool 'cpu' has 1,000,000" in message
