"""The node-registration script's decisions, without a SuperLink (it imports Flower only
inside the functions that call it): which nodes to revoke and which keys to register,
the refusal of a key Flower revoked before (it never registers one again), how failed
calls are logged, and the exit code the Job's podFailurePolicy fails the Job on. The
e2e sites scenario runs it against real SuperLinks (tests/e2e/sites.py)."""

from __future__ import annotations

import importlib.util
from pathlib import Path
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
    drop, add, stale = s.plan_changes(nodes, {A: LINES[A], B: LINES[B]})
    assert (drop, add, stale) == ([12], [B], {})
    # Reconciled: nothing left to do.
    assert s.plan_changes([(11, "online", A), (13, "registered", B)], {A: LINES[A], B: LINES[B]}) == ([], [], {})


def test_a_revoked_node_is_neither_revoked_again_nor_counted_as_registered() -> None:
    s = script()
    assert s.plan_changes([(11, "online", A), (12, "unregistered", C)], {A: LINES[A]}) == ([], [], {})


def test_a_trusted_key_revoked_before_is_stale_and_blocks_nothing_else() -> None:
    """Issue 32 (c): on 048b1d8 a stale key raised before any change, so C was never revoked."""
    s = script()
    nodes = [(11, "online", A), (12, "unregistered", B), (14, "registered", C)]
    drop, add, stale = s.plan_changes(nodes, {A: LINES[A], B: LINES[B]})
    assert (drop, add, stale) == ([14], [], {B: 12})  # C is still revoked; B is not registered again
    text = s.stale_message(stale, {A: LINES[A], B: LINES[B]})
    assert "hospital-b/ward/0" in text and "nodes 12" in text and "new key pair" in text
    assert "hospital-a" not in text


def _keys_dir(tmp_path: Path, text: str) -> list[str]:
    config, keys = tmp_path / "config.toml", tmp_path / registration.KEYS_FILE
    config.write_text("")
    keys.write_bytes(text.encode())
    return ["x", "federation", str(config), str(keys)]


