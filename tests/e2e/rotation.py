"""Rotating a pool's node keys while training runs, and the CA with an overlap (issue 22,
section 4), with real Flower (scenario 16 on 1.26.1, 18 on 1.42.0: test_e2e.py says why).

Federations `keys` and `ca` (TLS, node authentication with generated keys, pool `a` of 2).
In scenario 16, federated runs follow one another in a thread for the whole scenario (each:
one round over whichever SuperNodes are online, `min-nodes` 1, the round ending at its
20 s timeout at the latest when a SuperNode is replaced mid-round).

 16. `nodeKeyGeneration: 1` is rolled out as `pulumi up` orders it (flower_federation/shell/
     federation.py): the registration Job of the new key set runs first (it registers the
     two new keys and revokes nothing), then pool `a` rolls onto them (its node-keys Secret
     and StatefulSet wait for that Job), then the revocation Job revokes the two old keys.
     Shown: every run started during the rotation completes; the SuperLink never refuses
     a SuperNode's key ("No SuperNode found with the given public key") and no new SuperNode
     restarts; the SuperNodes come back online under new node ids; the old ones are
     `unregistered`.
     The negative control: the next rotation (`nodeKeyGeneration: 2`) rolled without the
     registration Job first (the order a single Job before the pools would give): the first
     replaced SuperNode is refused, and the SuperLink says so; the Jobs then run, the
     rollout completes and every SuperNode is online again.
 18. The CA rotated with an overlap, three `pulumi up`s, a run after each: (1)
     `trustedCaGenerations: [0, 1]`: every pod rolls onto the two-CA bundle; (2)
     `caGeneration: 1`: a new server certificate, so only the SuperLink rolls (it alone
     mounts it; a Flower process cannot reload it, so it restarts once) and then serves
     CA 1's certificate, the SuperNodes reconnecting by themselves: what a renewal or a
     `pulumi up --replace` of the server certificate does too (tests/test_ca_rotation.py
     shows those change the same two objects); (3)
     `trustedCaGenerations: [1]`: CA 0 leaves every bundle. After each step the SuperNodes
     are online under their node ids without registering again, and a client holding the
     `caCertificate` output verifies the SuperLink. The negative control: after step 2 a
     client pinned to CA 0 alone is refused ("unable to get local issuer certificate"),
     as a site that kept the old `certificate.pem` would be.
"""

from __future__ import annotations

import copy
import re
import threading
import time
import tomllib
from typing import Any, Optional

from tests.e2e import scenarios as base
from tests.e2e.faults import node_ids
from tests.e2e.harness import NotReady
from tests.e2e.harness.jobs import Job
from tests.e2e.readiness import registration_jobs, wait_job
from tests.e2e.rendering import config
from tests.e2e.runs import RunResult, run_deadline
from tests.e2e.stack import Federation

ROLLOUT_TIMEOUT = 180
JOB_TIMEOUT = 120
REFUSED_WAIT = 30  # a refused SuperNode exits within seconds of its first activation
# What the SuperLink logs when a SuperNode's key is not registered (both eras).
NOT_REGISTERED = re.compile(r"No SuperNode found with the given public key")
# One round a run: the runs follow one another, so rounds keep coming at half the CPU of two-round runs.
RUN_CONFIG = {"min-nodes": 1, "num-server-rounds": 1, "round-timeout": 20.0}


def make(version: str) -> Federation:
    return Federation(version, config(version, pools=[("a", 2)]), label="rotation")


class Training(threading.Thread):
    """Runs back to back until stopped; keeps each result."""

    def __init__(self, fed: Federation):
        super().__init__(name="rotation-training", daemon=True)
        self.fed = fed
        self.results: list[tuple[float, RunResult]] = []
        self.error: Optional[BaseException] = None
        self._halt = threading.Event()

    def run(self) -> None:
        try:
            while not self._halt.is_set():
                self.results.append((time.monotonic(), self.fed.run_app(RUN_CONFIG)))
        except BaseException as exc:  # reported by stop()
            self.error = exc

    def stop(self) -> list[tuple[float, RunResult]]:
        """Waits for the run under way to end; returns every run as (start, result)."""
        self._halt.set()
        self.join(timeout=run_deadline(RUN_CONFIG) + 30)
        assert not self.is_alive(), "a run did not end"
        if self.error is not None:
            raise self.error
        return self.results


