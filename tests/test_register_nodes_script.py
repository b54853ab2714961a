"""The node-registration script's decisions, without a SuperLink (it imports Flower only
inside the functions that call it): which nodes to revoke and which keys to register,
the refusal of a key Flower revoked before (it never registers one again), how failed
calls are logged, and the exit code the Job's podFailurePolicy fails the Job on. The
e2e sites scenario runs it against real SuperLinks (tests/e2e/sites.py)."""

from __future__ import annotations

import importlib.util
from types import ModuleType

import pytest

from flower_federation.builders import registration
from flower_federation.plan import load_plan

A, B, C = b"key-a", b"key-b", b"key-c"
LINES = {A: "ecdsa-sha2-nistp384 AAAA-a hospital-a/ward/0", B: "ecdsa-sha2-nistp384 AAAA-b hospital-b/ward/0"}


def script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("register_nodes", registration.SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_registers_the_missing_keys_and_revokes_the_untrusted_nodes() -> None:
    s = script()
    nodes = [(11, "online", A), (12, "registered", C)]
    drop, add = s.plan_changes(nodes, {A: LINES[A], B: LINES[B]})
    assert (drop, add) == ([12], [B])
    # Reconciled: nothing left to do.
    assert s.plan_changes([(11, "online", A), (13, "registered", B)], {A: LINES[A], B: LINES[B]}) == ([], [])


def test_a_revoked_node_is_neither_revoked_again_nor_counted_as_registered() -> None:
    s = script()
    assert s.plan_changes([(11, "online", A), (12, "unregistered", C)], {A: LINES[A]}) == ([], [])


def test_a_trusted_key_revoked_before_is_refused_before_anything_changes() -> None:
    s = script()
    nodes = [(11, "online", A), (12, "unregistered", B), (14, "registered", C)]
    with pytest.raises(s.Refused) as refused:
        s.plan_changes(nodes, {A: LINES[A], B: LINES[B]})  # C would be revoked: nothing is
    text = str(refused.value)
    assert "hospital-b/ward/0" in text and "nodes 12" in text and "new key pair" in text
    assert "hospital-a" not in text


def test_keys_are_named_by_their_comment_or_their_type_and_tail() -> None:
    s = script()
    assert s.label(LINES[B]) == "hospital-b/ward/0"
    assert s.label("ecdsa-sha2-nistp384 AAAAE2VjZHNhLXNoYTItbmlzdHAzODQ") == "ecdsa-sha2-nistp384 ...tbmlzdHAzODQ"


class FakeRpcError(Exception):
    """What grpc raises: str() opens with a line that says neither status nor details."""

    def __str__(self) -> str:
        return "<_InactiveRpcError of RPC that terminated with:\n\tstatus = StatusCode.FAILED_PRECONDITION\n\t...>"

    def code(self) -> str:
        return "StatusCode.FAILED_PRECONDITION"

    def details(self) -> str:
        return "Public key already in use."


class FakeResponse:
    text = '{"detail": "Public key already in use."}'


class FakeHttpError(Exception):
    response = FakeResponse()


def test_a_failed_call_is_logged_with_its_status_and_details() -> None:
    s = script()
    assert s.describe(FakeRpcError()) == ("FakeRpcError: StatusCode.FAILED_PRECONDITION Public key already in use.")
    http = s.describe(
        FakeHttpError("Client error '412 Precondition Failed' for url 'https://x/v1/control/register-node'")
    )
    assert "412 Precondition Failed" in http and "Public key already in use." in http
    assert s.describe(ConnectionRefusedError(111, "Connection\nrefused")) == (
        "ConnectionRefusedError: [Errno 111] Connection refused"
    )


def test_the_job_fails_at_once_on_the_scripts_refusal() -> None:
    assert script().EXIT_REFUSED == registration.EXIT_REFUSED
    plan = load_plan(
        {"name": "fl", "nodeAuth": {"enabled": True}, "supernodes": {"pools": [{"name": "a", "replicas": 1}]}}, "dev"
    )
    job = registration.job(plan)
    (rule,) = job["spec"]["podFailurePolicy"]["rules"]
    (container,) = job["spec"]["template"]["spec"]["containers"]
    assert job["spec"]["template"]["spec"]["restartPolicy"] == "Never"  # podFailurePolicy requires it
    assert rule == {
        "action": "FailJob",
        "onExitCodes": {"containerName": container["name"], "operator": "In", "values": [registration.EXIT_REFUSED]},
    }
