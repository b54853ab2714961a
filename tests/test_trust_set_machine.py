"""Issue 32 part 4, model-based: the trusted set is exactly what the config says, always, against a real
Flower 1.42.0 SuperLink.

A hypothesis state machine edits a hub's `sites` (add a site, remove one, re-add a removed one with its old
keys, rotate a key, list another site's key again, smuggle a second key behind a line or Unicode separator)
and after each edit emulates `pulumi up`: the config is validated (`load_plan`, as every render is) and, if
accepted, the trusted keys file is built by the functions the shell fills the ConfigMap with
(`registration.trusted_keys_text(trusted_slots(...))`), then the rendered registration Job's container
runs, then the revocation Job's (tests/support/registration_job.py: real script, real `flwr` connection
config and CA, against the live SuperLink). After each step, by the SuperLink's state file:

- either validation refused the edit and nothing changed on the SuperLink;
- or Flower's registered keys correspond one to one to the config's key entries (every entry registered,
  no key registered that no entry lists, one entry per key), except keys Flower revoked before, which it
  never registers again: those (stale) are reported by both Jobs, and the revocation Job fails
  (EXIT_REFUSED) only after it revoked every key no longer listed.

The SuperLink is shared by the examples (its start is the slow part); keys are never reused across examples
(a counter), and each example starts from a hub with one new site, whose first `up` revokes the previous
example's keys. Negative controls: the same machine with the script's former `splitlines()` and the former
key check (only "\\n" refused), and with the duplicate check removed, fails."""

from __future__ import annotations

import contextlib
import itertools
import re
import sqlite3
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Optional

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec
from hypothesis import HealthCheck, Phase, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

from flower_federation.builders import registration
from flower_federation.builders.registration import REVOKE
from flower_federation.config.errors import ConfigError
from flower_federation.flower import public_keys
from flower_federation.plan import load_plan
from flower_federation.plan import sites as plan_sites
from tests.support.flower import HTTP_ERA
from tests.support.live_flower import LiveSuperLink, live_superlink
from tests.support.registration_job import JobPod, job_pod
from tests.support.stacks import base

pytestmark = pytest.mark.live

# Bounded: each `up` is two Job runs (each a forked process and its Control API calls); see the module docstring.
MACHINE = settings(
    max_examples=5,
    stateful_step_count=6,
    derandomize=True,
    deadline=None,
    suppress_health_check=list(HealthCheck),
    database=None,
)
SEPARATORS = list(public_keys.LINE_BREAKS.replace("\n", ""))
_SERIAL = itertools.count(1)


def fresh_key(comment: str) -> tuple[str, bytes]:
    """(OpenSSH line, key bytes as Flower stores them) of a key never used before in this process:
    derived from a counter, so a run is deterministic."""
    key = ec.derive_private_key(next(_SERIAL) + 10**6, ec.SECP384R1()).public_key()
    line = key.public_bytes(serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH).decode()
    pem = key.public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
    return f"{line} {comment}", pem


def flower_key(line: str) -> bytes:
    # The entry's own key: its first two fields (str.split() splits on every separator a smuggled line holds).
    key = serialization.load_ssh_public_key(" ".join(line.split()[:2]).encode())
    return key.public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)


def state(live: LiveSuperLink) -> dict[bytes, str]:
    """{public key: status} of every node in the SuperLink's state file."""
    with contextlib.closing(sqlite3.connect(f"file:{live.database}?mode=ro", uri=True, timeout=5)) as db:
        return {bytes(key): status for key, status in db.execute("SELECT public_key, status FROM node")}


def hub(sites: dict[str, list[str]]) -> dict[str, Any]:
    raw = base(role="hub", nodeAuth={"enabled": True}, superlink={"ingress": {"host": "fl.example.org"}})
    raw["supernodes"] = {}
    raw["sites"] = [{"name": name, "publicKeys": list(keys)} for name, keys in sites.items() if keys]
    return raw


class Cluster:
    """The live SuperLink and the rendered Jobs' containers, shared by the examples. Each Job's script
    runs forked from a process that imported flwr once (JobPod.forked): the same script file, argv, env
    and exit code, a process of its own, without a `python` start and flwr's import per run (about 1 CPU-s
    each, some 200 runs here); the rendered command as a real subprocess is
    tests/test_flower_live_registration.py's."""

    def __init__(self, live: LiveSuperLink):
        self.live = live
        self.register: JobPod = job_pod(live, "machine-registration").forked()
        self.revoke: JobPod = job_pod(live, "machine-revocation", phase=REVOKE).forked()

    def close(self) -> None:
        for job in (self.register, self.revoke):
            assert job.server is not None
            job.server.close()


