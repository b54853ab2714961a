"""The fork server tests/test_trust_set_machine.py runs the registration Jobs' script through
(tests/support/job_forkserver.py): a run is the script as `python SCRIPT ARGS...` would run it (argv, env,
cwd, sys.path, stdout, stderr, exit code, an exception as a traceback and exit 1), read anew each run, and a
run past its timeout is killed with its process group and fails."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from tests.support.flower import HTTP_ERA, venv_python
from tests.support.registration_job import ForkServer

SCRIPT = """\
import json, os, sys
print(json.dumps({"argv": sys.argv, "cwd": os.getcwd(), "env": os.environ.get("JOB_ENV"), "path0": sys.path[0],
                  "flwr": "flwr" in sys.modules}))
print("to stderr", file=sys.stderr)
if sys.argv[1] == "raise":
    raise RuntimeError("boom")
if sys.argv[1] == "hang":
    import time
    time.sleep(60)
sys.exit(int(sys.argv[1]))
"""


def test_a_forked_run_is_the_script_as_python_runs_it(tmp_path: Path) -> None:
    script = tmp_path / "bin" / "job.py"
    script.parent.mkdir()
    script.write_text(SCRIPT)
    server = ForkServer(venv_python(HTTP_ERA), {"PATH": "/usr/bin:/bin"}, tmp_path)
    try:
        done = server.run(["python", str(script), "3"], {"JOB_ENV": "x"}, tmp_path, timeout=30)
        seen = json.loads(done.stdout)
        assert (done.returncode, done.stderr) == (3, "to stderr\n")
        # flwr is preloaded: what a fork saves is its import.
        assert seen == {
            "argv": [str(script), "3"],
            "cwd": str(tmp_path),
            "env": "x",
            "path0": str(script.parent),
            "flwr": True,
        }
        # The file is read anew each run (the trust machine's negative controls rewrite it).
        script.write_text(SCRIPT.replace("sys.exit(int(sys.argv[1]))", "sys.exit(7)"))
        assert server.run(["python", str(script), "0"], {}, tmp_path, timeout=30).returncode == 7
        raised = server.run(["python", str(script), "raise"], {}, tmp_path, timeout=30)
        assert raised.returncode == 1 and "RuntimeError: boom" in raised.stderr, raised
        with pytest.raises(AssertionError, match="timed out"):
            server.run(["python", str(script), "hang"], {}, tmp_path, timeout=0.5)
        # Still serving after a killed run.
        assert server.run(["python", str(script), "0"], {}, tmp_path, timeout=30).returncode == 7
    finally:
        server.close()


def test_a_reply_already_read_with_the_one_before_is_not_waited_for() -> None:
    """A child that ends at once: the server's `pid` and `rc` lines arrive in one read. The `rc` must be taken from
    what was read, not waited for on the pipe (select() on the buffered file object once waited out the bound)."""
    server = ForkServer.__new__(ForkServer)
    server.proc = subprocess.Popen(
        ["sh", "-c", 'printf \'{"pid": 1}\\n{"rc": 3}\\n\'; sleep 30'], stdin=subprocess.PIPE, stdout=subprocess.PIPE
    )
    server._pending = b""
    try:
        assert server._reply() == {"pid": 1}
        assert server._reply(timeout=5) == {"rc": 3}
        assert server._reply(timeout=0.2) == {}  # nothing more: the bound, then nothing
    finally:
        server.proc.kill()
        server.proc.wait()
