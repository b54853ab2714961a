"""`podTemplate` through the `render` command (the real program, and so `pulumi up`), not only the pure core.

Regression: with TLS on (the default) a podTemplate used to crash the render with a traceback, because the
pod template already held the certificate checksum (a Pulumi Output) when `pods.overlay_pod_template`
deep-copied it. The core now works on plain data only and the shell adds the checksum at registration."""

from __future__ import annotations

import contextlib
import io
from pathlib import Path
from typing import Any

import pytest
import yaml

from flower_federation.cli.main import main

POD_TEMPLATE = {"spec": {"nodeSelector": {"disk": "ssd"}}}
# A patch of the distributed SuperExec's container and a new container, both mounting volume "both".
MOUNTING_BOTH = [
    {"name": "superexec-clientapp", "volumeMounts": [{"name": "both", "mountPath": "/b"}]},
    {"name": "sidecar", "image": "busybox:1.36", "volumeMounts": [{"name": "both", "mountPath": "/b"}]},
]


def render(tmp_path: Path, federation: dict[str, Any]) -> tuple[int, str]:
    stack = tmp_path / "Pulumi.pt.yaml"
    stack.write_text(yaml.safe_dump({"config": {"flower-federation:federation": federation}}))
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main(["render", "--config-file", str(stack)])
        except Exception as exc:  # the bug surfaces as an exception, not an exit code
            return 1, repr(exc)
    return code, err.getvalue()


def federation(insecure: bool, where: str) -> dict[str, Any]:
    pool: dict[str, Any] = {"name": "a", "replicas": 1}
    raw: dict[str, Any] = {"name": "pt", "insecure": insecure, "supernodes": {"pools": [pool]}}
    if where == "pool":
        pool["podTemplate"] = POD_TEMPLATE
    else:
        raw["superlink"] = {"podTemplate": POD_TEMPLATE}
    return raw


@pytest.mark.parametrize("where", ["pool", "superlink"])
def test_pod_template_renders_with_tls(tmp_path: Path, where: str) -> None:
    code, err = render(tmp_path, federation(False, where))
    assert code == 0, err


@pytest.mark.parametrize("where", ["pool", "superlink"])
def test_pod_template_renders_without_tls(tmp_path: Path, where: str) -> None:
    # Control: without TLS there is no Output on the template, and the same podTemplate renders.
    code, err = render(tmp_path, federation(True, where))
    assert code == 0, err


def test_a_pools_container_patches_go_to_the_pods_that_run_each_container() -> None:
    # Found by the config fuzzer: with distributed SuperExecs a pool's podTemplate reaches two
    # pods, and a patch of `supernode` added a container without an image to the SuperExec's.
    from flower_federation.cli.offline import run_program
    from tests.support.schema import validate
    from tests.support.stacks import base

    env = [{"name": "PATCHED", "value": "1"}]
    patch = {
        "spec": {
            "containers": [
                {"name": "supernode", "env": env},
                {"name": "superexec-clientapp", "env": env},
                {"name": "sidecar", "image": "busybox:1.36"},
            ]
        }
    }
    raw = base(isolation="process", placement="distributed")
    raw["supernodes"]["pools"][0]["podTemplate"] = patch
    objects = run_program({"federation": raw}, "dev").manifests()
    pods = {
        o["metadata"]["name"]: o["spec"]["template"]["spec"]["containers"]
        for o in objects
        if o["kind"] == "StatefulSet"
    }
    assert [c["name"] for c in pods["sec-supernode-alpha"]] == ["supernode", "sidecar"]
    assert [c["name"] for c in pods["sec-superexec-alpha"]] == ["superexec-clientapp", "sidecar"]
    for name in ("sec-supernode-alpha", "sec-superexec-alpha"):
        assert {"name": "PATCHED", "value": "1"} in pods[name][0]["env"]
    assert all("PATCHED" not in str(c.get("env")) for c in pods["sec-supernode-beta"])
    for obj in objects:
        if obj["kind"] != "Certificate":
            validate(obj)


