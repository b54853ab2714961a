"""What a new user meets at the command line (GitHub issue 23): `python -m flower_federation` run by a Python
without the project's packages says so in one paragraph, with the fix; problems come all at once, each saying
what was found; warnings say they are warnings."""

from __future__ import annotations

import os
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


def test_the_venvs_python_runs_the_cli_from_any_directory(tmp_path):
    # `make` writes a .pth naming the checkout into .venv (Makefile): no build, no PYTHONPATH.
    python = ROOT / ".venv" / "bin" / "python"
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    done = subprocess.run(
        [python, "-m", "flower_federation", "--help"], cwd=tmp_path, env=env, capture_output=True, text=True
    )
    assert done.returncode == 0 and "validate" in done.stdout, done.stderr
    # Negative control: without site-packages (-S: no .pth read) the same Python finds no module there.
    done = subprocess.run(
        [python, "-S", "-m", "flower_federation"], cwd=tmp_path, env=env, capture_output=True, text=True
    )
    assert "No module named flower_federation" in done.stderr


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


# --- render: every problem at once, --stack-outputs checked against what the config reads ------------------------

GOLDEN = ROOT / "tests" / "golden"
HUB_STACK = "acme/flower-federation/hub"
SITE_STACK = "acme/flower-federation/site-chart"


def cli(*argv: str) -> tuple[int, str, str]:
    """(exit code, stdout, stderr) of `python -m flower_federation ARGV...`, in-process."""
    import contextlib
    import io

    from flower_federation.cli.main import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(list(argv))
    return code, out.getvalue(), err.getvalue()


def _stack_file(tmp_path: Path, name: str, edit=None) -> str:
    """A golden stack file, its federation value edited by `edit`."""
    import yaml

    settings = yaml.safe_load((GOLDEN / f"Pulumi.{name}.yaml").read_text())
    if edit is not None:
        edit(settings["config"]["flower-federation:federation"])
    path = tmp_path / f"Pulumi.{name}.yaml"
    path.write_text(yaml.safe_dump(settings, sort_keys=False))
    return str(path)


def _bad_cidr(federation) -> None:
    federation["supernodes"]["superlink"]["cidrs"] = ["203.0.113.7"]


def _problems(err: str) -> list[str]:
    return [line[4:] for line in err.splitlines() if line.startswith("  - ")]


def test_render_reports_a_missing_stack_outputs_with_every_config_problem(tmp_path):
    site = _stack_file(tmp_path, "site-from-hub", _bad_cidr)
    code, out, err = cli("render", "--config-file", site)
    _, _, validated = cli("validate", "--config-file", site)
    assert code == 2 and out == "" and "Traceback" not in err
    problems = _problems(err)
    assert len(problems) == 2, err
    missing = (
        f"federation.supernodes.superlink.certificate.fromStack: the config reads the outputs of stack '{HUB_STACK}'"
    )
    assert problems[0].startswith(missing) and f"pass --stack-outputs {HUB_STACK}=FILE.json" in problems[0]
    # The config's problem, as `validate` says it.
    assert problems[1] in _problems(validated) and "'203.0.113.7' is not a CIDR" in problems[1]


def test_render_with_only_config_problems_says_what_validate_says(tmp_path):
    site = _stack_file(tmp_path, "site-from-hub", _bad_cidr)
    outputs = f"{HUB_STACK}={GOLDEN / 'hub.outputs.json'}"
    code, out, err = cli("render", "--config-file", site, "--stack-outputs", outputs)
    assert (code, out) == (1, "")
    assert err == cli("validate", "--config-file", site)[2]


def test_stack_outputs_of_a_stack_the_config_never_reads_are_an_error(tmp_path):
    hub = _stack_file(tmp_path, "hub")
    read = f"{SITE_STACK}={GOLDEN / 'site-chart.outputs.json'}"
    unread = f"acme/flower-federation/lab-c={GOLDEN / 'site-chart.outputs.json'}"
    code, out, err = cli("render", "--config-file", hub, "--stack-outputs", read, "--stack-outputs", unread)
    assert code == 2 and out == ""
    (problem,) = _problems(err)
    assert problem.startswith(f"--stack-outputs {unread}: the config reads no stack 'acme/flower-federation/lab-c'")
    assert f"the stacks it reads (fromStack): {SITE_STACK}" in problem