class TrustedSet(RuleBasedStateMachine):
    cluster: Cluster
    # What the examples did, over a run: the test asserts the machine reached each kind of `up`.
    seen: Counter[str] = Counter()

    def __init__(self) -> None:
        super().__init__()
        self.sites: dict[str, list[str]] = {}  # the config: site -> its key lines
        self.removed: dict[str, list[str]] = {}  # sites removed, with the keys they had
        self.revoked: set[bytes] = set()  # keys Flower revoked (never registered again)
        self.names = (f"s{i}" for i in itertools.count())
        self.outcome: Optional[str] = None
        self.before: dict[bytes, str] = {}

    # --- emulated `pulumi up` ---------------------------------------------------------------

    def up(self, sites: dict[str, list[str]]) -> None:
        """Validate the edited config; if accepted, run the Jobs and make it the config."""
        self.before = state(self.cluster.live)
        try:
            plan = load_plan(hub(sites), "dev")
        except ConfigError:
            self.outcome = "refused"
            self.seen["refused"] += 1
            return
        # Split as the script does, on "\n" alone: the harness must not split a smuggled line itself.
        lines = registration.trusted_keys_text(registration.trusted_slots(plan, {})).split("\n")[:-1]
        self.cluster.register.trust(lines)
        registered = self.cluster.register.run()
        assert registered.returncode == 0, registered.stdout + registered.stderr
        self.cluster.revoke.trust(lines)
        revoked = self.cluster.revoke.run()
        stale = {flower_key(line) for keys in sites.values() for line in keys} & self.revoked
        assert revoked.returncode == (registration.EXIT_REFUSED if stale else 0), revoked.stdout + revoked.stderr
        for res in (registered, revoked):
            assert ("node-registration: STALE: trusted keys revoked earlier" in res.stdout) == bool(stale), res.stdout
        self.sites = {name: list(keys) for name, keys in sites.items() if keys}
        self.outcome = "applied"
        self.seen["applied"] += 1
        self.seen["stale"] += bool(stale)

    @initialize()
    def start(self) -> None:
        # One site to start from, so that a removal and a re-admission fit in a few steps; the previous
        # example's keys are revoked in this first `up`.
        name = next(self.names)
        self.up({name: [fresh_key(f"{name}/ward/0")[0]]})
        self.revoked |= {key for key, status in state(self.cluster.live).items() if status == "unregistered"}

    # --- edits ------------------------------------------------------------------------------

    @rule(keys=st.integers(1, 2))
    def add_site(self, keys: int) -> None:
        name = next(self.names)
        self.up({**self.sites, name: [fresh_key(f"{name}/ward/{i}")[0] for i in range(keys)]})

    @precondition(lambda self: self.sites)
    @rule(data=st.data())
    def remove_site(self, data: st.DataObject) -> None:
        name = data.draw(st.sampled_from(sorted(self.sites)))
        keys = self.sites[name]
        self.up({n: k for n, k in self.sites.items() if n != name})
        if self.outcome == "applied":
            self.removed[name] = keys

    @precondition(lambda self: self.sites)
    @rule(data=st.data())
    def remove_and_readmit_site(self, data: st.DataObject) -> None:
        """Two `up`s: a site removed, then admitted again with the same keys, which Flower revoked (stale)."""
        name = data.draw(st.sampled_from(sorted(self.sites)))
        keys = self.sites[name]
        self.up({n: k for n, k in self.sites.items() if n != name})
        self.flower_admits_exactly_the_config()
        self.up({**self.sites, name: keys})

    @precondition(lambda self: self.removed)
    @rule(data=st.data())
    def re_add_site(self, data: st.DataObject) -> None:
        """The same keys again: Flower revoked them, so they are stale (reported, never registered)."""
        name = data.draw(st.sampled_from(sorted(self.removed)))
        self.up({**self.sites, name: self.removed.pop(name)})

    @precondition(lambda self: self.sites)
    @rule(data=st.data())
    def rotate_key(self, data: st.DataObject) -> None:
        name = data.draw(st.sampled_from(sorted(self.sites)))
        keys = list(self.sites[name])
        keys[data.draw(st.integers(0, len(keys) - 1))] = fresh_key(f"{name}/ward/rotated")[0]
        self.up({**self.sites, name: keys})

    @precondition(lambda self: self.sites)
    @rule(data=st.data())
    def duplicate_key(self, data: st.DataObject) -> None:
        """Another site (or a new one) lists a key some site holds."""
        owner = data.draw(st.sampled_from(sorted(self.sites)))
        key = data.draw(st.sampled_from(self.sites[owner]))
        other = data.draw(st.sampled_from([*sorted(self.sites), next(self.names)]))
        self.up({**self.sites, other: [*self.sites.get(other, []), key]})

    @rule(sep=st.sampled_from(SEPARATORS))
    def smuggle_key(self, sep: str) -> None:
        """A new site whose one key hides a second line: another key, labelled as another site's."""
        name = next(self.names)
        hidden = fresh_key("victim/ward/0")[0]
        self.up({**self.sites, name: [f"{fresh_key(f'{name}/ward/0')[0]}{sep}{hidden}"]})

    # --- the promise --------------------------------------------------------------------------

    @invariant()
    def flower_admits_exactly_the_config(self) -> None:
        now = state(self.cluster.live)
        if self.outcome == "refused":
            assert now == self.before, "a refused edit changed the SuperLink"
        registered = sorted(key for key, status in now.items() if status != "unregistered")
        entries = sorted(flower_key(line) for keys in self.sites.values() for line in keys)
        expected = [key for key in entries if key not in self.revoked]
        # One to one: each entry one registered node, nothing else registered (a merged duplicate, a smuggled
        # key or a key no longer listed fails this).
        assert registered == expected, f"Flower's registered keys ({len(registered)}) != the config's ({len(expected)})"
        self.revoked |= {key for key, status in now.items() if status == "unregistered"}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    with live_superlink(HTTP_ERA, tmp_path_factory.mktemp("trust-machine")) as live:
        machine = Cluster(live)
        try:
            yield machine
        finally:
            machine.close()


