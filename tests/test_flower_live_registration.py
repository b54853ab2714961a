"""Declarative node registration against a real SuperLink (both dialects): the rendered
registration Job's container run as the kubelet would run it (its command and args with
the Flower venv's python as the image's `python`; the ConfigMap's files and the CA at
their mount paths under a tmp root; its env with FLWR_HOME localized; in the ConfigMap's
`flwr` config only the address and the CA path rewritten), against the rendered SuperLink
of the same render (tests/support/live_flower.py), checked with the real `flwr` CLI.

With the real Flower: the first run registers every trusted key; a second run changes
nothing; the registration Job of a set without one key revokes nothing, the revocation
Job then revokes that node and keeps the others (and registers nothing); a real SuperNode
with a still-trusted key comes online as the node its key was registered as, while the
revoked one is refused; re-trusting the revoked key (which Flower never registers again)
is reported by the registration Job and fails the revocation Job at once, saying why, only
after it revoked the key dropped in the same set. Negative control: a CA that did not sign the
SuperLink's certificate fails the Job at its (shortened) deadline with `FAILED:`.

A hub's sharded Job (its keys in SHARDS files, tests/support/registration_job.py), against a SuperLink of
its own (Flower 1.42.0): 200 keys over the 16 shards end exactly registered, by the SuperLink's state file
and the Control calls it logged; the Job again and the revocation Job make no call but the listing."""

from __future__ import annotations

import contextlib
import functools
import re
import sqlite3
import subprocess
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from flower_federation.builders import registration
from flower_federation.builders.registration import REVOKE
from tests.support import hub_scale
from tests.support.flower import GRPC_ERA, HTTP_ERA
from tests.support.kube import termination_message
from tests.support.live_flower import (
    LIVE_STACKS,
    READY_TIMEOUT,
    VERSIONS,
    LiveSuperLink,
    cli_home,
    list_nodes,
    live_superlink,
    node_id_of,
    start_supernode,
    wait_online,
)
from tests.support.real_render import render_fresh
from tests.support.registration_job import job_pod

# Real Flower servers waited for against wall-clock deadlines: `make test` runs these
# beside the e2e tests, at normal priority, and the rest niced (Makefile).
pytestmark = pytest.mark.live

# The negative control's deadline: the script gives up when its next retry would pass it.
# Long enough that a slow first attempt (importing flwr on a loaded machine) still leaves
# room for the retry the test asserts; with a ready SuperLink and the wrong CA every
# attempt fails at its TLS handshake.
WRONG_CA_TIMEOUT_SECONDS = 12
LOG = re.compile(r"^node-registration: (.*)$", re.MULTILINE)
DONE = re.compile(r"done \((?:register|revoke)\): (\d+) trusted keys; (\d+) registered, (\d+) revoked, (\d+) unchanged")
REGISTERED = re.compile(r"registered (\S+) as node (\d+)")
REVOKED = re.compile(r"revoked node (\d+) \(its key is no longer trusted\)")
RETRY = re.compile(r"Control API call failed \((.*)\); retrying in \d+s")
# Why a SuperNode whose key was revoked does not get in, in each Flower's words.
REFUSED = {
    GRPC_ERA: "No SuperNode found with the given public key.",
    HTTP_ERA: "Failed to activate SuperNode.",
}


def messages(res: subprocess.CompletedProcess) -> list[str]:
    return LOG.findall(res.stdout)


def summary(res: subprocess.CompletedProcess) -> tuple[int, ...]:
    """(trusted, registered, revoked, unchanged) from the run's last line."""
    done = DONE.fullmatch(messages(res)[-1])
    assert done, res.stdout + res.stderr
    return tuple(int(g) for g in done.groups())


def matching(pattern: re.Pattern[str], res: subprocess.CompletedProcess) -> list[tuple[str, ...]]:
    return [m.groups() for m in map(pattern.fullmatch, messages(res)) if m]


Step = tuple[subprocess.CompletedProcess, dict[str, str]]  # the Job's run, then node ID -> status