def test_a_mistyped_stack_name_is_an_error_with_a_did_you_mean(tmp_path):
    site = _stack_file(tmp_path, "site-from-hub", _bad_cidr)
    typo = f"acme/flower-federation/hbu={GOLDEN / 'hub.outputs.json'}"
    code, out, err = cli("render", "--config-file", site, "--stack-outputs", typo)
    assert code == 2 and out == ""
    problems = _problems(err)
    assert len(problems) == 3, err  # the typo, the stack left without outputs, the config's own problem
    assert problems[0].startswith(f"--stack-outputs {typo}: the config reads no stack 'acme/flower-federation/hbu'")
    assert f"did you mean '{HUB_STACK}'?" in problems[0]
    assert f"reads the outputs of stack '{HUB_STACK}'" in problems[1]
    assert "'203.0.113.7' is not a CIDR" in problems[2]


def test_a_config_that_reads_no_stack_says_so(tmp_path):
    site = _stack_file(tmp_path, "site-chart")
    given = f"{HUB_STACK}={GOLDEN / 'hub.outputs.json'}"
    code, _, err = cli("render", "--config-file", site, "--stack-outputs", given)
    assert code == 2
    (problem,) = _problems(err)
    assert problem == (
        f"--stack-outputs {given}: the config reads no stack '{HUB_STACK}': it reads no other stack's outputs "
        "(no fromStack)"
    )


def test_unreadable_stack_outputs_are_reported_with_the_rest(tmp_path):
    site = _stack_file(tmp_path, "site-from-hub", _bad_cidr)
    (tmp_path / "hub.json").write_text("{not json")
    code, _, err = cli("render", "--config-file", site, "--stack-outputs", f"{HUB_STACK}={tmp_path / 'hub.json'}")
    assert code == 2
    problems = _problems(err)
    assert len(problems) == 2 and "is not JSON" in problems[0] and "'203.0.113.7' is not a CIDR" in problems[1]


# --- the stack file: its shape, its YAML; what validate and render print ---------------------------------------


def _file(tmp_path: Path, text: str, name: str = "Pulumi.dev.yaml") -> str:
    path = tmp_path / name
    path.write_text(text)
    return str(path)


FEDERATION = "    name: demo\n    supernodes:\n      pools:\n        - name: a\n          replicas: 1\n"


def test_a_stack_file_without_config_says_what_it_found(tmp_path):
    dedented = "".join(line[2:] + "\n" for line in FEDERATION.splitlines())
    path = _file(tmp_path, "flower-federation:federation:\n" + dedented)
    for command in ("validate", "render"):
        code, out, err = cli(command, "--config-file", path)
        assert (code, out) == (1, ""), err
        (problem,) = _problems(err)
        assert "has no `config:`" in problem and "flower-federation:federation" in problem, problem
        assert "put it under `config:`" in problem


def test_a_misspelt_config_key_gets_a_did_you_mean(tmp_path):
    path = _file(tmp_path, "config:\n  flower-federation:federaton:\n" + FEDERATION)
    code, _, err = cli("validate", "--config-file", path)
    assert code == 1
    (problem,) = _problems(err)
    assert "flower-federation:federaton" in problem
    assert "did you mean 'flower-federation:federation'?" in problem


def test_an_unknown_key_of_this_project_beside_the_federation_is_a_problem(tmp_path):
    text = "config:\n  flower-federation:nodeAuthKey: {}\n  kubernetes:context: kind\n  flower-federation:federation:\n"
    code, _, err = cli("validate", "--config-file", _file(tmp_path, text + FEDERATION))
    assert code == 1
    (problem,) = _problems(err)  # another namespace's key (kubernetes:) is the provider's, not ours
    assert problem.startswith("config.flower-federation:nodeAuthKey: ")
    assert "did you mean 'flower-federation:nodeAuthKeys'?" in problem


def test_a_key_yaml_reads_as_no_string_is_a_problem_validate_and_render_agree_on(tmp_path):
    """`~:`, `true:`, `1.5:` as keys: Pulumi passes config as JSON (the keys "null", "true", "1.5"), so `render` took
    them where `validate` reported None and True at odd paths. Both now say one problem per key at its mapping; the
    same keys quoted are the strings they look like (the negative control)."""
    labels = "    labels:\n      ~: c\n      true: d\n      1.5: e\n"
    path = _file(tmp_path, "config:\n  flower-federation:federation:\n" + FEDERATION + labels)
    said = []
    for command in ("validate", "render"):
        code, out, err = cli(command, "--config-file", path)
        assert (code, out) == (1, ""), err
        said.append(_problems(err))
    assert said[0] == said[1] and said[0] == [
        f"federation.labels: key {key} is read as {kind}, not a string: quote it in the file (unquoted, Pulumi passes "
        f'it on as the key "{key}")'
        for key, kind in (("null", "null"), ("true", "a boolean"), ("1.5", "a number"))
    ], said
    quoted = labels.replace("~:", '"null":').replace("true:", '"true":').replace("1.5:", '"1.5":')
    path = _file(tmp_path, "config:\n  flower-federation:federation:\n" + FEDERATION + quoted, "Pulumi.q.yaml")
    assert cli("validate", "--config-file", path)[0] == 0