def test_distributed_statefulsets_get_the_claims_their_pods_mount_podtemplate_included() -> None:
    # Found by the config fuzzer: a claim mounted only by a podTemplate patch went to neither StatefulSet.
    from flower_federation.builders import manifests
    from flower_federation.plan import load_plan
    from tests.support.stacks import base

    claim = {"spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}}
    raw = base(isolation="process", placement="distributed")
    raw["supernodes"]["pools"][0].update(
        volumeClaimTemplates=[{"metadata": {"name": n}, **claim} for n in ("node", "exec", "both", "unused")],
        volumeMounts=[{"name": "node", "mountPath": "/node"}],
        superexecVolumeMounts=[{"name": "exec", "mountPath": "/exec"}],
        podTemplate={
            "spec": {
                "containers": MOUNTING_BOTH,
            }
        },
    )
    objects = manifests.render(load_plan(raw, "dev")).objects()
    claims = {
        o["metadata"]["name"]: [c["metadata"]["name"] for c in o["spec"].get("volumeClaimTemplates", [])]
        for o in objects
        if o["kind"] == "StatefulSet"
    }
    assert claims["sec-supernode-alpha"] == ["node", "both"]
    assert claims["sec-superexec-alpha"] == ["exec", "both"]


def test_a_pools_volumes_go_to_the_pods_that_mount_them() -> None:
    """With distributed SuperExecs a pool's volumes reach two pods: each gets those its containers mount or use as a
    device (podTemplate patches included), as a PVC a pod lists is attached to it mounted or not (a ReadWriteOnce
    claim mounted by the SuperExec would make the SuperNode's pod fail on multi-attach). Ours stay as they are."""
    from flower_federation.builders import manifests
    from flower_federation.plan import load_plan
    from tests.support.stacks import base

    names = ("node", "exec", "both", "device", "unused")
    raw = base(isolation="process", placement="distributed")
    raw["supernodes"]["pools"][0].update(
        volumes=[{"name": n, "persistentVolumeClaim": {"claimName": f"data-{n}"}} for n in names],
        volumeMounts=[{"name": "node", "mountPath": "/node"}],
        superexecVolumeMounts=[{"name": "exec", "mountPath": "/exec"}],
        podTemplate={
            "spec": {
                "containers": MOUNTING_BOTH,
                "initContainers": [
                    {
                        "name": "fetch",
                        "image": "busybox:1.36",
                        "volumeDevices": [{"name": "device", "devicePath": "/d"}],
                    }
                ],
            }
        },
    )
    plan = load_plan(raw, "dev")
    volumes = {
        o["metadata"]["name"]: [v["name"] for v in o["spec"]["template"]["spec"]["volumes"]]
        for o in manifests.render(plan).objects()
        if o["kind"] == "StatefulSet"
    }
    assert [v for v in volumes["sec-supernode-alpha"] if v in names] == ["node", "both", "device"]
    assert [v for v in volumes["sec-superexec-alpha"] if v in names] == ["exec", "both", "device"]
    # Ours: as in a pool without volumes.
    raw["supernodes"]["pools"][0] = {**raw["supernodes"]["pools"][0], "volumes": [], "volumeMounts": []}
    raw["supernodes"]["pools"][0].pop("superexecVolumeMounts")
    raw["supernodes"]["pools"][0].pop("podTemplate")
    bare = {
        o["metadata"]["name"]: [v["name"] for v in o["spec"]["template"]["spec"]["volumes"]]
        for o in manifests.render(load_plan(raw, "dev")).objects()
        if o["kind"] == "StatefulSet"
    }
    for name in ("sec-supernode-alpha", "sec-superexec-alpha"):
        assert [v for v in volumes[name] if v not in names] == bare[name]


def _pool_volumes(raw: dict[str, Any]) -> dict[str, list[str]]:
    from flower_federation.builders import manifests
    from flower_federation.plan import load_plan

    return {
        o["metadata"]["name"]: [v["name"] for v in o["spec"]["template"]["spec"]["volumes"]]
        for o in manifests.render(load_plan(raw, "dev")).objects()
        if o["kind"] == "StatefulSet" and o["metadata"]["name"].endswith("-alpha")
    }


def test_a_pod_templates_volumes_go_to_the_pods_that_mount_them_with_distributed_superexec() -> None:
    """A pool's podTemplate reaches its SuperNode pods and its distributed SuperExec pods alike, so the volumes it
    declares go as the pool's do: each pod keeps those its containers or init containers mount or use as a device (an
    unmounted PVC would still be attached, multi-attach for ReadWriteOnce). With the SuperExec a sidecar the
    podTemplate patches one pod, and its volumes are taken as given, mounted or not."""
    from tests.support.stacks import base

    names = ("node", "exec", "both", "device", "unused")
    template = {
        "spec": {
            "volumes": [{"name": n, "persistentVolumeClaim": {"claimName": f"data-{n}"}} for n in names],
            "containers": [
                {"name": "supernode", "volumeMounts": [{"name": "node", "mountPath": "/node"}]},
                {"name": "superexec-clientapp", "volumeMounts": [{"name": "exec", "mountPath": "/exec"}]},
                {"name": "sidecar", "image": "busybox:1.36", "volumeMounts": [{"name": "both", "mountPath": "/b"}]},
            ],
            "initContainers": [
                {"name": "fetch", "image": "busybox:1.36", "volumeDevices": [{"name": "device", "devicePath": "/d"}]}
            ],
        }
    }
    raw = base(isolation="process", placement="distributed")
    raw["supernodes"]["pools"][0]["podTemplate"] = template
    volumes = _pool_volumes(raw)
    assert [v for v in volumes["sec-supernode-alpha"] if v in names] == ["node", "both", "device"]
    assert [v for v in volumes["sec-superexec-alpha"] if v in names] == ["exec", "both", "device"]
    raw = base(isolation="process", placement="sidecar")
    raw["supernodes"]["pools"][0]["podTemplate"] = template
    assert [v for v in _pool_volumes(raw)["sec-supernode-alpha"] if v in names] == list(names)