class Scenario:
    """One SuperLink's registration history: each step runs once, in order, on demand
    (so each test also runs alone), followed by the real `flwr supernode list`."""

    def __init__(self, live: LiveSuperLink):
        self.live = live
        self.job = job_pod(live, "registration-job")
        self.revocation = job_pod(live, "revocation-job", phase=REVOKE)
        self.cli, self.cli_env = cli_home(live)
        self.lines = self.job.keys_file.read_text().splitlines()
        self.dropped = next(line for line in self.lines if line.endswith(" sec/alpha/2"))  # no longer trusted

    def nodes(self) -> dict[str, str]:
        return {n["node-id"]: n["status"] for n in list_nodes(self.live, self.cli, self.cli_env)}

    def _run(self) -> Step:
        res = self.job.run()
        return res, self.nodes()

    @functools.cached_property
    def first(self) -> Step:
        # The SuperLink is fresh: the Job makes the first Control API call.
        return self._run()

    @functools.cached_property
    def ids(self) -> dict[str, str]:
        """Key comment (pool/slot) -> node ID, as the first run logged them."""
        return dict(matching(REGISTERED, self.first[0]))

    @functools.cached_property
    def second(self) -> Step:
        _ = self.first
        return self._run()

    @functools.cached_property
    def register_without_one(self) -> Step:
        """The registration Job of a set without one key: it revokes nothing (the pools have
        not rolled yet)."""
        _ = self.second
        self.job.trust([line for line in self.lines if line != self.dropped])
        return self._run()

    @functools.cached_property
    def revoke(self) -> Step:
        """Then the revocation Job of that set."""
        _ = self.register_without_one
        self.revocation.trust([line for line in self.lines if line != self.dropped])
        res = self.revocation.run()
        return res, self.nodes()

    @functools.cached_property
    def retrust(self) -> tuple[Step, Step]:
        """A set that trusts the revoked key again and drops another site's key (sec/beta/0), in one `up`:
        the registration Job, then the revocation Job."""
        _ = self.revoke
        kept = [line for line in self.lines if not line.endswith(" sec/beta/0")]
        self.job.trust(kept)
        registered = self.job.run()
        nodes = self.nodes()
        self.revocation.trust(kept)
        revoked = self.revocation.run()
        return (registered, nodes), (revoked, self.nodes())


@pytest.fixture(scope="module", params=VERSIONS)
def live(request, tmp_path_factory) -> Iterator[LiveSuperLink]:
    with live_superlink(request.param, tmp_path_factory.mktemp(f"registration-{request.param}")) as link:
        yield link


@pytest.fixture(scope="module")
def scenario(live) -> Scenario:
    return Scenario(live)


def test_the_first_run_registers_every_trusted_key(scenario):
    res, nodes = scenario.first
    assert res.returncode == 0, res.stdout + res.stderr
    assert summary(res) == (4, 4, 0, 0), res.stdout
    assert len(messages(res)) == 5, res.stdout  # four registrations, the summary: no retry
    comments = sorted(line.split()[-1] for line in scenario.lines)
    assert sorted(scenario.ids) == comments == ["sec/alpha/0", "sec/alpha/1", "sec/alpha/2", "sec/beta/0"]
    assert nodes == dict.fromkeys(scenario.ids.values(), "registered"), nodes


def test_a_second_run_changes_nothing(scenario):
    res, nodes = scenario.second
    assert res.returncode == 0, res.stdout + res.stderr
    assert summary(res) == (4, 0, 0, 4), res.stdout
    assert messages(res) == [messages(res)[-1]], res.stdout  # the summary only
    assert nodes == scenario.first[1]


def test_the_registration_job_revokes_nothing_and_the_revocation_job_registers_nothing(scenario):
    res, nodes = scenario.register_without_one
    assert res.returncode == 0, res.stdout + res.stderr
    assert summary(res) == (3, 0, 0, 3), res.stdout
    assert nodes == scenario.first[1], "the registration Job revoked a node"
    scenario.revocation.trust(scenario.lines)  # every key trusted: nothing to revoke, and nothing registered
    res = scenario.revocation.run()
    assert res.returncode == 0 and summary(res)[1:3] == (0, 0), res.stdout


