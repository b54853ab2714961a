"""Docs that run (GitHub issue 35, part 5): every ```python and ```sh block of README.md and docs/*.md is executed,
so an example that no longer works fails the tests. A block is run unless an HTML comment on the line before it
says otherwise, visible to whoever edits the block:

- `<!-- doc-test: not run: REASON -->`: it needs what a test cannot have (a Pulumi backend, a cluster, the network);
  every such block is listed in NOT_RUN here too, so an exemption is a reviewed change of this file.
- `<!-- doc-test: the block above is FILE -->`: the previous python block is written to FILE (a program the
  block imports) before this one runs.

A shell block that runs holds only `.venv/bin/python -m flower_federation ...` commands (optionally `> FILE`):
each runs in-process (the CLI's `main`, so Pulumi is imported once for all) in a temporary directory that stands
for the user's project, with the files the docs name (FIXTURES), and must exit 0. A python block runs as a script
there, in a Python of its own."""

from __future__ import annotations

import contextlib
import io
import re
import shlex
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
BLOCK = re.compile(r"^```(python|sh)\n(.*?)^```$", re.S | re.M)
MARK = re.compile(r"<!-- doc-test: (.*?) -->")
CLI = [".venv/bin/python", "-m", "flower_federation"]

# Every block a doc marks not run (file, its first line): a new exemption is added here, reviewed.
NOT_RUN = {
    ("README.md", "make render   # creates .venv from requirements*.txt, prints the dev stack's Kubernetes objects"),
    ("README.md", "# 1. Pulumi CLI (https://www.pulumi.com/docs/install/) and a state backend"),
    (
        "README.md",
        "pulumi package add ./path/to/flower-federation/plugin   # generates an SDK for your program's language",
    ),
    ("across-organisations.md", "# 1. hub team (Pulumi.hub.yaml as above, without `sites` yet)"),
    ("across-organisations.md", "# the hub before step 3 (no sites): its objects, and its outputs for lab-b"),
    ("config-reference.md", "pulumi config set --path 'federation.supernodes.pools[0].name' cpu"),
    (
        "getting-started.md",
        "make render   # creates .venv from requirements*.txt, prints the dev stack's Kubernetes objects",
    ),
    ("policies.md", "helm template site CHART -f values.yaml | .venv/bin/python -m flower_federation check -"),
    ("policies.md", "pulumi preview --policy-pack policy/          # or pulumi up --policy-pack policy/"),
    ("policies.md", "cd policy && pulumi policy publish ORG         # ORG: your Pulumi organisation"),
    ("pulumi-package.md", "pip install .                                                          # from a checkout"),
    ("pulumi-package.md", "pulumi package add ./path/to/flower-federation/plugin                         # a checkout"),
    ("reviewing-changes.md", "# The stack file on main against the working copy (`--base -` reads stdin)"),
    (
        "security.md",
        "pulumi up                                           # keys are generated, pods start, the Job registers them",
    ),
}


@dataclass(frozen=True)
class Block:
    doc: Path
    line: int
    language: str
    text: str
    mark: str  # the doc-test comment on the line before, "" if none

    @property
    def id(self) -> str:
        return f"{self.doc.name}:{self.line}"


def blocks() -> list[Block]:
    found = []
    for doc in DOCS:
        text = doc.read_text(encoding="utf-8")
        for m in BLOCK.finditer(text):
            before = text[: m.start()].rstrip("\n").rsplit("\n", 1)[-1]
            mark = MARK.fullmatch(before.strip())
            found.append(
                Block(doc, text.count("\n", 0, m.start()) + 1, m.group(1), m.group(2), mark[1] if mark else "")
            )
    return found


ALL = blocks()


def test_every_exemption_is_listed_and_says_why():
    marked = {(b.doc.name, b.text.splitlines()[0]) for b in ALL if b.mark.startswith("not run:")}
    assert marked == NOT_RUN
    assert all(len(b.mark) > len("not run: ") + 10 for b in ALL if b.mark.startswith("not run:"))
    # The negative control of the finder: it sees the blocks this file runs and the marks beside them.
    assert [(b.doc.name, b.language) for b in ALL if b.mark.startswith(SAVED)] == [("pulumi-package.md", "python")]
    assert len(RUN) >= 6, [b.id for b in RUN]


FIXTURE_VALUES = {"supernode": {"image": {"tag": "1.42.0"}, "superlink": {"address": "hub.example.org"}}}


def _project(tmp_path: Path) -> Path:
    """The user's project as the docs assume it: the dev stack (as `prod` and `my.yaml` too), Helm values and an
    operator CR to import, the goldens the docs point at."""
    from tests.support.operator_examples import pinned
    from tests.support.operator_readme import QUICK_START

    dev = (ROOT / "Pulumi.dev.yaml").read_text()
    for name in ("Pulumi.dev.yaml", "Pulumi.prod.yaml", "my.yaml"):
        (tmp_path / name).write_text(dev)
    (tmp_path / "values.yaml").write_text(yaml.safe_dump(FIXTURE_VALUES))
    (tmp_path / "federation.yaml").write_text(pinned(QUICK_START))
    shutil.copytree(ROOT / "tests" / "golden", tmp_path / "tests" / "golden")
    return tmp_path