def test_the_register_phase_reports_a_stale_key_and_the_revoke_phase_fails_after_revoking(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("FLWR_HOME", str(tmp_path / "home"))
    control = FakeControl()
    control.nodes = {1: ("registered", b"AAAA-a"), 2: ("unregistered", b"AAAA-b"), 3: ("registered", b"AAAA-c")}
    s = _fake_flower(monkeypatch, control)
    argv = _keys_dir(tmp_path, f"{LINES[A]}\n{LINES[B]}\n")  # B re-trusted, C dropped
    assert s.main([*argv, "register"]) == 0
    assert control.calls == ["list"] and control.nodes[3][0] == "registered"  # the register phase revokes nothing
    assert s.main([*argv, "revoke"]) == s.EXIT_REFUSED
    assert control.nodes[3][0] == "unregistered"  # revoked before the refusal
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("node-registration: STALE: trusted keys revoked earlier (nodes 2): hospital-b/ward/0")
    assert out[1] == "node-registration: done (register): 2 trusted keys; 0 registered, 0 revoked, 1 unchanged"
    assert out[2] == "node-registration: revoked node 3 (its key is no longer trusted)"
    assert out[3].startswith("node-registration: STALE: ") and out[4].startswith("node-registration: REFUSED: ")


@pytest.mark.parametrize("sep", ["\r", "\x0b", "\x0c", "\x1c", "\x1d", "\x1e", "\x85", "\u2028", "\u2029"])
def test_a_keys_file_line_is_one_key_whatever_separator_it_holds(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, sep: str
) -> None:
    """Issue 32 (b): on 048b1d8 splitlines() (and read_text()'s newline translation) read a second key,
    AAAA-evil, from one line. Validation refuses such a line; the script never splits it either."""
    monkeypatch.setenv("FLWR_HOME", str(tmp_path / "home"))
    control = FakeControl()
    s = _fake_flower(monkeypatch, control)
    argv = _keys_dir(tmp_path, f"{LINES[A]}{sep}ecdsa-sha2-nistp384 AAAA-evil hospital-b/ward/0\n")
    assert s.main([*argv, "register"]) == 0
    assert [key for _, key in control.nodes.values()] == [b"AAAA-a"]


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


class FakeControl:
    """A SuperLink's Control API as the script calls it (ListNodes, RegisterNode, UnregisterNode)."""

    def __init__(self) -> None:
        self.nodes: dict[int, tuple[str, bytes]] = {}
        self.calls: list[str] = []

    def ListNodes(self, request: object) -> object:  # noqa: N802 - Flower's names
        self.calls.append("list")
        info = [
            type("NodeInfo", (), {"node_id": i, "status": status, "public_key": key})
            for i, (status, key) in self.nodes.items()
        ]
        return type("Listed", (), {"nodes_info": info})

    def RegisterNode(self, request: object) -> object:  # noqa: N802
        self.calls.append("register")
        node_id = len(self.nodes) + 1
        self.nodes[node_id] = ("registered", request.public_key)  # type: ignore[attr-defined]
        return type("Registered", (), {"node_id": node_id})

    def UnregisterNode(self, request: object) -> None:  # noqa: N802
        self.calls.append("unregister")
        self.nodes[request.node_id] = ("unregistered", self.nodes[request.node_id][1])  # type: ignore[attr-defined]

    def close(self) -> None:
        pass


def _fake_flower(monkeypatch: pytest.MonkeyPatch, control: FakeControl) -> ModuleType:
    """The script with Flower's modules it imports replaced by fakes (keys: the OpenSSH line's key field)."""
    import sys

    proto = ModuleType("flwr.proto.control_pb2")
    for name in ("ListNodesRequest", "RegisterNodeRequest", "UnregisterNodeRequest"):
        setattr(proto, name, lambda **kw: type("Request", (), kw))
    asym = ModuleType("flwr.supercore.primitives.asymmetric")
    asym.public_key_to_bytes = lambda key: key  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "flwr.proto.control_pb2", proto)
    monkeypatch.setitem(sys.modules, "flwr.supercore.primitives.asymmetric", asym)
    s = script()
    monkeypatch.setattr(s, "control_client", lambda name: (control, control))
    from cryptography.hazmat.primitives import serialization

    monkeypatch.setattr(serialization, "load_ssh_public_key", lambda data: data.split()[1])
    return s


def test_over_shards_the_script_registers_exactly_their_union_once(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from tests.support import hub_scale

    lines = [key for site in hub_scale.site_keys(30, 10) for key in site]
    text = "".join(f"{line}\n" for line in sorted(lines))
    files = []
    for i, shard in enumerate(registration.shard_texts(text)):
        files.append(tmp_path / registration.shard_file(i))
        files[-1].write_text(shard)
    assert sum(len(f.read_text().splitlines()) for f in files) == 300
    config = tmp_path / "config.toml"
    config.write_text("")
    monkeypatch.setenv("FLWR_HOME", str(tmp_path / "home"))
    control = FakeControl()
    s = _fake_flower(monkeypatch, control)
    argv = ["x", "federation", str(config), *map(str, files)]
    assert s.main([*argv, "register"]) == 0
    registered = {key for status, key in control.nodes.values() if status == "registered"}
    assert registered == {line.split()[1].encode() for line in lines}
    assert control.calls.count("register") == 300
    control.calls.clear()  # a re-run with no change: one listing, nothing registered or revoked
    assert s.main([*argv, "register"]) == 0 and s.main([*argv, "revoke"]) == 0
    assert control.calls == ["list", "list"]
    # One key dropped from one shard: the revocation phase makes one call
    dropped = files[3].read_text().splitlines()
    files[3].write_text("".join(f"{line}\n" for line in dropped[1:]))
    control.calls.clear()
    assert s.main([*argv, "revoke"]) == 0 and control.calls == ["list", "unregister"]
    assert s.main(["x", "federation", str(config), "register"]) == 2  # no keys file: usage