def test_a_yaml_syntax_error_names_file_line_and_column(tmp_path):
    path = _file(tmp_path, "config:\n  flower-federation:federation:\n    name: demo\n   bad: [\n")
    code, out, err = cli("validate", "--config-file", path)
    assert (code, out) == (2, "")
    assert err.startswith(f"error: {path}:4:4: not valid YAML: ")
    assert "<unicode string>" not in err and "\n" not in err.strip()


def test_import_names_the_line_and_column_of_a_yaml_error_too(tmp_path, capsys):
    from tests.support.importing import run_import

    path = _file(tmp_path, "supernode:\n  image: {tag: 1\n", "values.yaml")
    code, out, err = run_import(capsys, "helm", path)
    assert (code, out) == (2, "")
    assert err.startswith(f"error: {path}:3:1: not valid YAML: ") and "<unicode string>" not in err


def test_validate_on_a_hub_says_it_runs_no_supernodes():
    code, out, _ = cli("validate", "--config-file", str(GOLDEN / "Pulumi.hub.yaml"))
    assert code == 0
    assert out.rstrip().endswith("StatefulSet pools: none (a hub runs no SuperNodes)")


def test_warnings_say_they_are_warnings():
    code, _, err = cli("render", "--config-file", str(GOLDEN / "Pulumi.site-chart.yaml"))
    assert code == 0
    said = [line for line in err.splitlines() if "SuperNodes may reach port 9092 at any address" in line]
    assert said and all(line.startswith("warning: ") for line in said), err


def test_the_top_level_help_says_its_description_whole():
    import contextlib
    import io

    import pytest

    from flower_federation.cli import main as cli_main

    out = io.StringIO()
    with contextlib.redirect_stdout(out), pytest.raises(SystemExit):
        cli_main.main(["--help"])
    description = " ".join(out.getvalue().split("\n\n")[1].split())
    assert description == " ".join(cli_main.__doc__.split("\n\n")[0].split())
    assert description.endswith("check any manifests against the federation's promises (check).")


def test_an_empty_federation_key_says_it_is_empty_once(tmp_path):
    path = _file(tmp_path, "config:\n  flower-federation:federation:\n")
    code, out, err = cli("validate", "--config-file", path)
    assert (code, out) == (1, "")
    assert _problems(err) == [
        "federation: missing: flower-federation:federation in Pulumi.dev.yaml is empty (nothing under it): put "
        "the federation's settings under it, indented"
    ]


def test_check_of_a_stack_file_says_render_it_first(tmp_path):
    code, out, err = cli("check", str(GOLDEN / "Pulumi.hub.yaml"))
    assert (code, out) == (2, "")
    assert "this is a Pulumi stack settings file (`config:`), not Kubernetes objects: render it first" in err
    # The negative control: YAML that is neither a stack file nor an object keeps the general message.
    code, _, err = cli("check", _file(tmp_path, "a: 1\n", "other.yaml"))
    assert code == 2 and err.endswith("document 1 of cluster default is not a Kubernetes object (no kind)\n")


def test_one_report_names_fields_one_way():
    """The operator's CEL messages lose their `spec.` subject: the problem's `federation.` path names the field."""
    from flower_federation.config.errors import ConfigError
    from flower_federation.plan import load_plan

    try:
        load_plan({"name": "x", "supernodes": {"pools": []}}, "dev")
    except ConfigError as err:
        report = str(err)
    assert "  - federation.supernodes.pools: must contain at least one pool" in report
    assert "spec." not in report


def test_a_tilde_root_certificates_path_says_tilde_is_not_expanded():
    from flower_federation.config.errors import ConfigError
    from flower_federation.plan import load_plan

    def report(path: str) -> str:
        try:
            load_plan({"name": "x", "version": "1.42.0", "cli": {"rootCertificates": path}}, "dev")
        except ConfigError as err:
            return str(err)
        return ""

    assert "federation.cli.rootCertificates: '~/ca.crt': flwr 1.42.0 needs an absolute path here; `~` is not " in (
        report("~/ca.crt")
    )
    assert "absolute path here\n" in report("ca.crt") + "\n" and "`~`" not in report("ca.crt")  # negative control
