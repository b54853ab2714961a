"""The federation exporter (issue 34): its exposition, read by prometheus-client's own parser and `promtool check
metrics` (Debian's prometheus package: `make e2e-tools`), each with a negative control; how nodes map to sites
(a key the hub does not list is counted as site "unknown", never dropped); and its objects: none without
`monitoring`, and with it a restricted container in the SuperLink's pod whose port only the configured scrapers
reach, a render the `check` policies pass."""

from __future__ import annotations

import copy
import importlib.util
import shutil
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from flower_federation.builders import monitoring, state_guard
from flower_federation.checks.model import MANDATORY
from flower_federation.checks.policies import run
from flower_federation.cli.offline import placeholder_outputs, run_program
from flower_federation.config.errors import ConfigError
from flower_federation.flower.public_keys import public_key
from tests.support.certificates import ca_pem
from tests.support.fuzz_stacks import private_keys
from tests.support.manifests import by_kind, get, workload_container
from tests.support.render import core_objects, plan_of

ROOT = Path(__file__).resolve().parents[1]


def _load() -> ModuleType:
    spec = importlib.util.spec_from_file_location("federation_exporter", monitoring.SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


exporter = _load()
NOW = 1_800_000_000.0
KEY_LABELS = "lab-c - ecdsa-sha2-nistp384 AAAAlabc\nhospital-a a1 ecdsa-sha2-nistp384 AAAAhosp\n"


def families(text: str) -> dict[str, Any]:
    return {f.name: f for f in text_string_to_metric_families(text)}


def promtool(text: str, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    tool = shutil.which("promtool")
    assert tool, "promtool is missing: `make e2e-tools` installs Debian's prometheus package"
    return subprocess.run([tool, "check", "metrics"], input=text, capture_output=True, text=True, timeout=60)


def sample_exposition(tmp_path: Path) -> str:
    labels_file = tmp_path / "key-labels"
    labels_file.write_text(KEY_LABELS)
    nodes = [
        {"key": "AAAAlabc", "status": "online", "last_activated_at": NOW - 60, "last_deactivated_at": None},
        {"key": "AAAAhosp", "status": "offline", "last_activated_at": NOW - 900, "last_deactivated_at": NOW - 600},
        {"key": "AAAAstranger", "status": "online", "last_activated_at": NOW - 5, "last_deactivated_at": None},
    ]
    runs = [
        {"status": "finished", "sub_status": "completed", "running_at": NOW - 4000, "finished_at": NOW - 3000},
        {"status": "finished", "sub_status": "failed", "running_at": NOW - 500, "finished_at": NOW - 400},
        {"status": "running", "sub_status": "", "running_at": NOW - 7200, "finished_at": None},
    ]
    state = tmp_path / "state" / "state.db"
    (state.parent / "backups").mkdir(parents=True)
    state.write_bytes(b"x" * 4096)
    (state.parent / "backups" / "1.41.0-abc-20260101T000000Z.db").write_bytes(b"y")
    (state.parent / "backups" / "1.42.0-abc-20260101T000000Z.db.tmp").write_bytes(b"cut short")
    ca = tmp_path / "ca.crt"
    ca.write_text(ca_pem('CA "quoted" \\ one') + ca_pem("second CA", seed=2))
    samples: dict[str, Any] = {"up": [({}, 1.0)], "control_api_latency_seconds": [({}, 0.0125)]}
    samples |= exporter.node_samples(nodes, exporter.read_key_labels(labels_file), NOW)
    samples |= exporter.run_samples(runs, NOW)
    samples |= exporter.file_samples(state, state.parent / "backups", NOW)
    samples |= exporter.certificate_samples(None, ca)
    return str(exporter.exposition(samples))


def test_the_exposition_parses_with_prometheus_client_and_passes_promtool(tmp_path: Path) -> None:
    text = sample_exposition(tmp_path)
    found = families(text)
    polls = {
        "last_poll_timestamp_seconds",
        "last_successful_poll_timestamp_seconds",
        "poll_errors_total",
    }  # the loop's own: not sampled here
    assert set(found) == {exporter.PREFIX + name for name in set(exporter.HELP) - polls}
    nodes = {
        (s.labels["site"], s.labels["pool"], s.labels["status"]): s.value
        for s in found["flower_federation_supernodes"].samples
    }
    assert nodes[("lab-c", "-", "online")] == 1 and nodes[("hospital-a", "a1", "offline")] == 1
    assert nodes[("hospital-a", "a1", "online")] == 0  # a zero, so "no online node" is a value an alert sees
    ages = {s.labels["site"]: s.value for s in found["flower_federation_site_last_online_age_seconds"].samples}
    assert ages == {"lab-c": 0.0, "hospital-a": 600.0, "unknown": 0.0}
    runs = {s.labels["status"]: s.value for s in found["flower_federation_runs"].samples}
    assert (runs["completed"], runs["failed"], runs["running"], runs["pending"]) == (1, 1, 1, 0)
    duration = {s.name: s for s in found["flower_federation_run_duration_seconds"].samples}
    assert duration["flower_federation_run_duration_seconds_count"].value == 2
    assert duration["flower_federation_run_duration_seconds_sum"].value == 1100
    assert found["flower_federation_oldest_running_run_age_seconds"].samples[0].value == 7200
    assert found["flower_federation_state_backups"].samples[0].value == 1  # the .tmp copy is not a backup
    assert found["flower_federation_state_file_bytes"].samples[0].value == 4096
    subjects = {s.labels["subject"] for s in found["flower_federation_certificate_not_after_timestamp_seconds"].samples}
    # RFC 4514 escapes the quotes and backslash, the exposition escapes them again: read back whole.
    assert subjects == {'CN=CA \\"quoted\\" \\\\ one', "CN=second CA"}
    checked = promtool(text, tmp_path)
    assert checked.returncode == 0, checked.stdout + checked.stderr


def test_the_parsers_refuse_a_broken_exposition(tmp_path: Path) -> None:
    """Negative control: a line break left raw in a label value (what `escape` prevents) fails both checks."""
    text = sample_exposition(tmp_path).replace("CN=second CA", "CN=second\nCA")
    with pytest.raises(ValueError):
        families(text)
    assert promtool(text, tmp_path).returncode != 0


def test_a_key_the_hub_does_not_list_is_counted_as_unknown_never_dropped() -> None:
    labels = {"AAAAlabc": ("lab-c", "-")}
    nodes = [
        {"key": "AAAAlabc", "status": "online", "last_activated_at": NOW, "last_deactivated_at": None},
        {"key": "AAAAother", "status": "online", "last_activated_at": NOW, "last_deactivated_at": None},
    ]
    rows = {tuple(labels.values()): value for labels, value in exporter.node_samples(nodes, labels, NOW)["supernodes"]}
    assert rows[("lab-c", "-", "online")] == 1
    assert rows[("unknown", "unknown", "online")] == 1
    assert sum(rows.values()) == len(nodes)


def test_the_script_and_the_builder_agree() -> None:
    assert exporter.CONNECTION == monitoring.CONNECTION
    assert state_guard.BACKUP_DIR == monitoring.BACKUP_DIR


HUB: dict[str, Any] = {
    "role": "hub",
    "name": "fl",
    "namespace": "flower-hub",
    "version": "1.42.0",
    "nodeAuth": {"enabled": True},
    "superlink": {"ingress": {"host": "fl.example.org"}},
    "sites": [
        {
            "name": "lab-c",
            "publicKeys": [
                "ecdsa-sha2-nistp384 AAAAE2VjZHNhLXNoYTItbmlzdHAzODQAAAAIbmlzdHAzODQAAABhBIirZgKjeR0m5MgxKUn8eFbLryve2"
                "CNpA1qLQGM82bvzlHpxQW84o24AYn2SP9/GEzmBsxRtAfZWaCQ+e9nb5567JpaFy0swNW9qBtOGJ15NUURyR1hZ7dHLOehaaoG/jg=="
                " lab-c-site/a1/0"
            ],
        }
    ],
}


def with_monitoring(**settings: Any) -> dict[str, Any]:
    return {**copy.deepcopy(HUB), "monitoring": {"enabled": True, **settings}}


def test_without_monitoring_nothing_changes() -> None:
    assert core_objects(HUB) == core_objects({**HUB, "monitoring": {"enabled": False, "port": 9999}})


def test_the_exporter_runs_restricted_in_the_superlink_pod_and_only_scrapers_reach_it() -> None:
    objects = core_objects(with_monitoring(port=9500, scrapers={"namespaceSelector": {"team": "obs"}}))
    c = workload_container(objects, "StatefulSet", "fl-superlink", "federation-exporter")
    superlink = workload_container(objects, "StatefulSet", "fl-superlink", "superlink")
    assert c["image"] == superlink["image"]  # the SuperLink's Flower, at its version
    assert c["securityContext"]["readOnlyRootFilesystem"] and c["resources"]["limits"]["memory"]
    assert c["ports"] == [{"name": "metrics", "containerPort": 9500, "protocol": "TCP"}]
    assert {m["name"]: m.get("readOnly") for m in c["volumeMounts"]}["state"] is True
    labels = get(objects, "ConfigMap", "fl-federation-exporter")["data"]["key-labels"]
    assert labels.startswith("lab-c a1 ecdsa-sha2-nistp384 AAAAE2VjZHNh") and labels.count("\n") == 1
    policy = get(objects, "NetworkPolicy", "fl-superlink")
    metrics = [rule for rule in policy["spec"]["ingress"] if {"port": 9500, "protocol": "TCP"} in rule["ports"]]
    assert metrics == [
        {
            "from": [
                {
                    "namespaceSelector": {"matchLabels": {"team": "obs"}},
                    "podSelector": {"matchLabels": {"app.kubernetes.io/name": "prometheus"}},
                }
            ],
            "ports": [{"port": 9500, "protocol": "TCP"}],
        }
    ]
    assert [v for v in run(objects) if v.level == MANDATORY] == []
    assert len(by_kind(objects, "Service")) == len(by_kind(core_objects(HUB), "Service")) + 1


def test_a_metrics_port_the_superlink_pod_uses_is_refused_quoting_it() -> None:
    with pytest.raises(ConfigError) as caught:
        plan_of(with_monitoring(port=9095))  # the HTTP era's one API port
    assert [(p.path, "9095 is a port of the SuperLink's pod" in p.message) for p in caught.value.problems] == [
        ("federation.monitoring.port", True)
    ]
    plan_of(with_monitoring(port=9464))  # negative control: a free port passes


def test_the_exporters_resources_are_settings_checked_at_their_path() -> None:
    raw = with_monitoring(resourcesPreset="micro", resources={"limits": {"memory": "300Mi"}})
    c = workload_container(core_objects(raw), "StatefulSet", "fl-superlink", "federation-exporter")
    assert c["resources"] == {"requests": {"cpu": "250m", "memory": "256Mi"}, "limits": {"memory": "300Mi"}}
    with pytest.raises(ConfigError) as caught:
        plan_of(with_monitoring(resources={"limits": {"memory": "lots"}}))
    assert [p.path for p in caught.value.problems] == ["federation.monitoring.resources.limits.memory"]


def test_a_federations_own_pools_keys_are_labelled_with_their_pool_at_deploy_time() -> None:
    """Under Pulumi's mocks, pulumi-tls making real keys: a `role: federation` stack's exporter ConfigMap labels
    each own pool's key with the federation's name as site and its pool (the render, before the keys exist, cannot:
    its nodes would count as `unknown`); a hub's site keys stay as rendered."""
    made = iter(private_keys())

    def real_keys(typ: str, name: str, inputs: dict[str, Any]) -> dict[str, Any]:
        out = placeholder_outputs(typ, name, inputs)
        if typ == "tls:index/privateKey:PrivateKey":
            key = next(made)
            out.update(privateKeyOpenssh=key, publicKeyOpenssh=" ".join(public_key(key, "x").split()[:2]))
        return out

    raw = {"name": "fl", "namespace": "flower", "version": "1.42.0", "nodeAuth": {"enabled": True},
           "supernodes": {"pools": [{"name": "a1", "replicas": 2}, {"name": "b", "replicas": 1}]},
           "monitoring": {"enabled": True}}  # fmt: skip
    rendered = get(core_objects(raw), "ConfigMap", "fl-federation-exporter")["data"][monitoring.KEY_LABELS_FILE]
    assert rendered == ""  # the negative control: the render alone knows no own key
    run = run_program({"federation": raw}, "dev", provider=real_keys)
    config = next(r for r in run.registrations if r.name == "fl-federation-exporter" and r.type.endswith("ConfigMap"))
    lines = config.inputs["data"][monitoring.KEY_LABELS_FILE].splitlines()
    assert sorted(line.split()[:2] for line in lines) == [["fl", "a1"], ["fl", "a1"], ["fl", "b"]], lines


def poll_args(tmp_path: Path) -> Any:
    labels = tmp_path / "key-labels"
    labels.write_text(KEY_LABELS)
    return exporter.parse(["--config", str(tmp_path / "c.toml"), "--key-labels", str(labels), "--port", "0"])


def test_a_failed_poll_serves_up_0_no_counts_and_when_the_last_good_one_was(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The Control API answers, then fails: the second exposition says `up 0`, keeps the first poll's time as
    `last_successful_poll_timestamp_seconds` and serves no node or run series (unknown, never a stale count
    shown as current: the alerts hold what was firing, tests/test_monitoring_rules.py). Before any success the
    gauge is absent (the negative control: it is not a poll's time)."""
    node = {"key": "AAAAlabc", "status": "offline", "last_activated_at": NOW - 90, "last_deactivated_at": NOW - 60}
    answers: list[Any] = [([node], []), RuntimeError("the SuperLink is gone")]

    def answer() -> Any:
        got = answers.pop(0)
        if isinstance(got, Exception):
            raise got
        return got

    monkeypatch.setattr(exporter, "ask_superlink", answer)
    e = exporter.Exporter(poll_args(tmp_path))
    assert "last_successful_poll_timestamp_seconds" not in e.text
    e.poll()
    good = families(e.text)
    assert good["flower_federation_up"].samples[0].value == 1
    assert {s.labels["site"] for s in good["flower_federation_supernodes"].samples} == {"lab-c", "hospital-a"}
    when = good["flower_federation_last_successful_poll_timestamp_seconds"].samples[0].value
    assert when == good["flower_federation_last_poll_timestamp_seconds"].samples[0].value
    e.poll()
    bad = families(e.text)
    assert bad["flower_federation_up"].samples[0].value == 0
    assert bad["flower_federation_poll_errors"].samples[0].value == 1
    assert bad["flower_federation_last_successful_poll_timestamp_seconds"].samples[0].value == when
    assert not {"flower_federation_supernodes", "flower_federation_runs"} & set(bad)
    assert promtool(e.text, tmp_path).returncode == 0


class HungUp:
    """A connection's write side whose peer has gone: every write raises `error`."""

    def __init__(self, error: Exception) -> None:
        self.error = error

    def write(self, data: bytes) -> int:
        raise self.error

    def flush(self) -> None:
        pass


def serve_one(e: Any, wfile: HungUp) -> None:
    """One `GET /metrics` through http.server's own request handling, its answer written to `wfile`."""
    import io

    handler = exporter.handler(e)
    h = handler.__new__(handler)
    h.rfile, h.wfile = io.BytesIO(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n"), wfile
    h.client_address, h.server, h.close_connection = ("127.0.0.1", 1), None, True
    h.handle_one_request()


def test_a_scraper_that_hangs_up_early_is_no_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A scraper or probe that disconnects before the answer is written (BrokenPipeError, ConnectionResetError)
    ends the request quietly: nothing raised, which http.server's server would print as a traceback, nothing
    logged. Negative control: any other write error still raises."""
    e = exporter.Exporter(poll_args(tmp_path))
    for gone in (BrokenPipeError(32, "Broken pipe"), ConnectionResetError(104, "Connection reset by peer")):
        serve_one(e, HungUp(gone))
    assert capsys.readouterr() == ("", "")
    with pytest.raises(OSError, match="No space"):
        serve_one(e, HungUp(OSError(28, "No space left on device")))