def run_machine(cluster: Cluster, machine_settings: settings = MACHINE) -> Counter[str]:
    TrustedSet.cluster = cluster
    TrustedSet.seen = Counter()
    run_state_machine_as_test(TrustedSet, settings=machine_settings)
    return TrustedSet.seen


def test_flower_admits_exactly_the_configs_trusted_set_after_every_up(cluster: Cluster) -> None:
    seen = run_machine(cluster)
    # Not vacuous: edits were applied, refused, and some trusted a key Flower had revoked.
    assert seen["applied"] and seen["refused"] and seen["stale"], seen


# The negative controls: a few examples suffice for the machine to reach the edit that breaks the promise.
# No shrinking: the failure is the point, not its smallest form.
CONTROL = settings(MACHINE, max_examples=6, phases=[Phase.explicit, Phase.generate])


def _old_script(cluster: Cluster) -> Iterator[None]:
    """The 048b1d8 script's reading of the keys file: read_text() and splitlines()."""
    paths = [Path(job.argv[1]) for job in (cluster.register, cluster.revoke)]
    texts = [path.read_text() for path in paths]
    for path, text in zip(paths, texts, strict=True):
        old = text.replace('path.read_bytes().decode().split("\\n")', "path.read_text().splitlines()")
        assert old != text
        path.chmod(0o644)
        path.write_text(old)
    try:
        yield
    finally:
        for path, text in zip(paths, texts, strict=True):
            path.write_text(text)


def test_control_the_machine_catches_a_smuggled_key_with_the_former_check_and_script(
    cluster: Cluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The former key check refused "\n" only.
    monkeypatch.setattr(public_keys, "OPENSSH_PUBLIC_KEY_LINE", re.compile(r"[^\n]*\n?"))
    with contextlib.contextmanager(_old_script)(cluster), pytest.raises(AssertionError, match="registered keys"):
        run_machine(cluster, CONTROL)
    monkeypatch.undo()
    run_machine(cluster, settings(MACHINE, max_examples=1))  # the next example starts clean again


def test_control_the_machine_catches_a_merged_duplicate(cluster: Cluster, monkeypatch: pytest.MonkeyPatch) -> None:
    # The former merge: no two keys compare equal, so a key listed twice is trusted once, silently.
    serial = itertools.count()
    monkeypatch.setattr(plan_sites, "key_material", lambda line: str(next(serial)).encode())
    with pytest.raises(AssertionError, match="registered keys"):
        run_machine(cluster, CONTROL)
    monkeypatch.undo()
    run_machine(cluster, settings(MACHINE, max_examples=1))
