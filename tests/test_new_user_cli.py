"""What a new user meets at the command line (GitHub issue 23): `python -m flower_federation` run by a Python
without the project's packages says so in one paragraph, with the fix; problems come all at once, each saying
what was found; warnings say they are warnings."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _python(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, *args], cwd=ROOT, capture_output=True, text=True, timeout=120)


# --- a Python without the venv's packages ---------------------------------------------------------------------


def test_a_python_without_the_packages_gets_one_paragraph_naming_the_module_and_the_fix():
    # -S: no site-packages, as a system python3 that never had `pip install -r requirements.txt`.
    done = _python("-S", "-m", "flower_federation", "render")
    assert done.returncode == 2
    assert "Traceback" not in done.stderr and done.stdout == ""
    assert done.stderr.startswith("error: ") and "\n\n" not in done.stderr.strip()
    assert "No module named" not in done.stderr
    assert "make render" in done.stderr and ".venv/bin/python -m flower_federation" in done.stderr
    assert "requirements.txt" in done.stderr


def test_missing_pulumi_is_named():
    # The case of the issue: PyYAML and pydantic installed system-wide, pulumi not.
    script = (
        "import runpy, sys; sys.modules['pulumi'] = None; sys.argv = ['flower_federation', 'render']; "
        "runpy.run_module('flower_federation', run_name='__main__', alter_sys=True)"
    )
    done = _python("-c", script)
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    assert "'pulumi'" in done.stderr.splitlines()[0]


def test_a_missing_module_of_our_own_is_a_bug_and_keeps_its_traceback():
    script = (
        "import runpy, sys; sys.modules['flower_federation.cli.offline'] = None; "
        "sys.argv = ['flower_federation', 'render']; runpy.run_module('flower_federation', run_name='__main__')"
    )
    done = _python("-c", script)
    assert done.returncode == 1 and "Traceback" in done.stderr