def _commands(text: str) -> list[list[str]]:
    """The block's commands as argv lists (`\\` continuations joined, comments dropped)."""
    joined = text.replace("\\\n", " ")
    return [argv for line in joined.splitlines() if (argv := shlex.split(line, comments=True))]


def _run_ours(argv: list[str], project: Path, monkeypatch) -> None:
    from flower_federation.cli import main as cli_main
    from flower_federation.cli import stack_file

    assert argv[:3] == CLI and not {"|", "&&", ";"} & set(argv), f"not a flower_federation command: {argv}"
    args, out_file = argv[3:], None
    if ">" in args:
        args, out_file = args[: args.index(">")], args[args.index(">") + 1]
    monkeypatch.setattr(stack_file, "project_dir", lambda: project)
    monkeypatch.chdir(project)
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = cli_main.main(args)
    assert code == 0, f"{shlex.join(argv)} exited {code}:\n{err.getvalue()}"
    assert "Traceback" not in err.getvalue()
    if out_file:
        (project / out_file).write_text(out.getvalue())


SAVED = "the block above is "


def _saved_as(block: Block) -> tuple[str, Block] | None:
    """(FILE, the previous python block) when `block` is marked to run with that block saved as FILE."""
    if not block.mark.startswith(SAVED):
        return None
    previous = [b for b in ALL if b.doc == block.doc and b.language == "python" and b.line < block.line]
    return block.mark.removeprefix(SAVED), previous[-1]


# A python block saved as a file for the block after it runs through that block, not alone.
FILES = {id(pair[1]) for b in ALL if (pair := _saved_as(b))}
RUN = [b for b in ALL if not b.mark.startswith("not run:") and id(b) not in FILES]


@pytest.mark.parametrize("block", [b for b in RUN if b.language == "sh"], ids=lambda b: b.id)
def test_a_shell_example_runs(block: Block, tmp_path, monkeypatch):
    project = _project(tmp_path)
    for argv in _commands(block.text):
        _run_ours(argv, project, monkeypatch)


@pytest.mark.parametrize("block", [b for b in RUN if b.language == "python"], ids=lambda b: b.id)
def test_a_python_example_runs(block: Block, tmp_path):
    saved = _saved_as(block)
    if saved:
        (tmp_path / saved[0]).write_text(saved[1].text)
    run = subprocess.run(
        [sys.executable, "-c", block.text],
        cwd=tmp_path,
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, run.stderr
    assert "Traceback" not in _without_sdk_exit_noise(run.stderr), run.stderr


# Pulumi's mocks make an event loop in each worker thread and never close it (pulumi/runtime/sync_await.py,
# `_ensure_event_loop`); at interpreter exit, a loop finalized after its self-pipe socket reports "Exception ignored
# in: <function BaseEventLoop.__del__ ...>" with a traceback ending "Invalid file descriptor: -1". Exit-time order
# decides it (seen under load only). It is not the example failing: exactly that block is set aside, nothing else.
_LOOP_DEL_NOISE = re.compile(
    r"Exception ignored in: <function BaseEventLoop\.__del__ at 0x[0-9a-f]+>\n"
    r"Traceback \(most recent call last\):\n(?:  .*\n)+ValueError: Invalid file descriptor: -1\n?"
)


def _without_sdk_exit_noise(stderr: str) -> str:
    return _LOOP_DEL_NOISE.sub("", stderr)


def test_only_the_sdks_exit_time_loop_noise_is_set_aside():
    """The negative control of the filter: any other traceback, or that one ending otherwise, still counts."""
    noise = (
        "Exception ignored in: <function BaseEventLoop.__del__ at 0x7f3ab782bb00>\n"
        "Traceback (most recent call last):\n"
        '  File "/usr/lib/python3.11/asyncio/base_events.py", line 694, in __del__\n'
        "    self.close()\n"
        "ValueError: Invalid file descriptor: -1\n"
    )
    assert "Traceback" not in _without_sdk_exit_noise("public keys: {}\n" + noise)
    assert "Traceback" in _without_sdk_exit_noise(noise.replace("Invalid file descriptor: -1", "boom"))
    assert "Traceback" in _without_sdk_exit_noise(
        'Traceback (most recent call last):\n  File "x", line 1\nKeyError: 1\n'
    )


def test_the_runner_fails_an_example_that_fails(tmp_path, monkeypatch):
    """The negative control: a command that exits non-zero, and one that is not ours, fail the block."""
    project = _project(tmp_path)
    with pytest.raises(AssertionError, match="exited 2"):
        _run_ours([*CLI, "validate", "--config-file", "missing.yaml"], project, monkeypatch)
    with pytest.raises(AssertionError, match="not a flower_federation command"):
        _run_ours(["pulumi", "up"], project, monkeypatch)
