"""End to end: the rendered federation, started pod by pod as the kubelet would, with
real Flower 1.26.1 (gRPC era) and 1.42.0 (HTTP era), a few on the next Flower (the 1.43 nightly). See harness/
for what is emulated and how, stack.py for the rendering and the CLI, scenarios.py for what each
scenario proves. The versions run side by side (three lanes each at most, see lanes.LANES), the other
modules' scenarios following them (background.py); each test waits for its scenario's outcome and reports it, with the
scenario's own duration."""

from __future__ import annotations

import pytest

from tests.e2e import harness
from tests.e2e.background import report
from tests.e2e.harness import warm
from tests.e2e.lanes import GATE_TIMEOUT
from tests.e2e.stack import VERSIONS, WITH_NEXT
from tests.e2e.upgrade import FROM, TO
from tests.support.flower import GRPC_ERA, HTTP_ERA, NEXT

# A test's wait for its lane's outcome, which only a hang should reach: its federation's turn at the start gate
# (lanes.GATE_TIMEOUT at most) and its scenarios (the longest lane takes ~15 minutes on a loaded machine).
RESULT_TIMEOUT = GATE_TIMEOUT + 900


def check(background, version: str, scenario: str, record_property) -> None:
    report(background.lane(version, scenario).outcome(scenario, RESULT_TIMEOUT), record_property)


@pytest.mark.parametrize("version", WITH_NEXT)
@pytest.mark.scenario(
    "subprocess isolation, pools 3+1, TLS + node auth: all online, 2-round run completes; "
    "NetworkPolicy controls (intruder, outside world)",
    id="1",
)
def test_1_subprocess_isolation(background, version, record_property):
    check(background, version, "1", record_property)


@pytest.mark.parametrize("version", WITH_NEXT)
@pytest.mark.scenario("process isolation: the run completes in the SuperExec sidecars", id="2")
def test_2_process_isolation(background, version, record_property):
    check(background, version, "2", record_property)


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.scenario(
    "process isolation, distributed SuperExecs: the run completes in the SuperExec pods; "
    "their APIs refuse an intruder (NetworkPolicies enforced)",
    id="2b",
)
def test_2b_distributed_superexecs(background, version, record_property):
    check(background, version, "2b", record_property)


@pytest.mark.parametrize("version", [HTTP_ERA, NEXT])  # not the gRPC era: CONTRIBUTING.md, Lanes
@pytest.mark.scenario(
    "SuperLink restart on the same volume: runs and nodes kept, SuperNodes reconnect, new run completes", id="3"
)
def test_3_superlink_restart(background, version, record_property):
    check(background, version, "3", record_property)


@pytest.mark.parametrize("version", [HTTP_ERA])  # the current era only: CONTRIBUTING.md, Lanes
@pytest.mark.scenario("SuperNode killed mid-run: restarted, rejoins, federation stays usable", id="4")
def test_4_supernode_killed_mid_run(background, version, record_property):
    check(background, version, "4", record_property)


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.scenario("negative control: SuperNodes trusting the wrong CA are detected as not ready", id="5")
def test_5_negative_control_wrong_ca(background, version, record_property):
    check(background, version, "5", record_property)


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.scenario(
    "SuperLink killed mid-run: that run reported finished by Flower, not hung; the next run completes", id="8"
)
def test_8_superlink_restart_mid_run(background, version, record_property):
    check(background, version, "8", record_property)


@pytest.mark.parametrize("version", [HTTP_ERA])  # the current era only: CONTRIBUTING.md, Lanes
@pytest.mark.scenario(
    "process isolation, ClientApp SuperExec killed mid-run: restarted, the run finishes, the next has every node",
    id="10",
)
def test_10_clientapp_superexec_killed(background, version, record_property):
    check(background, version, "10", record_property)


@pytest.mark.parametrize("version", [HTTP_ERA])  # the current era only: CONTRIBUTING.md, Lanes
@pytest.mark.scenario(
    "rolling update of pool a (nodeConfig): pool b never offline, pool a within its PDB, the next run sees it",
    id="11",
)
def test_11_rolling_update(background, version, record_property):
    check(background, version, "11", record_property)