def test_a_key_no_longer_trusted_is_revoked(scenario):
    res, nodes = scenario.revoke
    assert res.returncode == 0, res.stdout + res.stderr
    assert summary(res)[:3] == (3, 0, 1), res.stdout
    dropped = scenario.ids["sec/alpha/2"]
    assert matching(REVOKED, res) == [(dropped,)], res.stdout
    assert nodes == {i: "unregistered" if i == dropped else "registered" for i in scenario.ids.values()}, nodes


def test_a_trusted_supernode_comes_online_and_the_revoked_one_is_refused(scenario, flower):
    live = scenario.live
    _ = scenario.revoke
    trusted = start_supernode(live, "alpha", 1)
    revoked = start_supernode(live, "alpha", 2)
    nodes = wait_online(live, trusted, scenario.cli, scenario.cli_env)
    # Online as the node its key was registered as.
    assert node_id_of(live, trusted) == scenario.ids["sec/alpha/1"]
    assert flower[live.version].grpc_health(trusted.health_address()) == "SERVING"
    deadline = time.monotonic() + READY_TIMEOUT
    while revoked.proc.poll() is None:
        assert time.monotonic() < deadline, f"the revoked SuperNode still runs:\n{live.procs.log(revoked.label)}"
        time.sleep(0.2)
    log = live.procs.log(revoked.label)
    assert revoked.proc.returncode != 0 and REFUSED[live.version] in log, log
    # What a site sees without reading logs (issue 34 part 3): with `supernodeLogTail`, the SuperNode container's
    # FallbackToLogsOnError keeps the log's tail as its termination message, and Flower's line is in it.
    assert REFUSED[live.version] in termination_message(log), log
    assert node_id_of(live, revoked) is None, log
    assert {n["node-id"]: n["status"] for n in nodes} == {
        scenario.ids["sec/alpha/1"]: "online",
        scenario.ids["sec/alpha/2"]: "unregistered",
        scenario.ids["sec/alpha/0"]: "registered",
        scenario.ids["sec/beta/0"]: "registered",
    }, nodes


def test_a_re_trusted_revoked_key_is_reported_and_never_blocks_a_revocation(scenario):
    """Flower keeps an unregistered node's key and never registers it again. Issue 32 (c): on 048b1d8
    the registration Job exited at once on such a key, and the revocation Job (which waits for it) never
    ran, so a site removed in the same `up` stayed admitted. Now the registration Job reports the stale
    key and succeeds; the revocation Job revokes the removed key first, then fails at once saying why."""
    (res, nodes), (revoked, after) = scenario.retrust
    node, beta = scenario.ids["sec/alpha/2"], scenario.ids["sec/beta/0"]
    stale = f"STALE: trusted keys revoked earlier (nodes {node}): sec/alpha/2. "
    assert res.returncode == 0, res.stdout + res.stderr
    *reported, done = messages(res)
    assert [m[: len(stale)] for m in reported] == [stale], res.stdout  # no retry, no registration
    assert "give each of these SuperNodes a new key pair" in reported[0], reported
    assert summary(res) == (3, 0, 0, 2), res.stdout  # 3 trusted: 2 unchanged, the stale one not counted
    assert nodes[node] == "unregistered" and nodes[beta] in ("registered", "online"), nodes

    assert revoked.returncode == 3, revoked.stdout + revoked.stderr  # EXIT_REFUSED: podFailurePolicy fails at once
    lines = messages(revoked)
    assert lines[0] == f"revoked node {beta} (its key is no longer trusted)", revoked.stdout  # revoked first
    assert lines[1].startswith(stale) and lines[2].startswith(f"REFUSED: {stale[7:]}"), revoked.stdout
    assert len(lines) == 3, revoked.stdout  # no retry
    assert after[beta] == "unregistered" and after[node] == "unregistered", after
    assert {s for i, s in after.items() if i not in (node, beta)} <= {"registered", "online"}, after


