"""The canary's comparison (tests/support/canary.py) on the real Flowers we have: the nightly against 1.42.0 changes
no flag and no Fleet, Control or health route, and adds the state head 4c9b3f185c5b, which flower/versions.py
knows, so it passes, saying so. Negative control: the same nightly with a flag we render taken away, a route and a
state head added is reported, each change unknown, and the run fails naming the first (the flag)."""

from __future__ import annotations

import copy
import re
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
import yaml

from flower_federation.flower.versions import FlowerVersion
from tests.support import canary
from tests.support.flower import HTTP_ERA, NEXT, venv
from tests.support.paths import ROOT

BASELINE = HTTP_ERA  # 1.42.0


@pytest.fixture(scope="module")
def surfaces() -> dict[str, dict[str, Any]]:
    with ThreadPoolExecutor(2) as pool:  # each read imports a whole Flower: side by side
        return dict(zip((BASELINE, NEXT), pool.map(canary.surface, (venv(BASELINE), venv(NEXT))), strict=True))


def test_the_surface_is_read_from_the_real_flower(surfaces):
    base = surfaces[BASELINE]
    assert (base["package"], base["version"]) == ("flwr", BASELINE)
    assert (
        "--superlink" in base["flags"]["flower-supernode"] and "--fleet-api-type" in base["flags"]["flower-superlink"]
    )
    assert {"GET /health", "POST /v1/fleet/activate-node", "POST /v1/control/start-run"} <= set(
        base["routes"]["superlink"]
    )
    assert "GET /health" in base["routes"]["supernode"]
    assert base["revisions"]["heads"] == ["d9bd9d502cf9"]


def _read(surfaces: dict[str, dict[str, Any]], candidate: dict[str, Any]) -> Any:
    """canary.surface for main(): the surfaces read once (each read imports a Flower: seconds)."""
    return lambda path: candidate if Path(path) == venv(NEXT) else surfaces[BASELINE]


def test_the_nightly_against_1_42_changes_only_a_known_migration(surfaces, monkeypatch, capsys):
    changes = canary.compare(surfaces[BASELINE], surfaces[NEXT], canary.rendered_flags(NEXT))
    assert [(c.what, c.item, c.direction, c.known) for c in changes] == [
        ("migration", "4c9b3f185c5b", "new", "flower/versions.py KNOWN_STATE_HEADS")
    ]
    monkeypatch.setattr(canary, "surface", _read(surfaces, surfaces[NEXT]))
    assert canary.main(["--baseline", BASELINE, str(venv(NEXT))]) == 0
    out = capsys.readouterr().out
    assert f"flwr-nightly {NEXT} (against {BASELINE}): state new migration 4c9b3f185c5b" in out
    assert "known (flower/versions.py KNOWN_STATE_HEADS)" in out and "FAILED" not in out


def _injected(nightly: dict[str, Any]) -> dict[str, Any]:
    """The nightly with changes the project has not accounted for."""
    changed = copy.deepcopy(nightly)
    changed["flags"]["flower-supernode"].remove("--superlink")
    changed["routes"]["superlink"].append("POST /v1/fleet/push-everything")
    changed["revisions"]["all"]["0123456789ab"] = [["4c9b3f185c5b"], "Something new."]
    changed["revisions"]["heads"] = ["0123456789ab"]
    return changed


def test_an_injected_change_is_unknown_and_the_first_is_named(surfaces, monkeypatch, capsys):
    changed = _injected(surfaces[NEXT])
    changes = canary.compare(surfaces[BASELINE], changed, canary.rendered_flags(NEXT))
    assert [(c.what, c.item, c.direction, c.known) for c in changes] == [
        ("flag", "--superlink", "lost", ""),
        ("route", "POST /v1/fleet/push-everything", "new", ""),
        ("migration", "0123456789ab", "new", ""),
    ]
    monkeypatch.setattr(canary, "surface", _read(surfaces, changed))
    assert canary.main(["--baseline", BASELINE, str(venv(NEXT))]) == 1
    last = capsys.readouterr().out.strip().splitlines()[-1]
    assert last == (
        f"canary: FAILED, the first change nobody has accounted for: flwr-nightly {NEXT} (against {BASELINE}): "
        "flower-supernode lost flag --superlink (we render it)"
    )


def test_each_channel_is_compared_with_its_newest_tested_version():
    tested = canary.tested()
    release = canary.baseline_for("flwr")
    assert release in tested["flwr"] and all(
        FlowerVersion.parse(v) <= FlowerVersion.parse(release) for v in tested["flwr"]
    )
    assert canary.baseline_for("flwr-nightly") == (NEXT if tested["flwr-nightly"] else release)


def test_the_workflow_runs_the_canary_weekly_and_on_demand():
    """canary.yml (linted with the others: tests/test_workflows.py) runs `make test-canary` as ci.yml runs `make
    test`, on a weekly schedule and on demand; the target installs what the registry serves newest."""
    workflow = yaml.safe_load((ROOT / ".github" / "workflows" / "canary.yml").read_text(encoding="utf-8"))
    on = workflow.get("on", workflow.get(True))
    (cron,) = [entry["cron"] for entry in on["schedule"]]
    minute, hour, day, month, weekday = cron.split()
    assert (day, month) == ("*", "*") and weekday.isdigit(), f"{cron}: not once a week"
    assert "workflow_dispatch" in on
    (job,) = workflow["jobs"].values()
    assert [s["run"] for s in job["steps"] if "run" in s] == ["sudo --preserve-env=PYTHON make test-canary"]
    target = re.search(r"^test-canary:.*?(?=^\S)", (ROOT / "Makefile").read_text(encoding="utf-8"), re.M | re.S)
    assert target is not None, "Makefile: no test-canary target"
    assert "pip install --quiet --disable-pip-version-check flwr)" in target.group(0)
    # Pre-releases of the nightly alone: `--pre` would take its dependencies' release candidates too.
    assert "pip install --quiet --disable-pip-version-check 'flwr-nightly>=0.dev0')" in target.group(0)
    assert "--pre" not in target.group(0)
