"""Flower's usage telemetry is off unless asked for: `FLWR_TELEMETRY_ENABLED=0` in every
Flower container of every security stack (and the Kubernetes executor's task pods, HTTP
era), none with `telemetry: true`, the user's own value kept; the importers say where this
differs from the chart or the operator, and `--preserve-behaviour` keeps Flower's default.
The real Flower reads the variable as rendered: `flwr.supercore.telemetry` sends nothing
unless it is "1"."""

from __future__ import annotations

import subprocess

import pytest
import yaml

from flower_federation.builders import pods
from flower_federation.flower.layout import TELEMETRY_ENV
from tests.support.flower import GRPC_ERA, HTTP_ERA, venv_python
from tests.support.importing import header, run_import, stack_config, write
from tests.support.render import plan_objects, plan_of
from tests.support.security_matrix import STACK_IDS, executor_configs, security_objects
from tests.support.seeds import operator_crs

FLOWER_IMAGES = ("flwr/",)


def flower_containers(objects) -> list[dict]:
    out = []
    for o in objects:
        spec = (o.get("spec") or {}).get("template", {}).get("spec") or (
            (o.get("spec") or {}).get("jobTemplate", {}).get("spec", {}).get("template", {}).get("spec")
        )
        if not spec:
            continue
        out += [c for c in spec.get("containers", []) if c["image"].startswith(FLOWER_IMAGES)]
    return out


def said(out: str) -> str:
    """The stack file's header comments as one line (they wrap)."""
    return " ".join(line.lstrip("#- ").strip() for line in header(out).splitlines())


def env_value(c: dict, name: str = TELEMETRY_ENV):
    return next((e.get("value") for e in c.get("env", []) if e["name"] == name), None)


@pytest.mark.parametrize("sid", STACK_IDS)
def test_every_flower_container_has_telemetry_off(sid: str) -> None:
    containers = flower_containers(security_objects(sid))
    assert containers
    for c in containers:
        assert env_value(c) == "0", (c["name"], c.get("env"))


def test_the_kubernetes_executors_task_pods_get_it_too_in_the_http_era() -> None:
    configs = executor_configs(security_objects("http-executor-kubernetes"))
    assert configs
    for config in configs.values():
        assert {"name": TELEMETRY_ENV, "value": "0"} in config["env"]
    # The gRPC era's executor takes no env (not in the versions a real parser checks here).
    for config in executor_configs(security_objects("grpc-executor-kubernetes")).values():
        assert "env" not in config


def _federation(**extra) -> dict:
    return {"name": "t", "version": HTTP_ERA, "supernodes": {"pools": [{"name": "a", "replicas": 1}]}, **extra}


def test_telemetry_true_is_flowers_default_and_a_users_value_wins() -> None:
    on = flower_containers(plan_objects(plan_of(_federation(telemetry=True), "dev")))
    assert on and all(env_value(c) is None for c in on)
    own = _federation(superlink={"env": [{"name": TELEMETRY_ENV, "value": "1"}]})
    (superlink,) = [c for c in flower_containers(plan_objects(plan_of(own, "dev"))) if c["name"] == "superlink"]
    assert [e for e in superlink["env"] if e["name"] == TELEMETRY_ENV] == [{"name": TELEMETRY_ENV, "value": "1"}]


@pytest.mark.parametrize("version", [GRPC_ERA, HTTP_ERA])
def test_real_flower_sends_nothing_with_the_rendered_value(version: str) -> None:
    """Flower's own module, imported with the rendered environment, decides not to send."""
    (value,) = {env_value(c) for c in flower_containers(plan_objects(plan_of(_federation(version=version), "dev")))}
    code = (
        "try:\n"
        "    from flwr.supercore import telemetry\n"
        "except ImportError:\n"
        "    from flwr.common import telemetry\n"
        "print(telemetry.FLWR_TELEMETRY_ENABLED)\n"
    )
    out = subprocess.run(
        [str(venv_python(version)), "-c", code],
        env={TELEMETRY_ENV: value, "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    assert out == "0"


def test_import_helm_says_telemetry_differs_and_preserves_it(tmp_path, capsys) -> None:
    values = write(tmp_path, "values.yaml", "supernode:\n  superlink:\n    address: fl.example.org\n    port: 443\n")
    _, out, _ = run_import(capsys, "helm", values)
    text = said(out)
    assert "Telemetry: Flower sends usage events" in text and "which the chart leaves unset" in text
    assert "--preserve-behaviour sets telemetry: true." in text
    _, out, _ = run_import(capsys, "helm", values, "--preserve-behaviour")
    assert stack_config(out)["telemetry"] is True
    own = write(
        tmp_path,
        "own.yaml",
        yaml.safe_dump(
            {
                "supernode": {
                    "superlink": {"address": "fl.example.org", "port": 443},
                    "env": [{"name": TELEMETRY_ENV, "value": "0"}],
                }
            }
        ),
    )
    _, out, _ = run_import(capsys, "helm", own)
    assert "Telemetry:" not in said(out)


def test_import_operator_says_telemetry_differs_and_preserves_it(tmp_path, capsys) -> None:
    path = write(tmp_path, "cr.yaml", operator_crs()[0])
    _, out, _ = run_import(capsys, "operator", path)
    assert "Telemetry: Flower sends usage events" in said(out) and "which the operator leaves unset" in said(out)
    _, out, _ = run_import(capsys, "operator", path, "--preserve-behaviour")
    assert stack_config(out)["telemetry"] is True


def test_the_helper_is_the_one_place_that_says_it() -> None:
    assert pods.telemetry_env(False) == [{"name": TELEMETRY_ENV, "value": "0"}] and pods.telemetry_env(True) == []
