"""tests/support/processes.py's free_port: the ports live tests hand to servers (nginx, Flower) come from below
the kernel's ephemeral range, where no outgoing connection or bind to port 0 can take them, and never twice."""

from __future__ import annotations

import random
import socket

from tests.support import processes


def test_ports_are_below_the_ephemeral_range_and_never_repeat():
    low = processes._ephemeral_low()
    ports = [processes.free_port() for _ in range(200)]
    assert len(set(ports)) == len(ports)
    assert all(processes._LOWEST_PORT <= p < low for p in ports), ports


def test_a_held_port_is_skipped_and_a_released_one_handed_out(monkeypatch):
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))  # any port: the picker is pointed at it below
        port = held.getsockname()[1]
        low = processes._LOWEST_PORT
        monkeypatch.setattr(processes, "_ephemeral_low", lambda: max(port + 2, low + 1000))
        monkeypatch.setattr(processes, "_LOWEST_PORT", min(port, low))
        monkeypatch.setattr(processes, "_pick", _StartAt(port))
        monkeypatch.setattr(processes, "_handed_out", set())
        held.listen()
        assert processes.free_port() != port  # held: skipped
    # negative control: released, the same start hands it out (the check above is not vacuous)
    assert processes.free_port() == port


class _StartAt(random.Random):
    def __init__(self, port: int):
        super().__init__()
        self.port = port

    def randrange(self, *_args: object, **_kwargs: object) -> int:  # type: ignore[override]
        return self.port
