"""Upgrading Flower under a running federation (issue 22): the stack's `version` changes and
`pulumi up` rolls the re-rendered StatefulSets as their controllers would
(harness/rollout.py); the pods of each version run that version's real Flower (the harness
maps an image's tag to that version's venv). The SuperLink keeps its PVC throughout.

Federation `upgrade` (TLS, node authentication, persistence, pool `a` of 2), started on
Flower FROM (1.42.0, the newest release) and upgraded to TO (the next Flower: the 1.43 nightly
until its release is served). The newest step is the one at risk, and CI has room for one
pair: 1.41.0 -> 1.42.0 stays covered by tests/test_state_guard.py (real SuperLinks of both on
one state file: backup, migration, refusal, restore). CONTRIBUTING.md, Lanes.

 13. A run completes on FROM; `version: TO` is rolled out. The SuperLink's
     `state-guard` init container backed the state up before Flower TO migrated it
     (the backup at the old schema revision, named after its writer; the nightly adds
     revision 4c9b3f185c5b); the SuperLink runs TO and its state is at TO's revision;
     the earlier run is still listed as it was; the SuperNodes come back online under
     their node ids without registering again (the register script is not run); a new
     run completes.
 14. Going back: `version: FROM` is rolled out. The SuperLink's pod never starts: its
     `state-guard` refuses the migrated state (exit 3), its log naming the revision, the
     Flower that wrote it, the backup and the restore setting (the negative control: with
     nothing to refuse, the rollout would have completed); `pulumi up` fails there, so
     the pool is not rolled. Then
     `superlink.persistence.restore: <that backup>` is rolled out: the state before the
     upgrade is back (the run made on TO is gone, the one before is listed, the
     replaced state kept as `replaced-*.db`), FROM serves on it, the SuperNodes come back
     under their node ids, and a new run completes.

Federation `era`, the same stack started on Flower GRPC_ERA (1.26.1):

 15. The era change: `version: 1.42.0` is rolled out (ports, command lines and the Control
     API's transport change). Measured: Flower 1.42.0 migrates 1.26.1's state (Alembic
     8e65d8ae60b0 -> d9bd9d502cf9) and keeps every run and registered node, under the same
     node ids; `state-guard` backed it up first. The SuperNodes come back without
     registering again and a new run completes through the new `flwrConfig` output; the
     old one reaches nothing (the Control API moved): users take the new output.

Rollouts follow Pulumi's order (Federation.roll_out): the SuperLink's StatefulSet first,
then the pools, which wait for it. So a SuperNode stopping tells a running SuperLink it
leaves and its successor is admitted at once; rolled at the same time, the successor of a
SuperNode whose SuperLink was down would be refused (exit 305) until the SuperLink's
heartbeat patience (60 s) passed.
"""

from __future__ import annotations

import contextlib
import copy
import re
import sqlite3
import time
from pathlib import Path
from typing import Any

from flower_federation.builders import state_guard
from tests.e2e import scenarios as base
from tests.e2e.faults import Kept, node_ids
from tests.e2e.harness import NotReady
from tests.e2e.rendering import config
from tests.e2e.stack import Federation
from tests.support.flower import GRPC_ERA, HTTP_ERA, NEXT, PREVIOUS_HTTP_ERA

ROLLOUT_TIMEOUT = 180  # per StatefulSet (they roll at once): each pod replaced and available in turn
# The refused SuperLink's init container fails within seconds; this only bounds the wait for it.
REFUSED_WAIT = 30
# The Alembic heads of the versions' SuperLink state, read off the wheels
# (flwr/supercore/state/alembic/versions); tests/test_state_guard*.py use the same.
REVISIONS = {
    GRPC_ERA: "8e65d8ae60b0",
    PREVIOUS_HTTP_ERA: "d90a2f91f23c",
    HTTP_ERA: "d9bd9d502cf9",
    NEXT: "4c9b3f185c5b",
}
FROM, TO = HTTP_ERA, NEXT  # scenarios 13 and 14: the newest release to the next Flower


def make(_: str) -> Federation:
    return Federation(FROM, config(FROM, pools=[("a", 2)]), label="upgrade")


def state_dir(fed: Federation) -> Path:
    (db,) = fed.cluster.pvcdir.glob(f"*{fed.superlink.name}*/state.db")
    return db.parent


def revisions(db: Path) -> list[str]:
    # Closed at once (a connection outlives its `with`): state-guard refuses to migrate beside an open one.
    with contextlib.closing(sqlite3.connect(f"file:{db}?mode=ro", uri=True)) as con:
        return sorted(r[0] for r in con.execute("SELECT version_num FROM alembic_version"))


