"""Every pod template is finished by one function (builders/pod_pipeline.py `finish_pod`), in one
order, returning new templates: the user's podTemplate sees and may override everything we set,
a GPU limit survives a patch's CPU limit, and the volume pruning sees the patch's mounts."""

from __future__ import annotations

import ast
import copy
from pathlib import Path

from flower_federation.builders import pod_pipeline
from flower_federation.builders.pod_pipeline import PodRecipe, finish_pod
from flower_federation.flower.layout import SUPERNODE
from tests.support.manifests import container, get, pod_spec
from tests.support.render import core_objects, plan_of
from tests.support.stacks import base

BUILD = Path(pod_pipeline.__file__).parent
# The steps of the pipeline: only pod_pipeline.py calls them.
STEPS = {"base_pod_template", "with_gpus", "apply_to_pod", "overlay_pod_template", "keep_used_volumes", "only_nodes"}


def step_calls(source: str) -> set[str]:
    called = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call):
            f = node.func
            name = f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else ""
            if name in STEPS:
                called.add(name)
    return called


def test_only_the_pipeline_calls_its_steps() -> None:
    outside = {
        p.name: calls
        for p in sorted(BUILD.glob("*.py"))
        if p.name != "pod_pipeline.py" and (calls := step_calls(p.read_text(encoding="utf-8")))
    }
    assert outside == {}


def test_the_check_sees_a_builder_finishing_a_pod_itself() -> None:
    # Negative control: a builder that overlaid the user's podTemplate on its own would be found.
    assert step_calls("pod = pods.overlay_pod_template(pod, pool.pod_template)\n") == {"overlay_pod_template"}


def gpu_pool_config() -> dict[str, object]:
    raw = base(
        "1.26.1",
        nodeSelector={"disk": "ssd"},
    )
    pool = raw["supernodes"]["pools"][0]  # type: ignore[index]
    pool["gpu"] = {"enabled": True, "vendor": "nvidia", "count": 1}
    pool["nodeSelector"] = {"zone": "a"}
    pool["volumes"] = [{"name": "data", "emptyDir": {}}, {"name": "unused", "emptyDir": {}}]
    pool["podTemplate"] = {
        "spec": {
            "nodeSelector": {"zone": "b"},
            "containers": [
                {
                    "name": SUPERNODE,
                    "resources": {"limits": {"cpu": "2"}},
                    "volumeMounts": [{"name": "data", "mountPath": "/data"}],
                }
            ],
        }
    }
    return raw


def test_the_users_podtemplate_comes_after_settings_and_gpus_and_before_pruning() -> None:
    objects = core_objects(gpu_pool_config())
    sts = get(objects, "StatefulSet", "sec-supernode-alpha")
    spec = pod_spec(sts)
    # Settings first (federation + pool merged), then the podTemplate, whose scheduling fields are taken as given.
    assert spec["nodeSelector"] == {"zone": "b"}
    without_patch = gpu_pool_config()
    del without_patch["supernodes"]["pools"][0]["podTemplate"]["spec"]["nodeSelector"]  # type: ignore[index]
    assert pod_spec(get(core_objects(without_patch), "StatefulSet", "sec-supernode-alpha"))["nodeSelector"] == {
        "disk": "ssd",
        "zone": "a",
    }
    limits = container(sts, SUPERNODE)["resources"]["limits"]
    assert limits["nvidia.com/gpu"] == 1 and limits["cpu"] == "2"  # the GPU before the patch, kept
    # Pruning after the patch: the volume the patch mounts stays, the one nobody mounts goes.
    names = {v["name"] for v in spec["volumes"]}
    assert "data" in names and "unused" not in names


def test_finishing_a_pod_leaves_the_recipe_alone() -> None:
    plan = plan_of(gpu_pool_config())
    pool = plan.spec.supernodes.pools[0]
    c = {"name": SUPERNODE, "image": "x", "resources": {}, "volumeMounts": []}
    recipe = PodRecipe(
        labels={"a": "b"},
        containers=[c],
        volumes=[{"name": "v", "emptyDir": {}}],
        service_account="sa",
        selector={"a": "b"},
        settings=pool,
        gpus_for=(pool, SUPERNODE),
        user_template=pool.pod_template,
        user_volumes=[{"name": "v", "emptyDir": {}}],
        only_nodes=["n1"],
    )
    before = copy.deepcopy(recipe)
    pod = finish_pod(plan, recipe)
    assert recipe == before
    assert pod["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] == 1
    assert pod["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
