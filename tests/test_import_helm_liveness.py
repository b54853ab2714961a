"""The chart's liveness probes (1 s, three failures) against ours (5 s, six): an import says so, and
--preserve-behaviour keeps the chart's; a values file that sets them keeps its own without a word."""

from __future__ import annotations

from tests.support.importing import header, render, run_import, stack_config, write
from tests.support.manifests import get, pod_spec

VALUES = {"supernode": {"image": {"tag": "1.26.1"}, "superlink": {"address": "fl.example.org"}}}
SAID = "--preserve-behaviour sets supernodes.probes.livenessProbe.timeoutSeconds: 1 and "


def _liveness(config: dict) -> dict:
    objects = render(config, "site-a")
    pod = pod_spec(get(objects, "StatefulSet", "site-a-flower-client-supernode-supernode"))
    return next(c for c in pod["containers"] if c["name"] == "supernode")["livenessProbe"]


def test_the_charts_liveness_defaults_are_said_and_preserved_on_request(tmp_path, capsys):
    path = write(tmp_path, "v.yaml", VALUES)
    code, out, _ = run_import(capsys, "helm", path, "--release", "site-a")
    assert code == 0
    assert SAID + "supernodes.probes.livenessProbe.failureThreshold: 3." in header(out), header(out)
    probe = _liveness(stack_config(out))
    assert (probe["timeoutSeconds"], probe["failureThreshold"]) == (5, 6)  # ours
    code, out, _ = run_import(capsys, "helm", path, "--release", "site-a", "--preserve-behaviour")
    assert code == 0
    probe = _liveness(stack_config(out))
    assert (probe["timeoutSeconds"], probe["failureThreshold"]) == (1, 3)  # the chart's


def test_liveness_set_in_the_values_is_carried_and_not_said(tmp_path, capsys):
    values = {"supernode": {**VALUES["supernode"], "livenessProbe": {"timeoutSeconds": 2, "failureThreshold": 4}}}
    code, out, _ = run_import(capsys, "helm", write(tmp_path, "v.yaml", values), "--release", "site-a")
    assert code == 0
    assert "livenessProbe.timeoutSeconds: 1" not in header(out)
    probe = _liveness(stack_config(out))
    assert (probe["timeoutSeconds"], probe["failureThreshold"]) == (2, 4)
