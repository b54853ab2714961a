"""Which Flower a container is checked as (checks/flower_version.py), one rule for every policy: the
image tag's version; with none (`:latest`, digest-only) the newest known, unless a flag the newest
rejects says otherwise. And the wording of both, and of `check`'s summary."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from flower_federation.checks.flower_version import NEWEST, RETIRED_FLAGS
from flower_federation.checks.model import MANDATORY, Violation
from flower_federation.checks.pods import SUPEREXEC, SUPERLINK, SUPERNODE
from flower_federation.checks.policies import run
from flower_federation.cli.main import main
from flower_federation.flower.versions import FlowerVersion
from tests.support.policy_objects import write

ROOT = Path(__file__).resolve().parent.parent
FLOWER_CLI = ROOT.parent / "shared" / "flower-cli"
LATEST = "flwr/superlink:latest"
CONTROL = "flower-control-api-internal"


def deployment(image: str, args: list[str], program: str = "superlink") -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": program, "namespace": "f"},
        "spec": {
            "selector": {"matchLabels": {"app": program}},
            "template": {
                "metadata": {"labels": {"app": program}},
                "spec": {"containers": [{"name": program, "image": image, "args": args}]},
            },
        },
    }


def load_balancer(port: int) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": "superlink", "namespace": "f"},
        "spec": {"type": "LoadBalancer", "selector": {"app": "superlink"}, "ports": [{"name": "fleet", "port": port}]},
    }


def policy(violations: list[Violation], name: str) -> list[Violation]:
    return [v for v in violations if v.policy == name]


def control(image: str, args: list[str], port: int) -> list[Violation]:
    """The Control API findings for a SuperLink with `--insecure` behind a LoadBalancer on `port`."""
    return policy(run([deployment(image, ["--insecure", *args]), load_balancer(port)]), CONTROL)


# --- the Control API: one era per checked version -------------------------------------------------


@pytest.mark.parametrize("image", [LATEST, "flwr/superlink", "flwr/superlink@sha256:" + "0" * 64])
def test_a_versionless_superlink_is_the_newest_flower_on_both_ports(image: str) -> None:
    # The newest Flower serves the Control API on --host/--port (default 127.0.0.1:8000): no 9093 at all.
    assert control(image, [], 9093) == []  # the bug: was reported as a gRPC-era Control port
    assert control(image, [], 8000) == []  # loopback by default: nothing to reach
    assert control(image, ["--host", "0.0.0.0"], 9093) == []
    (found,) = control(image, ["--host", "0.0.0.0"], 8000)
    assert (found.level, str(found.ref), found.path) == (MANDATORY, "Service f/superlink", "spec.ports[fleet]")
    assert f"no Flower version in the image reference `{image}`: checked as Flower {NEWEST}, the newest known)" in (
        found.message
    )
    assert "serves Fleet, Control and Runtime alike" in found.message
    (moved,) = control(image, ["--host", "0.0.0.0", "--port", "9093"], 9093)
    assert "port 9093" in moved.message


def test_a_flag_the_newest_still_accepts_says_nothing_about_the_era() -> None:
    # 1.42 accepts --control-api-address and --fleet-api-address (deprecated): still the newest, HTTP era.
    args = ["--control-api-address", "0.0.0.0:9093", "--fleet-api-address", "0.0.0.0:9092"]
    assert control(LATEST, args, 9093) == []
    assert len(control(LATEST, [*args, "--host", "0.0.0.0"], 8000)) == 1


def test_a_flag_the_newest_rejects_rules_it_out() -> None:
    # --exec-api-address: accepted up to 1.36 (whose Control API is its own gRPC port), rejected by 1.38 on.
    args = ["--exec-api-address", "0.0.0.0:9093", "--host", "0.0.0.0"]
    (found,) = control(LATEST, args, 9093)
    assert found.message.startswith("a LoadBalancer Service exposes the Control API port (9093)")
    assert "checked as Flower 1.36.0, the newest known that accepts --exec-api-address" in found.message
    assert control(LATEST, args, 8000) == []  # 1.36's port 8000 is the Runtime API only
    # A tag wins over the flags: the same command line on a named version is that version.
    assert control("flwr/superlink:1.42.0", args, 9093) == []
    assert len(control("flwr/superlink:1.42.0", args, 8000)) == 1


@pytest.mark.parametrize(("tag", "grpc"), [("1.32.1", True), ("1.36.0", True), ("1.38.0", False), ("1.41.0", False)])
def test_a_tagged_superlink_by_the_help_of_its_version(tag: str, grpc: bool) -> None:
    # Up to 1.36 the Control API is gRPC on 9093 whatever --host says; from 1.38 it is on --host/--port.
    image, args = f"flwr/superlink:{tag}", ["--host", "0.0.0.0"] if tag >= "1.36" else []
    assert bool(control(image, args, 9093)) is grpc
    assert bool(control(image, args, 8000)) is not grpc
    if not grpc:
        (found,) = control(image, args, 8000)
        shared = "serves Fleet, Control and Runtime alike" in found.message
        assert shared is (tag >= "1.40")  # 1.38-1.39 still serve Fleet on its own gRPC port
        assert "no Flower version" not in found.message


# --- the same rule in the other policies --------------------------------------------------------


def test_tls_message_names_the_reference_not_a_version_tag() -> None:
    (found,) = policy(run([deployment(LATEST, ["--insecure"])]), "flower-tls")
    assert found.message == (
        "--insecure: the SuperLink's Fleet and Control APIs are plaintext (no Flower version in the image "
        f"reference `{LATEST}`: checked as Flower {NEWEST}, the newest known, which has TLS)"
    )
    (tagged,) = policy(run([deployment("flwr/superlink:1.41.0", ["--insecure"])]), "flower-tls")
    assert tagged.message.endswith("(Flower 1.41.0 has TLS)")


def test_node_auth_by_the_checked_version() -> None:
    exposed = [load_balancer(8000)]
    newest = policy(run([deployment(LATEST, []), *exposed]), "flower-node-auth")
    assert len(newest) == 1 and "without --enable-supernode-auth" in newest[0].message
    assert policy(run([deployment(LATEST, ["--enable-supernode-auth"]), *exposed]), "flower-node-auth") == []
    # The newest still accepts the key list, deprecated: not node auth there, and no sign of an older Flower.
    listed = deployment(LATEST, ["--auth-list-public-keys", "/keys.csv"])
    assert len(policy(run([listed, *exposed]), "flower-node-auth")) == 1
    # A flag the newest rejects (1.20's --auth-superlink-private-key): checked as 1.20, where the list is node auth.
    old = deployment(LATEST, ["--auth-list-public-keys", "/keys.csv", "--auth-superlink-private-key", "/k"])
    assert policy(run([old, *exposed]), "flower-node-auth") == []


def test_runtime_api_tls_by_the_checked_version() -> None:
    # The newest Flower has TLS on the Runtime API: a versionless SuperNode is judged (it was skipped).
    args = ["--superlink", "fl:8000", "--root-certificates", "/ca.crt", "--host", "0.0.0.0"]
    for image, judged in [
        ("flwr/supernode:latest", True),
        ("flwr/supernode:1.41.0", True),
        ("flwr/supernode:1.38.0", False),
    ]:
        found = policy(run([deployment(image, args, "supernode")]), "flower-runtime-api-tls")
        assert bool(found) is judged, image
    # --grpc-rere is gone from 1.40 on: checked as 1.38, before the Runtime API's TLS.
    assert (
        policy(
            run([deployment("flwr/supernode:latest", [*args, "--grpc-rere"], "supernode")]), "flower-runtime-api-tls"
        )
        == []
    )


# --- the table, against Flower's real `--help` ----------------------------------------------------


def _flags(version: str, program: str) -> set[str]:
    text = (FLOWER_CLI / version / f"{program}.help.txt").read_text(encoding="utf-8")
    return set(re.findall(r"(?<![\w-])--[a-z][a-z-]+", text))


@pytest.mark.skipif(not FLOWER_CLI.is_dir(), reason="needs ../shared/flower-cli")
@pytest.mark.parametrize("program", [SUPERLINK, SUPERNODE, SUPEREXEC])
def test_retired_flags_are_read_off_the_help(program: str) -> None:
    held = sorted(
        (v for v in (FlowerVersion.parse(p.name) for p in FLOWER_CLI.iterdir()) if v is not None),
    )
    # Releases only: a pre-release (the 1.43 nightly) is no "newest Flower" an unversioned image pulls.
    held = [v for v in held if not v.is_prerelease]
    held = [v for v in held if (FLOWER_CLI / str(v) / f"{program}.help.txt").exists()]
    assert held[-1] == NEWEST
    every = {v: _flags(str(v), program) for v in held}
    expected = {f: max(v for v in held if f in every[v]) for f in set().union(*every.values()) - every[NEWEST]}
    assert RETIRED_FLAGS[program] == expected


# --- the summary ----------------------------------------------------------------------------------


def test_the_summary_counts_in_the_singular_too(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    one = write(tmp_path / "one.yaml", yaml.safe_dump(deployment("flwr/superlink:1.42.0", ["--insecure"])))
    assert main(["check", str(one)]) == 1
    last = capsys.readouterr().out.splitlines()[-1]
    assert re.fullmatch(r"check: \d+ mandatory and \d+ advisory violations \(10 policies, 1 object\)", last)
    two = write(tmp_path / "two.yaml", yaml.safe_dump_all([deployment("flwr/superlink:1.42.0", []), load_balancer(80)]))
    main(["check", str(two)])
    assert capsys.readouterr().out.splitlines()[-1].endswith("(10 policies, 2 objects)")