def run_job(fed: Federation, job: Job) -> str:
    fed.cluster.start_jobs([job.name])
    return wait_job(job, JOB_TIMEOUT)


def with_generation(raw: dict[str, Any], generation: int) -> dict[str, Any]:
    out = copy.deepcopy(raw)
    out["supernodes"]["pools"][0]["nodeKeyGeneration"] = generation
    return out


def superlink_log(fed: Federation) -> str:
    return fed.superlink.container("superlink").log(100000)


def scenario_16(fed: Federation, memo: dict) -> None:
    fed.wait_ready(base.READY_TIMEOUT)
    pods = sorted(p.name for p in fed.supernodes_pods)
    old_ids = node_ids(fed, pods)
    restarts = {p: fed.cluster.pod(p).container("supernode").restarts for p in pods}
    mark = len(superlink_log(fed))
    steps: list[str] = []
    began = time.monotonic()
    jobs: dict[str, str] = {}

    def register_first(created: list[Job]) -> None:
        registration, revocation = registration_jobs(created)
        jobs["revocation"] = revocation.name
        jobs["registration log"] = run_job(fed, registration)
        steps.append(f"{time.monotonic() - began:.1f}s registration Job complete")

    training = Training(fed)
    training.start()
    try:
        time.sleep(5)  # a run under way when the rotation starts
        replaced = fed.roll_out(
            with_generation(fed.rendered.raw, 1),
            ROLLOUT_TIMEOUT,
            lambda e: steps.append(f"{time.monotonic() - began:.1f}s {e}"),
            before_roll=register_first,
        )
        revoked = run_job(fed, fed.cluster.jobs[jobs["revocation"]])
        steps.append(f"{time.monotonic() - began:.1f}s revocation Job complete")
        fed.wait_ready(base.READY_TIMEOUT)
        rotated_at = time.monotonic()
        while not any(start > rotated_at for start, _ in training.results):
            time.sleep(1)  # one more run, started after the rotation
    finally:
        results = training.stop()
    fed.phase("rotation: " + "; ".join(steps), time.monotonic() - began)
    assert sorted(replaced) == pods, f"replaced {replaced}"
    assert "2 registered, 0 revoked" in jobs["registration log"], jobs["registration log"]
    assert "0 registered, 2 revoked" in revoked, revoked

    # Training went on: every run completed, each round with a SuperNode's reply.
    assert len(results) >= 2, f"{len(results)} runs"
    for _, result in results:
        assert result.returncode == 0 and result.done, f"a run failed during the rotation:\n{result.output[-2000:]}"
        assert len(result.rounds) == RUN_CONFIG["num-server-rounds"] and all(result.rounds), result.rounds
    fed.phase(f"{len(results)} runs completed, rounds " + " ".join(str(len(r.rounds)) for _, r in results), 0)

    # No SuperNode refused: the SuperLink never met an unknown key, no new SuperNode restarted.
    refusals = NOT_REGISTERED.findall(superlink_log(fed)[mark:])
    assert not refusals, f"the SuperLink refused {len(refusals)} activations during the rotation"
    for p in pods:
        assert fed.cluster.pod(p).container("supernode").restarts == 0, f"{p} restarted after the rotation"
    new_ids = node_ids(fed, pods)
    assert not set(new_ids.values()) & set(old_ids.values()), f"node ids kept: {old_ids} -> {new_ids}"
    status = {str(n["node-id"]): n["status"] for n in fed.supernodes()}
    assert all(status.get(i) == "online" for i in new_ids.values()), status
    assert all(status.get(i) == "unregistered" for i in old_ids.values()), status
    memo["rotation"] = {"restarts": restarts}

    # The negative control: the next generation rolled before its registration Job.
    mark = len(superlink_log(fed))
    wrong: dict[str, Job] = {}

    def register_late(created: list[Job]) -> None:
        wrong["registration"], wrong["revocation"] = registration_jobs(created)

    raw = with_generation(fed.rendered.raw, 2)
    try:
        fed.roll_out(raw, REFUSED_WAIT, before_roll=register_late)
    except NotReady as exc:
        stuck = str(exc)
    else:
        raise AssertionError("a SuperNode with an unregistered key became available: the scenario cannot fail")
    first = f"{base.NAME}-supernode-a-1"
    assert first in stuck and NOT_REGISTERED.search(superlink_log(fed)[mark:]), stuck[-2000:]
    assert fed.cluster.pod(first).container("supernode").restarts > 0, "the refused SuperNode did not exit"
    run_job(fed, wrong["registration"])
    fed.roll_out(raw, ROLLOUT_TIMEOUT)  # the controller goes on: the rest of the pool rolls
    run_job(fed, wrong["revocation"])
    fed.wait_ready(base.READY_TIMEOUT)
    fed.phase("negative control: rolled before registration, a-1 refused; registered, rolled, revoked", 0)