def test_a_ca_that_did_not_sign_the_superlink_certificate_fails_the_job(live):
    """Negative control: the same Job with another deployment's CA at the CA's path
    retries, then fails at its deadline."""
    other = render_fresh(LIVE_STACKS[live.version]).outputs["caCertificate"]
    assert other != live.r.outputs["caCertificate"]
    job = job_pod(live, "registration-job-wrong-ca", ca_text=other)
    res = job.run(timeout_seconds=WRONG_CA_TIMEOUT_SECONDS)
    assert res.returncode == 1, res.stdout + res.stderr
    *retries, failed = messages(res)
    assert retries and all(RETRY.fullmatch(m) for m in retries), res.stdout
    assert failed.startswith("FAILED: the SuperLink's Control API did not accept the registration: "), res.stdout
    verify = re.compile("certificate verify failed|CERTIFICATE_VERIFY_FAILED|certificate signature failure", re.I)
    assert verify.search(failed), failed


# A hub's trusted keys past SINGLE_BUDGET go to SHARDS files (builders/registration.py); 200 keys over the 16
# shards keep this fast while every shard holds keys. The newest tested Flower only.
SHARDED_KEYS = 200
# The Control API calls the SuperLink served, as it logs each (not the ones it logs on success:
# "[ControlServicer.RegisterNode] Created node_id=...").
SERVED = re.compile(r"(?<!\[)ControlServicer\.(\w+)\s*$", re.MULTILINE)


@pytest.fixture(scope="module")
def hub_link(tmp_path_factory) -> Iterator[LiveSuperLink]:
    with live_superlink(HTTP_ERA, tmp_path_factory.mktemp("registration-shards")) as link:
        yield link


def served(live: LiveSuperLink) -> Counter[str]:
    return Counter(SERVED.findall(live.procs.log("superlink")))


def state_keys(live: LiveSuperLink) -> dict[bytes, str]:
    """{public key: status} of every node in the SuperLink's state file."""
    with contextlib.closing(sqlite3.connect(f"file:{live.database}?mode=ro", uri=True, timeout=5)) as db:
        return {bytes(key): status for key, status in db.execute("SELECT public_key, status FROM node")}


def flower_bytes(lines: list[str]) -> set[bytes]:
    """The keys as Flower stores them (flwr.supercore.primitives.asymmetric.public_key_to_bytes)."""
    from cryptography.hazmat.primitives import serialization

    pem, spki = serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    return {serialization.load_ssh_public_key(line.encode()).public_bytes(pem, spki) for line in lines}


def test_over_shards_the_job_registers_exactly_the_trusted_set_and_a_re_run_calls_nothing(hub_link):
    """The sharded Job (a hub's thousands of keys in SHARDS files) against the real SuperLink: the
    registered keys are exactly the union of the shards, by the SuperLink's state and the calls it
    served; the same Job again, and the revocation Job of the same set, make no call but the listing."""
    live = hub_link
    lines = [key for site in hub_scale.site_keys(SHARDED_KEYS // 10, 10) for key in site]
    job = job_pod(live, "registration-job-shards").sharded(lines)
    revocation = job_pod(live, "revocation-job-shards", phase=REVOKE).sharded(lines)
    shards = job.argv[4:-1]  # python, the script, the connection, its config, the shards, the phase
    assert [s.rsplit("/", 1)[1] for s in shards] == [registration.shard_file(i) for i in range(registration.SHARDS)]
    sizes = [len(Path(s).read_text().splitlines()) for s in shards]
    assert sum(sizes) == SHARDED_KEYS and min(sizes) > 0, sizes  # every shard holds keys
    assert state_keys(live) == {}  # a fresh SuperLink

    before = served(live)
    res = job.run()
    first = served(live) - before
    assert res.returncode == 0, res.stdout + res.stderr
    assert first == {"ListNodes": 1, "RegisterNode": SHARDED_KEYS}, first
    assert state_keys(live) == dict.fromkeys(flower_bytes(lines), "registered")
    cli, env = cli_home(live)
    nodes = {n["node-id"]: n["status"] for n in list_nodes(live, cli, env)}
    assert sorted(nodes) == sorted(i for _, i in matching(REGISTERED, res))
    assert set(nodes.values()) == {"registered"}, nodes

    before = served(live)
    again, revoked = job.run(), revocation.run()
    assert again.returncode == 0 and revoked.returncode == 0, again.stdout + revoked.stdout
    assert served(live) - before == {"ListNodes": 2}, served(live) - before  # nothing registered or revoked
    assert state_keys(live) == dict.fromkeys(flower_bytes(lines), "registered")
