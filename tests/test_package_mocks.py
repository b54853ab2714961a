"""The package API's documented unit-test path (docs/pulumi-package.md, GitHub issue 35): the documented program,
which reads another stack with a StackReference, runs under the documented mocks (`placeholder_outputs` gives a
StackReference outputs); an Input that resolves to nothing is reported as that, at its config path, in the
federation's report, never as a crash inside the SDK or as a setting left out. That the documented program runs
under the documented mocks is tests/test_docs_run.py's (it runs every doc example)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "pulumi-package.md"


def _documented(tmp_path: Path, program_edit=lambda text: text) -> subprocess.CompletedProcess[str]:
    program, test = re.findall(r"```python\n(.*?)```", DOC.read_text(), re.S)[:2]
    (tmp_path / "my_program.py").write_text(program_edit(program))
    (tmp_path / "test_it.py").write_text(test)
    env = {"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"}
    return subprocess.run(
        [sys.executable, "test_it.py"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300
    )


def test_an_input_that_resolves_to_nothing_is_said_so_at_its_path(tmp_path):
    run = _documented(tmp_path, lambda text: text.replace('get_output("caCertificate")', 'get_output("caCert")'))
    assert run.returncode != 0
    assert "AttributeError" not in run.stderr
    report = run.stderr[run.stderr.index("invalid flower-federation config") :]
    assert report.splitlines()[1:] == [
        "  - federation.supernodes.superlink.certificate.pem: the Input given here resolved to nothing (None): a "
        "StackReference's get_output of an output the stack does not export (check the name against `pulumi stack "
        "output --stack ...`), or an Output of an unset value",
        "  - federation.supernodes.superlink.certificate: set exactly one of pem, existingSecret, fromStack (the hub's "
        "CA certificate); found: none (pem given but empty)",
    ]