def backups(fed: Federation) -> list[str]:
    return sorted(p.name for p in (state_dir(fed) / "backups").glob("*.db"))


def superlink_version(fed: Federation) -> str:
    """The Flower version of the process serving as the SuperLink: the venv it runs from."""
    argvs = [
        argv
        for pod, container, _, argv in fed.cluster.processes()
        if pod == fed.superlink.name and container == "superlink"
    ]
    found = {m.group(1) for argv in argvs for a in argv[:2] if (m := re.search(r"\.venv-flwr-(\d[\w.]*)/", a))}
    assert len(found) == 1, f"the SuperLink's processes: {argvs}"
    return found.pop()


def with_version(raw: dict[str, Any], version: str) -> dict[str, Any]:
    out = copy.deepcopy(raw)
    out["version"] = version
    return out


def roll(fed: Federation, raw: dict[str, Any]) -> list[str]:
    steps: list[str] = []
    began = time.monotonic()
    replaced = fed.roll_out(raw, ROLLOUT_TIMEOUT, lambda e: steps.append(f"{time.monotonic() - began:.1f}s {e}"))
    fed.phase(f"rolled to {raw['version']}: " + "; ".join(steps), time.monotonic() - began)
    return replaced


def run(fed: Federation) -> base.RunResult:
    """A run on every SuperNode (run_app's `min-nodes`; runs.ROUNDS rounds), completed and listed."""
    expected = base.expected_clients(fed.rendered.raw)
    result = fed.run_app()
    base.assert_completed(result, expected)
    base.assert_listed(fed, base.run_id(result))
    return result


def scenario_13(fed: Federation, memo: dict) -> None:
    fed.wait_ready(base.READY_TIMEOUT)
    run(fed)
    assert superlink_version(fed) == FROM
    assert revisions(state_dir(fed) / "state.db") == [REVISIONS[FROM]]
    kept, pods = Kept(fed), sorted(p.name for p in fed.supernodes_pods)
    ids, registrations = node_ids(fed, pods), fed.register_runs
    memo["upgrade"] = {"raw": copy.deepcopy(fed.rendered.raw), "kept": kept, "ids": ids}

    replaced = roll(fed, with_version(fed.rendered.raw, TO))
    assert sorted(replaced) == sorted([fed.superlink.name, *pods]), f"replaced {replaced}"
    assert superlink_version(fed) == TO
    guard_log = fed.superlink.init_containers[0].log(200)
    (backup,) = backups(fed)
    assert backup.startswith(f"{FROM}-{REVISIONS[FROM]}-"), backup
    assert "backed up" in guard_log and backup in guard_log, guard_log
    assert revisions(state_dir(fed) / "backups" / backup) == [REVISIONS[FROM]]
    assert revisions(state_dir(fed) / "state.db") == [REVISIONS[TO]], f"Flower {TO} did not migrate the state"

    fed.wait_ready(base.READY_TIMEOUT)  # the SuperNodes reconnect by themselves
    assert fed.register_runs == registrations, "the nodes had to be registered again"
    assert node_ids(fed, pods) == ids, "a SuperNode came back as another node"
    assert kept.check(fed) == {}, "runs appeared"
    after = run(fed)
    memo["upgrade"].update(backup=backup, run_on_new=base.run_id(after))
    fed.phase(f"backup {backup}; state {REVISIONS[FROM]} -> {REVISIONS[TO]}", 0)


def scenario_14(fed: Federation, memo: dict) -> None:
    up = memo.get("upgrade", {})
    assert "backup" in up, "scenario 13 did not upgrade: nothing to go back from"
    pods = sorted(p.name for p in fed.supernodes_pods)
    back = with_version(fed.rendered.raw, FROM)

    # The downgrade: the SuperLink's pod is refused before Flower starts; the pools roll.
    try:
        roll_out_refused = fed.roll_out(back, REFUSED_WAIT)
    except NotReady as exc:
        stuck = str(exc)
    else:
        raise AssertionError(f"the downgrade rolled out ({roll_out_refused}): state-guard refused nothing")
    guard = fed.superlink.init_containers[0]
    assert guard.name == state_guard.CONTAINER and state_guard.REFUSED_EXIT in guard.exit_codes, (
        fed.superlink.describe()
    )
    assert not fed.superlink.containers[0].exit_codes and not fed.superlink.containers[0].running, "Flower started"
    said = guard.log(200)
    for text in (REVISIONS[TO], f"Flower {TO} wrote it", up["backup"], "superlink.persistence.restore"):
        assert text in said, (text, said)
    assert fed.superlink.name in stuck and all(p not in stuck for p in pods), stuck
    fed.phase(
        "downgrade refused: " + [line for line in said.splitlines() if line.startswith("state-guard:")][-1][:160], 0
    )

    # The documented restore: the backup taken before the upgrade, and FROM.
    restore = copy.deepcopy(back)
    restore["superlink"].setdefault("persistence", {})["restore"] = up["backup"]
    replaced = roll(fed, restore)
    assert replaced == [fed.superlink.name, *sorted(pods, reverse=True)], f"replaced {replaced}"
    assert superlink_version(fed) == FROM
    assert revisions(state_dir(fed) / "state.db") == [REVISIONS[FROM]]
    assert any(b.startswith("replaced-") for b in backups(fed)), backups(fed)
    assert f"restored backups/{up['backup']}" in fed.superlink.init_containers[0].log(200)

    fed.wait_ready(base.READY_TIMEOUT)
    assert node_ids(fed, pods) == up["ids"], "a SuperNode came back as another node"
    runs = {str(r["run-id"]) for r in fed.runs()}
    assert up["run_on_new"] not in runs, f"the run made on {TO} is still listed: the backup was not restored"
    assert up["kept"].check(fed) == {}, "runs appeared"
    run(fed)