# A TLS client of the SuperLink trusting only `sys.argv[2]` (a CA file): "ok", or why it does not verify.
VERIFY = """
import socket, ssl, sys
host, port = sys.argv[1].rsplit(':', 1)
ctx = ssl.create_default_context(cafile=sys.argv[2])
try:
    with socket.create_connection((host, int(port)), timeout=10) as raw, ctx.wrap_socket(raw, server_hostname=host):
        print('ok')
except ssl.SSLCertVerificationError as exc:
    print(exc.verify_message)
"""


def verifies_with(fed: Federation, ca_pem: str, label: str) -> str:
    """Whether a client trusting only `ca_pem` verifies the SuperLink (from the CLI's pod)."""
    path = fed.cli_home / f"trust-{label}.pem"
    path.write_text(ca_pem)
    address = tomllib.loads(fed.outputs["flwrConfig"])["superlink"][fed.connection]["address"]
    res = fed.sh(["python", "-c", VERIFY, address, str(path)], timeout=30)
    assert res.returncode == 0, res.stdout + res.stderr
    return res.stdout.strip()


def with_cas(raw: dict[str, Any], signing: int, trusted: list[int]) -> dict[str, Any]:
    out = copy.deepcopy(raw)
    out.setdefault("tls", {})["generate"] = {"caGeneration": signing, "trustedCaGenerations": trusted}
    return out


def scenario_18(fed: Federation, memo: dict) -> None:
    fed.wait_ready(base.READY_TIMEOUT)
    pods = sorted(p.name for p in fed.supernodes_pods)
    ids, registrations = node_ids(fed, pods), fed.register_runs
    ca0 = fed.outputs["caCertificate"]
    began = time.monotonic()
    said: list[str] = []

    def step(signing: int, trusted: list[int], rolls: list[str]) -> None:
        t = time.monotonic()
        replaced = fed.roll_out(with_cas(fed.rendered.raw, signing, trusted), ROLLOUT_TIMEOUT)
        assert sorted(replaced) == sorted(rolls), f"CA step {signing}/{trusted} replaced {replaced}, expected {rolls}"
        fed.wait_ready(base.READY_TIMEOUT)
        assert fed.register_runs == registrations and node_ids(fed, pods) == ids, "nodes changed"
        result = fed.run_app(RUN_CONFIG)
        assert result.returncode == 0 and result.done and all(result.rounds), result.output[-2000:]
        bundle = fed.outputs["caCertificate"]
        assert verifies_with(fed, bundle, f"{signing}-{len(trusted)}") == "ok", "the clients' bundle fails"
        said.append(f"CA {signing}, trusted {trusted}: rolled {len(replaced)} pods, a run, {time.monotonic() - t:.0f}s")

    # 1. Trust CA 1 beside CA 0 (the server certificate still CA 0's): every pod takes the bundle.
    step(0, [0, 1], [fed.superlink.name, *pods])
    bundle = fed.outputs["caCertificate"]
    assert bundle.startswith(ca0.strip()) and bundle.count("BEGIN CERTIFICATE") == 2, bundle
    assert verifies_with(fed, ca0, "old-before") == "ok"
    # 2. Sign with CA 1: only the SuperLink rolls. A client pinned to CA 0 alone now fails, saying why
    # (the negative control: a site that kept the old `certificate.pem`).
    step(1, [0, 1], [fed.superlink.name])
    pinned = verifies_with(fed, ca0, "old-after")
    assert pinned == "unable to get local issuer certificate", pinned
    # 3. Drop CA 0.
    step(1, [1], [fed.superlink.name, *pods])
    assert (
        fed.outputs["caCertificate"].count("BEGIN CERTIFICATE") == 1 and ca0.strip() not in fed.outputs["caCertificate"]
    )
    fed.phase("; ".join(said) + f"; pinned to CA 0 after step 2: {pinned!r}", time.monotonic() - began)
