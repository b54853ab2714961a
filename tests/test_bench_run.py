"""`make bench`'s wiring (bench/run.py): which rows --rows selects, the registration rows' table and busy flag,
and the Makefile installing the Flower they run. No timing here: speed is measured only by `make bench`; the
one live test registers ten keys to show a registration row runs end to end."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from bench import registration_rows, run
from tests.support.flower import HTTP_ERA

ROOT = Path(__file__).resolve().parents[1]


def figures(first: float, link_cpu: float = 4.0, job_cpu: float = 1.5) -> dict[str, float]:
    """One run's figures, as node_registration.measure returns them."""
    return {
        "first": first,
        "again": 0.8,
        "link_cpu": link_cpu,
        "job_cpu": job_cpu,
        "rss": 148.0,
        "hwm": 149.0,
        "state": 0.9,
        "job_peak": 100.0,
    }


def test_rows_split_into_render_and_registration_rows_in_the_order_given() -> None:
    assert run.select("register-10000,proxy-100mb,dev,register-1000,hub-50x10") == (
        ["dev", "hub-50x10"],
        ["register-10000", "register-1000"],
        ["proxy-100mb"],
    )
    assert run.select("pools-16") == (["pools-16"], [], [])
    # By default every render row, the 1,000-key registration and the 100 MB model through the proxy;
    # 10,000 keys (ten times the wait) on request.
    render, registration, proxy = run.select(",".join(run.DEFAULT_ROWS))
    assert render == run.RENDER_ROWS and "hub-500x20" in render
    assert registration == ["register-1000"] and proxy == ["proxy-100mb"]


def test_an_unknown_row_is_refused_naming_every_known_one(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(ValueError, match=r"unknown rows \['register-5'\]; known: dev, .*register-10000, proxy-100mb"):
        run.select("dev,register-5")
    with pytest.raises(SystemExit) as exit_:
        run.main(["--rows", "register-5"])
    assert exit_.value.code == 2 and "unknown rows ['register-5']" in capsys.readouterr().err


def test_a_missing_flower_venv_is_named_before_any_row_runs(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    def never(*args: object) -> None:
        raise AssertionError("a row ran")

    monkeypatch.setattr(registration_rows, "venv_python", lambda version: tmp_path / "absent" / "python")
    monkeypatch.setattr(run, "prepare", never)
    monkeypatch.setattr(registration_rows, "run", never)
    with pytest.raises(SystemExit) as exit_:
        run.main(["--rows", "dev,register-1000"])
    assert exit_.value.code == 2
    assert f"missing: `make bench` installs it (the Makefile target .venv-flwr-{HTTP_ERA}" in capsys.readouterr().err


def test_the_registration_table_reports_medians_and_flags_a_busy_row() -> None:
    quiet = registration_rows.RegistrationRow("register-1000", 1_000, [figures(6.0), figures(5.0), figures(5.5)])
    assert quiet.medians()["first"] == 5.5 and quiet.contention() == 1.0
    (row,) = [line for line in registration_rows.table([quiet], 3).splitlines() if line.startswith("| 1,000 ")]
    # keys/s is the keys over the median first run (1,000 / 5.5), the rest each figure's median.
    assert row == "| 1,000 | 1 | 5.5 | 182 | 0.8 | 4.0 | 1.5 | 148 | 149 | 0.9 | 100 |"
    # Negative control: a first run that waited for a core (wall well above the CPU spent on it).
    busy = registration_rows.RegistrationRow("register-1000", 1_000, [figures(8.0)])
    assert busy.contention() > run.CONTENDED >= quiet.contention()


def test_make_bench_installs_the_flower_the_registration_rows_run() -> None:
    database = subprocess.run(["make", "-pn", "bench"], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    (prerequisites,) = re.findall(r"^bench: (.*)$", database, re.MULTILINE)
    assert f".venv-flwr-{HTTP_ERA}/.installed" in prerequisites.split()
    assert registration_rows.venv_python(HTTP_ERA) == ROOT / f".venv-flwr-{HTTP_ERA}" / "bin" / "python"


@pytest.mark.live
def test_a_registration_row_runs_end_to_end(monkeypatch: pytest.MonkeyPatch) -> None:
    """Ten keys on a live SuperLink, in the spawned child `make bench` uses (about 8 s, mostly the render and
    the SuperLink's start). node_registration.measure itself checks that every key was registered once, that
    the re-run changed nothing, and that the SuperLink logged one RegisterNode per key."""
    monkeypatch.setattr(registration_rows, "ROWS", {"register-10": 10})
    (row,) = registration_rows.run(["register-10"], 1)
    (m,) = row.runs
    assert m["first"] > 0 and m["again"] > 0 and m["rss"] > 50 and m["job_peak"] > 20
    assert "| 10 | 1 |" in registration_rows.table([row], 1)


def _row(row: str, render_wall: float, floor_wall: float, peak_mib: int = 100) -> run.Row:
    return run.Row(
        row,
        1,
        [run.Sample(render_wall, render_wall, peak_mib * 1024)],
        [run.Sample(floor_wall, floor_wall, 80 * 1024)],
        [run.Sample(floor_wall / 2, floor_wall / 2, 70 * 1024)],
    )


def test_the_targets_are_issue_36s_ratio_and_flatness_in_time_and_memory() -> None:
    """1.2x the floor for the 16 pools and the dev stack; 10,000 replicas within 10% of one in time AND peak RSS."""
    met = run.targets(
        [
            _row("dev", 1.2, 1.0),
            _row("pools-16", 2.4, 2.0),
            _row("replicas-1", 2.0, 1.8),
            _row("replicas-10000", 2.1, 1.8),
        ]
    )
    assert met.count("- [x]") == 3 and "- [ ]" not in met, met
    assert "16 pools: render / floor <= 1.2 (now 1.20" in met
    assert "against the by-token floor, 1.00 s, the render's way of registering without its logic: 2.40)" in met
    missed = run.targets(
        [
            _row("dev", 1.25, 1.0),
            _row("pools-16", 2.0, 2.0),
            _row("replicas-1", 2.0, 1.8),
            _row("replicas-10000", 2.0, 1.8, peak_mib=111),  # time flat, memory not
        ]
    )
    assert "- [ ] dev stack: render / floor <= 1.2 (now 1.25" in missed
    assert "- [ ] 1 vs 10,000 replicas within 10% in wall time and peak RSS (now +0% and +11%" in missed
    assert "- [x] 16 pools" in missed
