"""The warm `flwr` the e2e's CLI user calls (tests/support/flwr_forkserver.py through tests/support/flwr_shim.py):
a call is the entry point run with the caller's argv, environment, working directory and descriptors, its exit
code the caller's; real Flower's CLI answers through it as its console script does; calls run side by side; a
caller that goes away takes its call's whole process group with it; a server told to stop finishes the calls it
has and takes no more."""

from __future__ import annotations

import json
import secrets
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support import flwr_shim
from tests.support.flower import REAL_FLOWERS, venv, venv_python

FORKSERVER = Path(flwr_shim.__file__).with_name("flwr_forkserver.py")

ENTRY = """\
import json, os, subprocess, sys, time
def main():
    what = sys.argv[1]
    if what == "echo":
        print(json.dumps({"argv": sys.argv, "cwd": os.getcwd(), "env": os.environ.get("CALL_ENV"),
                          "stdin": sys.stdin.read()}))
        print("to stderr", file=sys.stderr)
        return int(sys.argv[2])
    if what == "raise":
        raise RuntimeError("boom")
    if what == "wait":  # says it started, then waits until the file named exists
        print("waiting", flush=True)
        while not os.path.exists(sys.argv[2]):
            time.sleep(0.01)
        print("released")
        return 0
    if what == "exit":  # what python does at exit: non-daemon threads joined, then atexit handlers
        import atexit, threading
        atexit.register(lambda: print("atexit ran"))
        threading.Thread(target=lambda: (time.sleep(0.2), print("thread finished"))).start()
        return 3
    if what == "interrupt":
        raise KeyboardInterrupt
    if what == "spawn":  # a grandchild in the call's process group, its pid told
        kid = subprocess.Popen(["sleep", "300"])
        print(kid.pid, flush=True)
        time.sleep(300)
    sys.exit(what)
"""


# The shim as a process of its own (its stdin, stdout, stderr handed over), for the tests that kill it.
_SHIM_CALL = (
    f"import os, sys; sys.path.insert(0, {str(FORKSERVER.parent)!r}); from flwr_shim import call; "
    "sys.exit(call(sys.argv[1], sys.argv[2:], dict(os.environ), os.getcwd(), (0, 1, 2)))"
)


# A bound only a hang reaches: `make test-rest` runs this at nice 19 beside the e2e.
HANG_BOUND = 300


def _shim(address: str, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", _SHIM_CALL, address, "flwr", *args], stdout=subprocess.PIPE, text=True
    )


def _wait_ready(proc: subprocess.Popen[str]) -> None:
    assert proc.stdout is not None
    assert proc.stdout.readline().strip() == "ready", proc.poll()


@pytest.fixture
def server(tmp_path: Path) -> Iterator[tuple[str, subprocess.Popen[str]]]:
    (tmp_path / "entrymod.py").write_text(ENTRY)
    address = f"flwr-test-{secrets.token_hex(4)}"
    proc = subprocess.Popen(
        [sys.executable, str(FORKSERVER), address, "entrymod:main"],
        stdout=subprocess.PIPE,
        text=True,
        env={"PYTHONPATH": str(tmp_path), "PATH": "/usr/bin:/bin"},
    )
    _wait_ready(proc)
    yield address, proc
    proc.kill()
    proc.wait()


def _call(address: str, argv: list[str], tmp_path: Path, stdin: str = "", **env: str) -> tuple[int, str, str]:
    (tmp_path / "in").write_text(stdin)
    with (tmp_path / "in").open() as i, (tmp_path / "out").open("w+") as o, (tmp_path / "err").open("w+") as e:
        rc = flwr_shim.call(address, argv, env, str(tmp_path), (i.fileno(), o.fileno(), e.fileno()))
    return rc, (tmp_path / "out").read_text(), (tmp_path / "err").read_text()


def test_a_call_is_the_entry_point_with_the_callers_argv_env_cwd_and_descriptors(server, tmp_path: Path) -> None:
    address, _ = server
    rc, out, err = _call(address, ["flwr", "echo", "3"], tmp_path, stdin="from stdin", CALL_ENV="x")
    assert (rc, err) == (3, "to stderr\n")
    assert json.loads(out) == {"argv": ["flwr", "echo", "3"], "cwd": str(tmp_path), "env": "x", "stdin": "from stdin"}
    rc, _, err = _call(address, ["flwr", "raise"], tmp_path)
    assert rc == 1 and "RuntimeError: boom" in err, err
    assert _call(address, ["flwr", "a message"], tmp_path)[:3] == (1, "", "a message\n")  # sys.exit("...")


def test_a_call_ends_as_python_ends(server, tmp_path: Path) -> None:
    """Flower's CLI starts a non-daemon thread (its update check): the call's end waits for it and runs the atexit
    handlers, as the console script's interpreter does (`os._exit` alone skipped both)."""
    address, _ = server
    assert _call(address, ["flwr", "exit"], tmp_path)[:2] == (3, "thread finished\natexit ran\n")