@pytest.mark.parametrize("version", [HTTP_ERA])  # the current era only: CONTRIBUTING.md, Lanes
@pytest.mark.scenario(
    "network partition SuperNodes/SuperLink for 60 s, healed: every node offline then back online, a run completes",
    id="12",
)
def test_12_network_partition(background, version, record_property):
    check(background, version, "12", record_property)


@pytest.mark.parametrize("version", [NEXT])  # the newest step, the one at risk: CONTRIBUTING.md, Lanes
@pytest.mark.scenario(
    f"upgrade {FROM} -> {TO} on live state: backed up before the migration, runs and nodes kept, "
    "SuperNodes reconnect without registering again, a new run completes",
    id="13",
)
def test_13_upgrade_on_live_state(background, version, record_property):
    check(background, version, "13", record_property)


@pytest.mark.parametrize("version", [NEXT])
@pytest.mark.scenario(
    f"downgrade to {FROM} refused by state-guard, saying how; restoring the backup brings back the "
    "state before the upgrade, the old run listed, a new run completes",
    id="14",
)
def test_14_downgrade_refused_restore(background, version, record_property):
    check(background, version, "14", record_property)


@pytest.mark.parametrize("version", [GRPC_ERA])
@pytest.mark.scenario(
    f"era change {GRPC_ERA} -> {HTTP_ERA} on live state: runs and nodes kept (migrated, backed up first), SuperNodes "
    "reconnect without registering again, a new run completes; the old flwr config reaches nothing",
    id="15",
)
def test_15_era_change(background, version, record_property):
    check(background, version, "15", record_property)


# Day-2 scenarios run once each, spread over the versions' third lanes so that none
# outlasts the others: the era change and the node-key rotation (its Jobs speak the gRPC-era
# Control API here; the HTTP era's in scenario 6 and tests/test_flower_live_registration.py) on
# 1.26.1; the CA rotation on the newest release; the upgrade and the downgrade (13, 14) on the next Flower.
@pytest.mark.parametrize("version", [GRPC_ERA])
@pytest.mark.scenario(
    "node keys rotated while training runs (nodeKeyGeneration): registered before the pool rolls, revoked after; "
    "every run completes, no SuperNode refused; rolled before registration, a SuperNode is refused",
    id="16",
)
def test_16_node_key_rotation(background, version, record_property):
    check(background, version, "16", record_property)


@pytest.mark.parametrize("version", [HTTP_ERA])
@pytest.mark.scenario(
    "CA rotated with an overlap in three ups (trust both, sign with the new, drop the old): SuperNodes online "
    "throughout, a run after each; a client pinned to the old CA is refused after the switch",
    id="18",
)
def test_18_ca_rotation(background, version, record_property):
    check(background, version, "18", record_property)


@pytest.mark.parametrize("version", [HTTP_ERA, NEXT])  # the gRPC health probe, and the exec probe from 1.43
@pytest.mark.scenario(
    "SuperNode stopped with SIGSTOP: its liveness probe fails, the kubelet restarts it, it rejoins under its node id "
    "and a run includes it; the same fault without a livenessProbe is not healed (negative control)",
    id="17",
)
def test_17_stopped_supernode_healed_by_liveness(background, version, record_property):
    check(background, version, "17", record_property)


def test_9_nothing_left_behind(background):
    """After every federation of every e2e module closed (conftest.py runs this test after the
    others): no network namespace, /etc/netns entry, process, work directory or mountpoint of ours
    is left."""
    if background is not None:
        running = background.join(RESULT_TIMEOUT)
        assert running == [], f"still running: {running}"
    assert harness.CREATED, "no cluster was created"
    left = harness.leftovers()
    assert left == [], f"left behind: {left}"
    # The warm clusters ran warm: no call was refused but the one test_e2e_warm.py makes on purpose (a refused
    # call runs cold, silently, as it must for the program; here it would be the harness's defect).
    calls = [line for server in warm.servers() for line in server.calls()]
    refused = [line for line in calls if ": refused: " in line and "FLWR_TELEMETRY_LOGGING" not in line]
    assert refused == [], f"warm calls refused: {refused}"
