"""The GitHub workflows (docs/pull-requests.md) keep their promises: actions pinned by the SHAs read from their
repositories, least `permissions:`, the stack matrices are the Pulumi.<stack>.yaml files, ci.yml runs the README's
test command as root, ups of a stack never overlap, secrets are documented, and zizmor (the Makefile's command line)
and check-jsonschema pass them. Each check runs on the real files and, as a negative control, on a broken copy."""

from __future__ import annotations

import copy
import re
import shlex
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent
BIN = ROOT / ".venv" / "bin"
MATRIX_JOBS = {"preview.yml": ("pulumi", "offline-review"), "up.yml": ("up",)}

# Each SHA read from the action's own repository: `git -C <repo> rev-list -n1 <tag>` on a clone of it (the tag's
# commit, on its default branch). Changing a pin means re-reading it there and changing this table.
VERIFIED = {
    "actions/checkout": ("3d3c42e5aac5ba805825da76410c181273ba90b1", "v7.0.1"),
    "actions/setup-python": ("5fda3b95a4ea91299a34e894583c3862153e4b97", "v7.0.0"),
    "actions/upload-artifact": ("bbbca2ddaa5d8feaa63e36b76fdaad77386f024f", "v7.0.0"),
    "pulumi/actions": ("8e5e406f4007fca908480587cb9893c07090f58d", "v7.0.0"),
}
# The only write permissions, by (workflow, job, scope), and why each is needed.
WRITES = {
    ("preview.yml", "pulumi", "pull-requests"): "pulumi/actions comments the preview on the pull request",
    ("preview-comment.yml", "comment", "pull-requests"): "posts a fork's offline review, which its run cannot",
}

USES_LINE = re.compile(r"^\s*(?:-\s+)?uses:\s*(?P<ref>[^\s#]+)(?:\s+#\s*(?P<comment>.*))?$")
PINNED = re.compile(r"(?P<action>[\w.-]+/[\w.-]+)(?:/[\w./-]+)?@(?P<sha>[0-9a-f]{40})")
VERSION = re.compile(r"v\d+\.\d+\.\d+")
Workflows = dict[str, dict[str, Any]]


def read(*parts: str) -> str:
    return ROOT.joinpath(*parts).read_text(encoding="utf-8")


def workflow_files() -> list[Path]:
    return sorted((ROOT / ".github" / "workflows").glob("*.yml"))


def triggers(workflow: dict[Any, Any]) -> Any:
    return workflow.get("on", workflow.get(True))  # YAML 1.1 reads a bare `on` as true


