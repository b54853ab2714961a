"""End-to-end tests: skip (with the reason) where the harness cannot run, show the
federation's container logs with a failure, and print per Flower version which
scenarios passed and how long each took."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.e2e import harness  # imports neither scenarios nor stack (rewritten below)

# Scenario functions run in lane threads, but their asserts should read like tests'; so
# should those of helpers moved out of a test module (gateway_emulation_setup).
pytest.register_assert_rewrite(
    "tests.e2e.scenarios",
    "tests.e2e.faults",
    "tests.e2e.stack",
    "tests.e2e.readiness",
    "tests.e2e.runs",
    "tests.e2e.sites",
    "tests.e2e.site_deployments",
    "tests.e2e.site_checks",
    "tests.e2e.scale",
    "tests.e2e.appio",
    "tests.e2e.background",
    "tests.e2e.gateway_emulation_setup",
)

HERE = Path(__file__).resolve().parent
_SKIP: list = []  # computed once: [reason or None]
_RESULTS: dict[str, dict] = {}  # nodeid -> {version, scenario, outcome, seconds}


def _skip_reason():
    if not _SKIP:
        _SKIP.append(harness.skip_reason())
    return _SKIP[0]


def _is_e2e(item) -> bool:
    return HERE in Path(str(item.fspath)).resolve().parents


def pytest_configure(config):
    config.addinivalue_line("markers", "scenario(title, id): an e2e scenario, reported per Flower version")


@pytest.hookimpl(tryfirst=True)  # before `-m` selects: every e2e test is `live` (Makefile)
def pytest_collection_modifyitems(config, items):
    for item in items:
        if _is_e2e(item):
            item.add_marker(pytest.mark.live)

    # The check that nothing is left behind runs once every federation closed, the followers' too
    # (background.py): after the last e2e test. Where other tests are selected with them (`pytest -m live`),
    # they follow it; `make test` runs them in a job of their own beside the e2e (Makefile: their ports come
    # from outside the ephemeral range, tests/support/processes.py, so the e2e's connections cannot take one).
    last = [i for i in items if _is_e2e(i) and i.name == "test_9_nothing_left_behind"]
    rest = [i for i in items if i not in last]
    e2e_end = max((n for n, i in enumerate(rest) if _is_e2e(i)), default=len(rest) - 1) + 1
    items[:] = rest[:e2e_end] + last + rest[e2e_end:]


def pytest_collection_finish(session):
    """The selected e2e tests: skipped with the reason where the harness cannot run, and
    listed for the summary."""
    e2e = [i for i in session.items if _is_e2e(i)]
    if not e2e:
        return
    reason = _skip_reason()
    for item in e2e:
        if reason:
            item.add_marker(pytest.mark.skip(reason=reason))
        marker = item.get_closest_marker("scenario")
        if marker is not None:
            params = item.callspec.params if hasattr(item, "callspec") else {}
            pairing = f" [{params['pairing']}]" if "pairing" in params else ""  # the skew scenarios' (site_skew.py)
            _RESULTS[item.nodeid] = {
                "version": params.get("version") or "-",
                "scenario": f"{marker.kwargs['id']}. {marker.args[0]}{pairing}",
                "outcome": "not run",
                "seconds": 0.0,
                "order": len(_RESULTS),
            }


def pytest_runtest_logreport(report):
    entry = _RESULTS.get(report.nodeid)
    if entry is None:
        return
    props = dict(p for p in report.user_properties if p[0] == "scenario_seconds")
    if "scenario_seconds" in props:  # the lane measured the scenario itself
        entry["seconds"] = props["scenario_seconds"]
    for k, v in report.user_properties:
        if k == "phases" and v:
            entry["phases"] = v
    entry.setdefault("incidents", [])
    entry["incidents"] += [v for k, v in report.user_properties if k == "incident" and v not in entry["incidents"]]
    if (report.when == "call" or report.outcome != "passed") and entry["outcome"] in ("not run", "passed"):
        entry["outcome"] = "skipped" if report.skipped else report.outcome


# Bounds a hang only: every scenario bounds its own waits; the longest lane takes about ten minutes.
BACKGROUND_TIMEOUT = 1500


@pytest.fixture(scope="session", autouse=True)
def background(request):
    """Every selected scenario's thread, from the first e2e test on (background.py: the lanes, then the followers); the
    tests wait for their outcomes. Session end: the lanes stop, their federations close."""
    wanted: dict[str, set[str]] = {}
    for item in request.session.items:
        marker = item.get_closest_marker("scenario")
        if marker is None or not _is_e2e(item) or item.get_closest_marker("skip"):
            continue
        version = item.callspec.params.get("version", "-") if hasattr(item, "callspec") else "-"
        wanted.setdefault(version, set()).add(marker.kwargs["id"])
    if not wanted:
        yield None
        return
    from tests.e2e.background import Background  # not at the top: see register_assert_rewrite
    from tests.support.flower import HTTP_ERA, venv

    for version in wanted:
        python = venv(HTTP_ERA if version == "-" else version) / "bin" / "python"
        if not python.exists():
            pytest.fail(f"{python} missing: run `make test` or `make e2e`, which install the Flower venvs")
    harness.install_cleanup_handlers()
    lanes = Background(wanted)
    lanes.start()
    try:
        yield lanes
    finally:
        lanes.stop()
        lanes.join(BACKGROUND_TIMEOUT)
        harness.close_all()


def _scenario_order(entry: dict) -> tuple[int, str]:
    """Scenarios by number, then letter: 1, 2, 2b, 3, ..., 10, 11, 12."""
    number = entry["scenario"].split(".")[0]
    digits = number.rstrip("abcdefghijklmnopqrstuvwxyz")
    return int(digits), number[len(digits) :]


def pytest_terminal_summary(terminalreporter):
    if not _RESULTS:
        return
    tr = terminalreporter
    tr.section("e2e scenarios by Flower version")
    reason = _skip_reason()
    if reason:
        tr.write_line(f"all skipped: {reason}")
        return
    by_version: dict[str, list[dict]] = {}
    for entry in sorted(_RESULTS.values(), key=lambda e: e["order"]):
        by_version.setdefault(entry["version"], []).append(entry)
    for version in sorted(by_version):
        entries = sorted(by_version[version], key=_scenario_order)
        total = sum(e["seconds"] for e in entries)
        passed = sum(e["outcome"] == "passed" for e in entries)
        tr.write_line(f"Flower {version}: {passed}/{len(entries)} scenarios passed, {total:.1f}s")
        for e in entries:
            tr.write_line(f"  {e['outcome']:>8}  {e['seconds']:6.1f}s  {e['scenario']}")
            if e.get("phases"):
                tr.write_line(f"            ({e['phases']})")
            for text in e.get("incidents", []):
                tr.write_line(f"            incident: {text}")
    tr.write_line(
        "(a scenario's time counts from the end of the previous one on the same federation; "
        "the first on a federation includes starting it: 1 (subprocess; then 3, 4, 11, 8), "
        "2 (process; then 10, 12), 2b (distributed), 5 (negative), 13 (upgrade to the next Flower; then 14), "
        "15 (era), 16 (keys), "
        "18 (ca), 6 and 6g (sites: a hub "
        "and four site clusters), 6s and 6n (the skew window: one hub and two sites, its three pairings one chain), "
        "7 (the SuperExec hop), 19 (many SuperNodes: a hub and its sites). "
        "The lanes run side by side; 6, 6g, 6s and 7 follow them as lanes end, 19 once all have; one start at a time.)"
    )
    if harness.EXPOSED:
        tr.write_line(
            "note: the Flower venvs' base interpreter is not reachable by uid 49999 on this host ("
            + ", ".join(sorted(harness.EXPOSED))
            + " not searchable); each container saw only that "
            "interpreter's directory (tmpfs over the private parent), as an image would provide it"
        )