def test_an_interrupted_call_ends_by_sigint_as_python_does(server, tmp_path: Path) -> None:
    """An uncaught KeyboardInterrupt: python prints its traceback and ends by SIGINT (130 to a shell); so does a
    call (negative control: the entry run by python itself, the same end)."""
    address, _ = server
    rc, _, err = _call(address, ["flwr", "interrupt"], tmp_path)
    real = subprocess.run(
        [sys.executable, "-c", "import sys, entrymod; sys.argv[1:] = ['interrupt']; entrymod.main()"],
        cwd=tmp_path,
        env={"PYTHONPATH": str(tmp_path), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
    )
    assert (real.returncode, rc) == (-signal.SIGINT, 128 + signal.SIGINT)
    assert err.rstrip().endswith("KeyboardInterrupt") and real.stderr.rstrip().endswith("KeyboardInterrupt"), err


def test_calls_run_side_by_side(server, tmp_path: Path) -> None:
    """A second call is answered while the first still runs (a `flwr run` streams while others list): the first
    has started (it said so) and waits for a file only the test writes after the second call returned."""
    address, _ = server
    release = tmp_path / "release"
    waiting = _shim(address, "wait", str(release))
    assert waiting.stdout is not None
    assert waiting.stdout.readline() == "waiting\n"
    answered: list[int] = []
    second = threading.Thread(target=lambda: answered.append(_call(address, ["flwr", "echo", "0"], tmp_path)[0]))
    second.start()
    second.join(timeout=HANG_BOUND)
    assert answered == [0], "the second call was not answered while the first ran"
    assert waiting.poll() is None, "the first call ended before it was released"
    release.touch()
    assert waiting.communicate(timeout=HANG_BOUND) == ("released\n", None) and waiting.returncode == 0


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def test_a_caller_that_goes_away_takes_its_calls_process_group_with_it(server, tmp_path: Path) -> None:
    address, proc = server
    shim = _shim(address, "spawn")
    assert shim.stdout is not None
    grandchild = int(shim.stdout.readline())
    assert _alive(grandchild), "the call ended by itself: nothing shown"  # the control: alive while its caller is
    shim.kill()
    shim.wait()
    deadline = time.monotonic() + HANG_BOUND
    while _alive(grandchild) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(grandchild), "the call outlived its caller"
    assert _call(address, ["flwr", "echo", "0"], tmp_path)[0] == 0, "the server stopped serving"
    assert proc.poll() is None


def test_a_stopped_server_finishes_its_calls_and_takes_no_more(server, tmp_path: Path, monkeypatch) -> None:
    address, proc = server
    release = tmp_path / "release"
    running = _shim(address, "wait", str(release))
    assert running.stdout is not None
    assert running.stdout.readline() == "waiting\n"  # accepted and running before the server is told to stop
    proc.send_signal(signal.SIGTERM)
    monkeypatch.setattr(flwr_shim, "CONNECT_SECONDS", 0.5)
    deadline = time.monotonic() + HANG_BOUND
    while time.monotonic() < deadline:  # the listener closes once the server handled the signal
        try:
            _call(address, ["flwr", "echo", "0"], tmp_path)
        except ConnectionRefusedError:
            break
    else:
        raise AssertionError("the stopped server still took calls")
    assert running.poll() is None and proc.poll() is None, "the running call was not let finish"
    release.touch()
    assert running.communicate(timeout=HANG_BOUND) == ("released\n", None) and running.returncode == 0
    assert proc.wait(timeout=HANG_BOUND) == 0


def test_an_idle_server_told_to_stop_exits(server) -> None:
    _, proc = server
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=HANG_BOUND) == 0


@pytest.mark.live
@pytest.mark.parametrize("version", REAL_FLOWERS)
def test_real_flower_answers_through_it_as_through_its_console_script(tmp_path: Path, version: str) -> None:
    """Each tested Flower's own CLI: the same output and exit code for a listing's help, the version, and an
    unknown command (a usage error, 2), warm and through the `flwr` executable."""
    address = f"flwr-test-{secrets.token_hex(4)}"
    env = {"PATH": f"{venv(version) / 'bin'}:/usr/bin:/bin", "HOME": str(tmp_path), "NO_COLOR": "1", "COLUMNS": "120"}
    proc = subprocess.Popen(
        [str(venv_python(version)), "-I", str(FORKSERVER), address, "flwr.cli.app:app"],
        stdout=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        _wait_ready(proc)
        for args in (["ls", "--help"], ["--version"], ["no-such-command"]):
            real = subprocess.run(
                ["flwr", *args], capture_output=True, text=True, env=env, cwd=tmp_path, timeout=HANG_BOUND
            )
            warm = _call(address, ["flwr", *args], tmp_path, **env)
            assert warm == (real.returncode, real.stdout, real.stderr), args
        assert real.returncode == 2
    finally:
        proc.kill()
        proc.wait()