def steps(workflow: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    return [(job_id, step) for job_id, job in workflow["jobs"].items() for step in job.get("steps", [])]


def pinning_problems(text: str) -> list[str]:
    """Every `uses:` is `owner/repo[/path]@<40-hex SHA> # vX.Y.Z` (local `./` actions aside), the SHA and the
    version the ones VERIFIED holds for that action; and no `uses:` hides where the line scan misses it."""
    found, seen = [], []
    for n, line in enumerate(text.splitlines(), 1):
        match = USES_LINE.match(line)
        if not match:
            continue
        ref, comment = match.group("ref").strip("'\""), (match.group("comment") or "").strip()
        seen.append(ref)
        if ref.startswith("./"):
            continue
        pinned = PINNED.fullmatch(ref)
        if not pinned:
            found.append(f"line {n}: {ref} is not pinned by a full commit SHA")
            continue
        expected = VERIFIED.get(pinned.group("action"))
        if not VERSION.fullmatch(comment):
            found.append(f"line {n}: {ref} has no `# vX.Y.Z` comment naming its version")
        elif expected is None:
            found.append(f"line {n}: {pinned.group('action')} is not in VERIFIED (read its SHA from its repository)")
        elif (pinned.group("sha"), comment) != expected:
            found.append(f"line {n}: {ref} # {comment}: VERIFIED has {expected[0]} # {expected[1]}")
    workflow = yaml.safe_load(text)
    parsed = sorted(x["uses"] for x in [s for _, s in steps(workflow)] + [*workflow["jobs"].values()] if "uses" in x)
    if parsed != sorted(seen):
        found.append(f"uses: the YAML has {parsed}, the line scan found {sorted(seen)}")
    return found


def permission_problems(name: str, workflow: dict[str, Any]) -> list[str]:
    """Top-level permissions are {} or contents: read; a job's are read or none, except the writes WRITES lists."""
    found = []
    top = workflow.get("permissions", "missing")
    if top not in ({}, {"contents": "read"}):
        found.append(f"{name}: top-level permissions are {top!r}, not {{}} or contents: read")
    for job_id, job in workflow["jobs"].items():
        perms = job.get("permissions", {})
        if not isinstance(perms, dict):
            found.append(f"{name}: job {job_id}: permissions {perms!r} (write-all/read-all): list the scopes")
            continue
        for scope, level in perms.items():
            if level == "write" and (name, job_id, scope) not in WRITES:
                found.append(f"{name}: job {job_id}: {scope}: write is not in WRITES (with why it is needed)")
            elif level not in ("read", "write", "none"):
                found.append(f"{name}: job {job_id}: {scope}: {level!r}")
    return found


def template_injections(workflow: dict[str, Any]) -> list[str]:
    """A `${{ }}` in a `run:` is pasted into the script before the shell parses it: values go in through env."""
    return [f"job {job}: {s.get('name', s['run'][:40])!r}" for job, s in steps(workflow) if "${{" in s.get("run", "")]


def stacks_on_disk(root: Path = ROOT) -> list[str]:
    return sorted(p.name[len("Pulumi.") : -len(".yaml")] for p in root.glob("Pulumi.*.yaml"))


def matrix_problems(workflows: Workflows, stacks: list[str]) -> list[str]:
    found = []
    for name, jobs in MATRIX_JOBS.items():
        for job_id in jobs:
            listed = workflows[name]["jobs"][job_id]["strategy"]["matrix"]["stack"]
            if sorted(listed) != stacks:
                found.append(f"{name}: job {job_id}: matrix {listed}, the stack files are {stacks}")
    return found


def pulumi_step_problems(workflow: dict[str, Any], job_id: str, command: str) -> list[str]:
    """The job's pulumi/actions step runs `command` on its matrix's stack with the policy pack and the CLI of the
    SDK requirements.txt pins; a preview comments on the pull request; an up runs in the stack's environment, one
    at a time per stack."""
    job = workflow["jobs"][job_id]
    (step,) = [s for s in job["steps"] if s.get("uses", "").startswith("pulumi/actions@")]
    want: dict[str, object] = {"command": command, "stack-name": "${{ matrix.stack }}", "policyPacks": "policy"}
    want["pulumi-version"] = re.findall(r"^pulumi==(\S+)", read("requirements.txt"), re.MULTILINE)[0]
    if command == "preview":
        want["comment-on-pr"] = True
    found = [
        f"{job_id}: with.{k} is {step['with'].get(k)!r}, not {v!r}" for k, v in want.items() if step["with"].get(k) != v
    ]
    env = job.get("environment")
    env_name = env.get("name") if isinstance(env, dict) else env
    if command == "up":
        if env_name != "${{ matrix.stack }}":
            found.append(f"{job_id}: environment {env_name!r}: an up runs in its stack's GitHub environment")
        group = job.get("concurrency", {})
        if "matrix.stack" not in str(group.get("group")) or group.get("cancel-in-progress") is not False:
            found.append(f"{job_id}: concurrency {group!r}: one group per stack, cancel-in-progress: false")
    elif env_name is not None and "preview" not in env_name:
        found.append(f"{job_id}: environment {env_name!r}: a preview must not wait on an up's protection rules")
    return found


def ci_problems(ci: dict[str, Any], ci_run: str, readme: str) -> list[str]:
    """ci.yml, on pushes to main and pull requests, runs .ci/run as root with Python 3.11, and .ci/run runs the
    README's test command (`make test`, with make's flags)."""
    found = []
    if "make test" not in readme:
        found.append("README names no `make test`")
    on = triggers(ci)
    if "pull_request" not in on or on.get("push", {}).get("branches") != ["main"]:
        found.append(f"ci.yml runs on {on!r}, not pushes to main and pull requests")
    runs = [s["run"] for _, s in steps(ci) if "run" in s]
    if not any(re.search(r"\bsudo\b.*\s\.ci/run\b", r) for r in runs):
        found.append(f"ci.yml runs {runs}, not .ci/run as root")
    versions = [s["with"].get("python-version") for _, s in steps(ci) if s.get("uses", "").startswith("actions/setup")]
    if versions != ["3.11"]:
        found.append(f"ci.yml sets up Python {versions}, not 3.11")
    commands = [shlex.split(line) for line in ci_run.splitlines() if re.match(r"\s*make\s", line)]
    if not any(words[-1] == "test" and all(w.startswith("-") for w in words[1:-1]) for words in commands):
        found.append(f".ci/run's make commands are {commands}: none is `make test`")
    return found


def undocumented_secrets(workflows: Workflows, doc: str) -> list[str]:
    read = set()
    for workflow in workflows.values():
        read |= set(re.findall(r"secrets\.([A-Z0-9_]+)", yaml.safe_dump(workflow)))
    return sorted(f"secret {s}" for s in read if f"`{s}`" not in doc)


def unexplained_ignores(config: str) -> list[str]:
    """Every ignore of .github/zizmor.yml has a comment just above it (its reason)."""
    lines = config.splitlines()
    return [
        line.strip()
        for i, line in enumerate(lines)
        if re.match(r"\s+-\s", line)
        and "ignore:" in "".join(lines[max(0, i - 20) : i])
        and not lines[i - 1].strip().startswith("#")
    ]


def make_variable(name: str) -> list[str]:
    """A Makefile variable's words, $(VENV) as the project's .venv."""
    match = re.search(rf"^{name}\s*:?=\s*(.*)$", read("Makefile"), re.MULTILINE)
    assert match, f"the Makefile has no {name}"
    return shlex.split(match.group(1).replace("$(VENV)", str(ROOT / ".venv")))


def zizmor(target: Path) -> subprocess.CompletedProcess[str]:
    """The Makefile's zizmor command line (offline, the config's ignores), with JSON out, on `target`."""
    argv = make_variable("ZIZMOR") + ["--format", "json", str(target)]
    return subprocess.run(argv, capture_output=True, text=True, cwd=ROOT, timeout=120)


def schema_check(*files: Path) -> subprocess.CompletedProcess[str]:
    argv = [str(BIN / "check-jsonschema"), "--builtin-schema", "vendor.github-workflows", *map(str, files)]
    return subprocess.run(argv, capture_output=True, text=True, cwd=ROOT, timeout=120)


# --- the real workflows --------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def workflows() -> Workflows:
    files = {p.name: yaml.safe_load(p.read_text(encoding="utf-8")) for p in workflow_files()}
    assert set(files) >= {"ci.yml", "preview.yml", "preview-comment.yml", "up.yml"}, sorted(files)
    return files


def test_every_action_is_pinned_by_a_verified_sha() -> None:
    for path in workflow_files():
        assert pinning_problems(path.read_text(encoding="utf-8")) == [], path.name


def test_permissions_are_least(workflows: Workflows) -> None:
    assert [p for name, w in workflows.items() for p in permission_problems(name, w)] == []
    jobs = [(name, job_id, job) for name, w in workflows.items() for job_id, job in w["jobs"].items()]
    writes = {
        (n, j, scope) for n, j, job in jobs for scope, lvl in job.get("permissions", {}).items() if lvl == "write"
    }
    assert writes == set(WRITES), "WRITES lists a write no workflow has"


def test_no_expression_in_a_shell_line(workflows: Workflows) -> None:
    assert [p for w in workflows.values() for p in template_injections(w)] == []
    injected = yaml.safe_load(GOOD.replace('echo "$TITLE"', 'echo "${{ github.event.pull_request.title }}"'))
    assert template_injections(yaml.safe_load(GOOD)) == [] and len(template_injections(injected)) == 1


def test_the_stack_matrices_are_the_stack_files(workflows: Workflows) -> None:
    assert stacks_on_disk() and matrix_problems(workflows, stacks_on_disk()) == []


def test_preview_and_up_run_pulumi_per_stack(workflows: Workflows) -> None:
    assert pulumi_step_problems(workflows["preview.yml"], "pulumi", "preview") == []
    assert pulumi_step_problems(workflows["up.yml"], "up", "up") == []
    assert triggers(workflows["preview-comment.yml"])["workflow_run"]["workflows"] == [workflows["preview.yml"]["name"]]


def test_ci_runs_the_readme_test_command_as_root(workflows: Workflows) -> None:
    ci_run, readme = read(".ci", "run"), read("README.md")
    assert ci_problems(workflows["ci.yml"], ci_run, readme) == []


def test_every_secret_read_is_documented(workflows: Workflows) -> None:
    doc = read("docs", "pull-requests.md")
    assert undocumented_secrets(workflows, doc) == []
    hidden = doc.replace("`PULUMI_CONFIG_PASSPHRASE`", "the passphrase")  # negative control
    assert undocumented_secrets(workflows, hidden) == ["secret PULUMI_CONFIG_PASSPHRASE"]


def test_every_zizmor_ignore_says_why() -> None:
    config = read(".github", "zizmor.yml")
    assert unexplained_ignores(config) == []
    bare = config + "  template-injection:\n    ignore:\n      - ci.yml\n"  # negative control
    assert unexplained_ignores(bare) == ["- ci.yml"]


def test_zizmor_and_the_workflow_schema_pass_the_workflows() -> None:
    audit = zizmor(ROOT / ".github")
    assert audit.returncode == 0 and yaml.safe_load(audit.stdout) == [], audit.stdout + audit.stderr
    checked = schema_check(*workflow_files())
    assert checked.returncode == 0, checked.stdout + checked.stderr


# --- negative controls ---------------------------------------------------------------------------------------------

CHECKOUT, SETUP = (
    f"actions/{a}@{VERIFIED[f'actions/{a}'][0]} # {VERIFIED[f'actions/{a}'][1]}" for a in ("checkout", "setup-python")
)
GOOD = f"""name: good
on:
  pull_request:
permissions: {{}}
concurrency: {{group: good, cancel-in-progress: true}}
jobs:
  build:
    name: build
    runs-on: ubuntu-24.04
    permissions: {{contents: read}}
    steps:
      - uses: {CHECKOUT}
        with:
          persist-credentials: false
      - uses: {SETUP}
      - run: echo "$TITLE"
        env:
          TITLE: ${{{{ github.event.pull_request.title }}}}
"""


def test_the_pinning_check_catches_a_tag_a_short_sha_a_missing_or_wrong_version_and_an_unknown_action() -> None:
    assert pinning_problems(GOOD) == []
    sha, version = VERIFIED["actions/checkout"]
    bad = {
        "actions/checkout@v7": "not pinned",
        f"actions/checkout@{sha[:12]} # {version}": "not pinned",
        f"actions/checkout@{sha}": "no `# vX.Y.Z`",
        f"actions/checkout@{sha} # v6.0.0": "VERIFIED has",
        f"evil/checkout@{sha} # {version}": "not in VERIFIED",
    }
    for uses, problem in bad.items():
        found = pinning_problems(GOOD.replace(CHECKOUT, uses))
        assert len(found) == 1 and problem in found[0], (uses, found)
    hidden = GOOD + "  other:\n    runs-on: x\n    steps: [{uses: actions/checkout@v7}]\n"
    assert any("line scan" in p for p in pinning_problems(hidden))


def test_the_permission_check_catches_broad_and_unlisted_writes() -> None:
    good = yaml.safe_load(GOOD)
    assert permission_problems("good.yml", good) == []
    for old, new in (
        ("permissions: {}\n", ""),
        ("permissions: {}", "permissions: {contents: write}"),
        ("permissions: {contents: read}", "permissions: write-all"),
        ("{contents: read}", "{contents: read, pull-requests: write}"),
    ):
        assert len(permission_problems("good.yml", yaml.safe_load(GOOD.replace(old, new)))) == 1, new
    listed = copy.deepcopy(good)
    listed["jobs"]["pulumi"] = {"permissions": {"pull-requests": "write"}}
    assert permission_problems("preview.yml", listed) == []


def test_the_matrix_check_catches_a_stack_file_left_out(workflows: Workflows, tmp_path: Path) -> None:
    for stack in [*stacks_on_disk(), "prod"]:
        (tmp_path / f"Pulumi.{stack}.yaml").write_text("config: {}\n")
    (tmp_path / "Pulumi.yaml").write_text("name: x\n")  # the project file is no stack
    assert stacks_on_disk(tmp_path) == sorted([*stacks_on_disk(), "prod"])
    found = matrix_problems(workflows, stacks_on_disk(tmp_path))
    assert len(found) == sum(len(jobs) for jobs in MATRIX_JOBS.values()) and "prod" in found[0]


def test_the_pulumi_step_check_catches_an_overlapping_up_and_a_preview_without_its_comment(
    workflows: Workflows,
) -> None:
    up = copy.deepcopy(workflows["up.yml"])
    up["jobs"]["up"]["concurrency"]["cancel-in-progress"] = True
    del up["jobs"]["up"]["environment"]
    assert len(pulumi_step_problems(up, "up", "up")) == 2
    preview = copy.deepcopy(workflows["preview.yml"])
    (step,) = [s for s in preview["jobs"]["pulumi"]["steps"] if "pulumi/actions@" in s.get("uses", "")]
    step["with"].update({"comment-on-pr": False, "policyPacks": None, "pulumi-version": "latest"})
    preview["jobs"]["pulumi"]["environment"] = {"name": "${{ matrix.stack }}"}
    assert len(pulumi_step_problems(preview, "pulumi", "preview")) == 4


def test_the_ci_check_catches_another_command_no_root_and_another_python(workflows: Workflows) -> None:
    ci_run, readme, text = read(".ci", "run"), read("README.md"), read(".github", "workflows", "ci.yml")
    assert len(ci_problems(workflows["ci.yml"], ci_run.replace("test\n", "lint\n"), readme)) == 1
    for old, new in (
        ("sudo --preserve-env=PYTHON .ci/run", ".ci/run"),
        ("sudo --preserve-env=PYTHON .ci/run", "sudo make lint"),
        ('"3.11"', '"3.12"'),
        ("branches: [main]", "branches: [dev]"),
    ):
        assert old in text, old
        assert len(ci_problems(yaml.safe_load(text.replace(old, new)), ci_run, readme)) == 1, new


@pytest.mark.parametrize(
    ("old", "new", "audit"),
    [
        (CHECKOUT, "actions/checkout@v7.0.1", "unpinned-uses"),  # allowed by zizmor's default: our config forbids it
        ('echo "$TITLE"', 'echo "${{ github.event.pull_request.title }}"', "template-injection"),
        ("persist-credentials: false", "fetch-depth: 1", "artipacked"),
        ("permissions: {}\n", "", "excessive-permissions"),
        # .github/zizmor.yml ignores this audit for preview-comment.yml only
        ("pull_request:", "workflow_run:\n    workflows: [x]", "dangerous-triggers"),
    ],
)
def test_zizmor_fails_a_bad_workflow(tmp_path: Path, old: str, new: str, audit: str) -> None:
    (tmp_path / ".github" / "workflows").mkdir(parents=True)
    (tmp_path / ".github" / "workflows" / "good.yml").write_text(GOOD)
    good = zizmor(tmp_path / ".github")
    assert good.returncode == 0 and yaml.safe_load(good.stdout) == [], good.stdout + good.stderr
    assert old in GOOD
    (tmp_path / ".github" / "workflows" / "good.yml").write_text(GOOD.replace(old, new))
    bad = zizmor(tmp_path / ".github")
    assert bad.returncode != 0 and audit in {f["ident"] for f in yaml.safe_load(bad.stdout)}, bad.stdout + bad.stderr


def test_the_workflow_schema_fails_a_bad_workflow(tmp_path: Path) -> None:
    good, bad = tmp_path / "good.yml", tmp_path / "bad.yml"
    good.write_text(GOOD)
    bad.write_text(GOOD.replace("runs-on: ubuntu-24.04", "runs_on: ubuntu-24.04"))
    assert schema_check(good).returncode == 0
    checked = schema_check(bad)
    assert checked.returncode == 1 and "runs_on" in checked.stdout, checked.stdout + checked.stderr
