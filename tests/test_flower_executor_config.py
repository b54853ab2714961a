"""The Kubernetes executor's `executor.yaml` is loaded by flwr 1.41's own loader and
executor factory, and Flower ends up with exactly the pod settings we rendered; a broken
config is refused by that loader (negative control)."""

from __future__ import annotations

import pytest
import yaml

from tests.support.flower import HTTP_ERA, FlowerError
from tests.support.real_render import check_mounted, pod_files, render, started_containers


def test_kubernetes_executor_config_is_what_flower_loads(flower):
    r = render("http-executor-kubernetes")
    plan = r.plan
    cli = flower[HTTP_ERA]
    checked = 0
    for workload, pod, c, argv in started_containers(r):
        if not c["name"].startswith("superexec"):
            continue
        parsed = cli.parse("flower-superexec", argv)
        assert argv[argv.index("--executor") : argv.index("--executor") + 4] == [
            "--executor",
            "kubernetes",
            "--executor-config",
            "/etc/flower/executor/executor.yaml",
        ]
        assert "kubernetes" in str(parsed["executor"])
        assert parsed["executor_config"] == "/etc/flower/executor/executor.yaml"
        files = pod_files(r, workload["spec"]["template"]["spec"], c)
        mounted = check_mounted(
            r,
            files,
            parsed["executor_config"],
            "ConfigMap",
            plan.names.executor_config(workload["metadata"]["name"]),
            "executor.yaml",
        )
        text = r.data("ConfigMap", mounted.name)["executor.yaml"]
        rendered = yaml.safe_load(text)
        loaded = flower[HTTP_ERA].executor_config(text)

        assert loaded["namespace"] == rendered["namespace"] == plan.namespace
        assert loaded["image"] == rendered["image"] == f"flwr/superexec:{HTTP_ERA}"
        assert loaded["image_pull_policy"] == rendered["image-pull-policy"]
        assert loaded["service_account_name"] == rendered["service-account-name"]
        sa = r.find("ServiceAccount", loaded["service_account_name"])
        assert sa is not None and sa["automountServiceAccountToken"] is False, "task pods need no API token"
        assert loaded["labels"] == rendered["labels"]
        assert loaded["labels"]["flower.flwr.ai/task-role"] == (
            "serverapp" if c["name"] == "superexec-serverapp" else pod["labels"]["flower.flwr.ai/pool"]
        )
        assert loaded["pod_security_context"] == rendered["pod-security-context"]
        assert loaded["pod_security_context"]["runAsNonRoot"] is True
        assert loaded["container_security_context"] == rendered["container-security-context"]
        assert loaded["container_security_context"]["allowPrivilegeEscalation"] is False
        assert loaded["container_security_context"]["readOnlyRootFilesystem"] is True
        assert loaded["volumes"] == rendered["volumes"] and loaded["volume_mounts"] == rendered["volume-mounts"]
        assert loaded["resources"] == rendered.get("resources")
        assert loaded["active_pod_budget"] == 4  # the user's executor.config passes through
        # The SuperExec itself talks to the API server: a token and a binding to the executor Role.
        sa_name = workload["spec"]["template"]["spec"]["serviceAccountName"]
        assert r.find("ServiceAccount", sa_name)["automountServiceAccountToken"] is True
        assert any(
            b["roleRef"]["name"] == plan.names.executor_role
            and {"kind": "ServiceAccount", "name": sa_name, "namespace": plan.namespace} in b["subjects"]
            for b in r.objects
            if b["kind"] == "RoleBinding"
        )
        checked += 1
    # The ServerApp SuperExec, and one ClientApp SuperExec per SuperNode.
    assert checked == 1 + sum(p.replicas for p in plan.spec.supernodes.pools)


def test_flower_rejects_a_broken_executor_config(flower):
    """Negative control: the loader really validates (missing image, secret volumes)."""
    r = render("http-executor-kubernetes")
    cm = next(o for o in r.objects if o["kind"] == "ConfigMap" and "executor.yaml" in o["data"])
    good = yaml.safe_load(cm["data"]["executor.yaml"])
    no_image = {k: v for k, v in good.items() if k != "image"}
    with pytest.raises(FlowerError, match="image"):
        flower[HTTP_ERA].executor_config(yaml.safe_dump(no_image))
    secret_volume = {**good, "volumes": [{"name": "x", "secret": {"secretName": "s"}}]}
    with pytest.raises(FlowerError, match="secret"):
        flower[HTTP_ERA].executor_config(yaml.safe_dump(secret_volume))