# What `flwr ls` shows of a run in both eras, spelled the same.
RUN_FIELDS = ("fab-id", "fab-version", "status", "pending-at", "running-at", "finished-at", "network-traffic")


def make_era(_: str) -> Federation:
    return Federation(GRPC_ERA, config(GRPC_ERA, pools=[("a", 2)]), label="era")


def scenario_15(fed: Federation, memo: dict) -> None:
    fed.wait_ready(base.READY_TIMEOUT)
    run(fed)
    db = state_dir(fed) / "state.db"
    assert revisions(db) == [REVISIONS[GRPC_ERA]], "Flower 1.26.1's state is not at the revision measured"
    kept, pods = Kept(fed), sorted(p.name for p in fed.supernodes_pods)
    ids, registrations = node_ids(fed, pods), fed.register_runs
    old_config = fed.outputs["flwrConfig"]

    replaced = roll(fed, with_version(fed.rendered.raw, HTTP_ERA))
    assert sorted(replaced) == sorted([fed.superlink.name, *pods]), f"replaced {replaced}"
    assert superlink_version(fed) == HTTP_ERA
    (backup,) = backups(fed)
    assert backup.startswith(f"{GRPC_ERA}-{REVISIONS[GRPC_ERA]}-"), backup
    assert revisions(state_dir(fed) / "backups" / backup) == [REVISIONS[GRPC_ERA]]
    assert revisions(db) == [REVISIONS[HTTP_ERA]], "Flower 1.42.0 did not migrate 1.26.1's state"

    # What Flower keeps: every run and registration, under the same node ids.
    fed.wait_ready(base.READY_TIMEOUT)
    assert fed.register_runs == registrations, "the nodes had to be registered again"
    assert node_ids(fed, pods) == ids, "a SuperNode came back as another node"
    assert sorted(str(n["node-id"]) for n in fed.supernodes()) == kept.nodes, "registered nodes changed"
    after = {str(r["run-id"]): r for r in fed.runs()}
    assert after.keys() == kept.runs.keys(), f"runs {sorted(kept.runs)} -> {sorted(after)}"
    for rid, was in kept.runs.items():
        # `flwr ls` of 1.42 spells some fields otherwise (federation-id, the whole fab-hash): the rest is the same.
        same = {k: was[k] == after[rid].get(k) for k in RUN_FIELDS}
        assert all(same.values()) and after[rid]["fab-hash"].startswith(was["fab-hash"]), (was, after[rid])
    run(fed)
    # What it does not: the address `flwr` users dial (the Control API moved), so they take
    # the new flwrConfig output. The old config reaches nothing (the negative control).
    assert old_config != fed.outputs["flwrConfig"]
    stale = fed.cluster.workdir / "cli-stale"
    (stale / "flwr").mkdir(parents=True)
    (stale / "flwr" / "config.toml").write_text(old_config)
    res = fed.cluster.exec_in(
        fed.cli_netns,
        ["flwr", "ls", fed.connection, "--format", "json"],
        env={**fed.cli_env, "FLWR_HOME": str(stale / "flwr")},
        mounts=fed.cli_mounts,
        cwd=str(fed.cli_home),
        timeout=60,
        name="cli-stale",
    )
    assert res.returncode != 0 or '"success": false' in res.stdout, f"the old flwr config still works:\n{res.stdout}"
    fed.phase(
        f"state {REVISIONS[GRPC_ERA]} -> {REVISIONS[HTTP_ERA]}, runs and {len(ids)} nodes kept; backup {backup}", 0
    )
