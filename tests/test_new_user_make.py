"""A new user's first commands (GitHub issue 23): `make render > out.yaml` on a fresh clone writes only the YAML
to stdout (setting up .venv talks on stderr), so `make render | kubectl apply -f -` works the first time too.

The set-up runs for real through the Makefile's recipe, with a stand-in PYTHON that makes venvs whose pip and uv
only say what they would install (and say it on stdout, as both do): the test costs a render, not an install."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent
# make's own variables, set when pytest itself runs under `make test`: a user's shell has none.
MAKE_ENV = ("MAKEFLAGS", "MAKELEVEL", "MFLAGS", "MAKEOVERRIDES", "MAKE_TERMOUT", "MAKE_TERMERR")

FAKE_PYTHON = """#!/bin/sh
# PYTHON for the Makefile: `-m venv DIR` makes DIR/bin/python, which runs the real Python except for pip, and a
# DIR/bin/uv (the set-up installs with uv, from a venv of its own) that only says what it would install.
if [ "$1" = "-m" ] && [ "$2" = "venv" ]; then
  mkdir -p "$3/bin"
  cat > "$3/bin/python" <<'EOF'
#!/bin/sh
if [ "$1" = "-m" ] && [ "$2" = "pip" ]; then echo "Collecting uv (stand-in pip: $*)"; exit 0; fi
exec {real} "$@"
EOF
  cat > "$3/bin/uv" <<'EOF'
#!/bin/sh
echo "Resolved pulumi (stand-in uv: $*)"
EOF
  chmod +x "$3/bin/python" "$3/bin/uv"
  echo "created virtual environment $3 (stand-in)"
  exit 0
fi
echo "unexpected: $*" >&2
exit 1
"""


def _fake_python(tmp_path: Path) -> Path:
    path = tmp_path / "python3"
    path.write_text(FAKE_PYTHON.replace("{real}", sys.executable))
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


def _make(*args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in MAKE_ENV}
    return subprocess.run(["make", *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)


@pytest.mark.skipif(shutil.which("make") is None, reason="needs GNU make")
def test_make_render_on_a_fresh_clone_prints_only_the_manifests(tmp_path):
    venv, uv_venv = tmp_path / "venv", tmp_path / "uv-venv"
    # Both venvs in tmp_path: the checkout's own .venv-uv holds a real uv, which would install into the stand-in.
    done = _make("render", f"VENV={venv}", f"UV_VENV={uv_venv}", f"PYTHON={_fake_python(tmp_path)}")
    assert done.returncode == 0, done.stderr
    assert (venv / ".installed").exists() and (uv_venv / ".installed").exists()  # the set-up did run
    documents = list(yaml.safe_load_all(done.stdout))
    manifests = all(isinstance(d, dict) and {"apiVersion", "kind"} <= set(d) for d in documents)
    assert documents and manifests, done.stdout[:500]
    # What the set-up said is on stderr, the pip and uv stand-ins' stdout included.
    assert "Collecting uv (stand-in pip" in done.stderr and "Resolved pulumi (stand-in uv" in done.stderr
    assert "created virtual environment" in done.stderr
    # A second run finds the venv set up and says nothing but the YAML.
    again = _make("render", f"VENV={venv}", f"UV_VENV={uv_venv}", f"PYTHON={_fake_python(tmp_path)}")
    assert again.returncode == 0 and again.stdout == done.stdout
    assert "stand-in" not in again.stderr


def test_ci_checks_that_make_render_prints_only_manifests(tmp_path):
    # .ci/run's first step is what a new user runs: it checks the output is manifests, not only that make passed.
    text = (ROOT / ".ci" / "run").read_text()
    assert 'make render > "$rendered"' in text
    check = text.split(".venv/bin/python -c '", 1)[1].split('\' "$rendered"', 1)[0]
    manifests = tmp_path / "good.yaml"
    manifests.write_text("apiVersion: v1\nkind: Namespace\nmetadata:\n  name: x\n")
    assert subprocess.run([sys.executable, "-c", check, str(manifests)]).returncode == 0
    polluted = tmp_path / "bad.yaml"
    polluted.write_text("python3 -m venv .venv\ntouch .venv/.installed\n---\n" + manifests.read_text())
    done = subprocess.run([sys.executable, "-c", check, str(polluted)], capture_output=True, text=True)
    assert done.returncode != 0 and "other than Kubernetes manifests" in done.stderr
