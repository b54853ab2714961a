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
fails the Job at once, saying why. Negative control: a CA that did not sign the
SuperLink's certificate fails the Job at its (shortened) deadline with `FAILED:`."""

from __future__ import annotations

import functools
import re
import subprocess
import time
import tomllib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

import pytest

from flower_federation.builders.registration import REGISTER, REVOKE
from tests.support.flower import GRPC_ERA, HTTP_ERA, venv_python
from tests.support.kube import container_command, container_env, pod_for
from tests.support.live_flower import (
    LIVE_STACKS,
    READY_TIMEOUT,
    VERSIONS,
    LiveSuperLink,
    cli_home,
    list_nodes,
    live_superlink,
    localize,
    localize_path,
    materialize,
    node_id_of,
    rewrite,
    start_supernode,
    wait_online,
)
from tests.support.processes import PortMap, process_env, run_bounded
from tests.support.real_render import check_mounted, render_fresh

# Real Flower servers waited for against wall-clock deadlines: `make test` runs these
# beside the e2e tests, at normal priority, and the rest niced (Makefile).
pytestmark = pytest.mark.live

# The Job's deadline (rendered: 540 s), shortened: a ready SuperLink needs one attempt.
TIMEOUT_SECONDS = 20
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


@dataclass
class JobPod:
    """The registration Job's container, runnable here."""

    root: Path
    argv: list[str]
    env: dict[str, str]
    keys_file: Path  # the materialized trusted-keys file

    def run(self, timeout_seconds: float = TIMEOUT_SECONDS) -> subprocess.CompletedProcess:
        env = {**self.env, "REGISTRATION_TIMEOUT_SECONDS": str(timeout_seconds)}
        return run_bounded(self.argv, env, timeout=timeout_seconds + 30, cwd=Path(self.env["HOME"]))

    def trust(self, lines: list[str]) -> None:
        """What a new key set does to the ConfigMap's trusted-keys file."""
        rewrite(self.keys_file, "".join(f"{line}\n" for line in lines))


def job_pod(live: LiveSuperLink, label: str, ca_text: Optional[str] = None, phase: str = REGISTER) -> JobPod:
    """The rendered registration (or revocation) Job's container under `live.workdir/label`:
    its files materialized, its `flwr` config dialing the live SuperLink through the
    mounted CA (or, for the negative control, a CA file holding `ca_text`)."""
    r = live.r
    registration, revocation = (w for w in r.workloads() if w["kind"] == "Job")
    assert registration["metadata"]["name"] == r.outputs["nodeAuth"]["registrationJob"]
    job = registration if phase == REGISTER else revocation
    (c,) = job["spec"]["template"]["spec"]["containers"]
    pod = pod_for(job)
    root = live.workdir / label
    files = materialize(r, job, c, root)

    argv = container_command(c, pod, entrypoint=[], lookup=r.data)
    assert argv[0] == "python", argv  # the SuperLink image's python
    script, connection, config, keys, job_phase = argv[1:]
    assert job_phase == phase, argv
    cm = r.plan.names.node_registration
    check_mounted(r, files, script, "ConfigMap", cm, "register_nodes.py")
    check_mounted(r, files, config, "ConfigMap", cm, "config.toml")
    check_mounted(r, files, keys, "ConfigMap", cm, "trusted-keys")

    rendered = r.data("ConfigMap", cm)["config.toml"]
    doc = tomllib.loads(rendered)
    assert doc["superlink"]["default"] == connection
    ca = doc["superlink"][connection]["root-certificates"]
    check_mounted(r, files, ca, "Secret", r.plan.trust.ca_secret, "ca.crt")
    ca_local = Path(localize_path(ca, c, root))
    if ca_text is not None:
        rewrite(ca_local, ca_text)
    rewrite(Path(localize_path(config, c, root)), live.localize_connection(rendered, ca_local))

    env = process_env(live.version, root / "app")
    rendered_env = container_env(c, pod, r.data)
    assert set(rendered_env) == {"FLWR_TELEMETRY_ENABLED", "FLWR_HOME", "REGISTRATION_TIMEOUT_SECONDS"}, rendered_env
    env.update({k: localize_path(v, c, root) for k, v in rendered_env.items()})
    assert env["FLWR_HOME"].startswith(f"{root}/"), env["FLWR_HOME"]
    argv = [str(venv_python(live.version)), *localize(argv[1:], c, root, PortMap())]
    return JobPod(root, argv, env, Path(localize_path(keys, c, root)))


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
    def retrust(self) -> Step:
        _ = self.revoke
        self.job.trust(self.lines)
        res = self.job.run()
        return res, self.nodes()


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
    assert node_id_of(live, revoked) is None, log
    assert {n["node-id"]: n["status"] for n in nodes} == {
        scenario.ids["sec/alpha/1"]: "online",
        scenario.ids["sec/alpha/2"]: "unregistered",
        scenario.ids["sec/alpha/0"]: "registered",
        scenario.ids["sec/beta/0"]: "registered",
    }, nodes


def test_re_trusting_a_revoked_key_fails_the_job_at_once(scenario):
    """Flower keeps an unregistered node's key and never registers it again: the Job
    says so and fails without retrying until its deadline."""
    res, nodes = scenario.retrust
    assert res.returncode == 3, res.stdout + res.stderr  # EXIT_REFUSED: the Job's podFailurePolicy fails at once
    node = scenario.ids["sec/alpha/2"]
    [refused] = messages(res)
    assert refused.startswith(f"REFUSED: trusted keys revoked earlier (nodes {node}): sec/alpha/2. "), refused
    assert "give each of these SuperNodes a new key pair" in refused, refused
    # No retry before the refusal: the one message above is the whole log.
    # Nothing else changed (alpha-1 may be online by now).
    assert set(nodes) == set(scenario.ids.values()) and nodes[node] == "unregistered", nodes
    assert {s for i, s in nodes.items() if i != node} <= {"registered", "online"}, nodes


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
