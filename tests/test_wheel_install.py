"""The package as a user gets it: the wheel `pip wheel .` builds, installed with its declared
dependency ranges into a fresh virtualenv (nothing of this checkout on its path), runs a user's
own Pulumi program under Pulumi's mocks (`Federation` with the user's Kubernetes provider), and
the CLI works from it (the schema files, the Helm importer's chart documents)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import textwrap
import zipfile
from pathlib import Path

import pytest

from flower_federation.flower.dialects import HTTP_PORT

ROOT = Path(__file__).resolve().parents[1]
# What a checkout holds that a build must not see (venvs, caches, earlier builds).
NOT_SOURCES = shutil.ignore_patterns(
    ".git", ".venv*", "venv", "__pycache__", ".*_cache", ".hypothesis", "build", "dist", "*.egg-info"
)

USER_PROGRAM = textwrap.dedent(
    """
    import json

    import pulumi
    import pulumi_kubernetes as k8s

    from flower_federation import Federation, FederationArgs, __version__
    from flower_federation.cli.offline import placeholder_outputs


    class Mocks(pulumi.runtime.Mocks):
        def __init__(self):
            self.seen = []

        def new_resource(self, args):
            self.seen.append([args.typ, args.name, (args.provider or "").split("::")[-2:-1]])
            return f"{args.name}-id", placeholder_outputs(args.typ, args.name, args.inputs)

        def call(self, args):
            return {}, None


    mocks = Mocks()
    pulumi.runtime.set_mocks(mocks, project="platform", stack="prod", preview=False)


    @pulumi.runtime.test
    def program():
        eks = k8s.Provider("eks", kubeconfig="<the cluster this program creates>")
        args = FederationArgs.model_validate(
            {
                "namespace": "flower",
                "superlink": {"image": "flwr/superlink:1.42.0"},
                "supernodes": {"image": "flwr/supernode:1.42.0", "pools": [{"name": "cpu", "replicas": 2}]},
            }
        )
        federation = Federation("fl", args, pulumi.ResourceOptions(provider=eks))

        def report(values):
            found.update(version=__version__, fleet=values[0], flwr=values[1])

        return pulumi.Output.all(federation.fleet_address, federation.flwr_config).apply(report)


    found = {}
    program()  # returns once every registration is done
    print(json.dumps({**found, "seen": mocks.seen}))
    """
)


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The python of a fresh venv holding only the built wheel and what it declares."""
    work = tmp_path_factory.mktemp("wheel")
    source = work / "source"
    shutil.copytree(ROOT, source, ignore=NOT_SOURCES, symlinks=True)
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check", "--quiet"]
    subprocess.run([*pip, "wheel", "--no-deps", "--wheel-dir", str(work / "dist"), str(source)], check=True)
    (wheel,) = (work / "dist").glob("flower_federation-*.whl")
    subprocess.run([sys.executable, "-m", "venv", str(work / "venv")], check=True)
    python = work / "venv" / "bin" / "python"
    # --no-compile: pip would byte-compile every module of every dependency (pulumi_kubernetes alone has
    # thousands), most CPU of this fixture; the few a run imports compile on first import, into this venv.
    subprocess.run([str(python), *pip[1:], "install", "--no-compile", str(wheel)], check=True)
    return python


def run(python: Path, *args: str, cwd: Path, stdin: str = "") -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(python), *args], cwd=cwd, input=stdin, capture_output=True, text=True, timeout=300)


def test_the_wheel_holds_the_package_its_data_and_the_typing_marker(installed: Path) -> None:
    (wheel,) = installed.parents[2].glob("dist/flower_federation-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    for needed in (
        "flower_federation/py.typed",
        "flower_federation/config/config.schema.json",
        "flower_federation/flower/scripts/register_nodes.py",
        "flower_federation/importers/chart_docs/helm-parameters.md",
        "flower_federation/importers/chart_docs/flower-supernode-helm-chart.md",
    ):
        assert needed in names, needed
    assert not [n for n in names if n.startswith(("tests/", "bench/", "docs/"))]  # the package alone


def test_a_users_program_with_its_own_provider_runs_from_the_installed_wheel(installed: Path, tmp_path: Path) -> None:
    (tmp_path / "program.py").write_text(USER_PROGRAM)
    done = run(installed, "program.py", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout.strip().splitlines()[-1])
    # Flower 1.42 serves Fleet and Control on one HTTP port, which `flwr` reaches in the cluster too.
    assert report["fleet"] == f"fl-superlink.flower.svc.cluster.local:{HTTP_PORT}"
    assert f'address = "{report["fleet"]}"' in report["flwr"] and "root-certificates" in report["flwr"]
    kubernetes = [(typ, name, provider) for typ, name, provider in report["seen"] if typ.startswith("kubernetes:")]
    assert {"kubernetes:apps/v1:StatefulSet"} <= {typ for typ, _, _ in kubernetes}
    # Every object goes through the user's provider, none through a default one.
    assert kubernetes and all(provider == ["eks"] for _, _, provider in kubernetes)
    # Nothing of this checkout was imported: the package came from the venv.
    where = run(installed, "-c", "import flower_federation; print(flower_federation.__file__)", cwd=tmp_path)
    assert "/venv/lib/" in where.stdout and str(ROOT) not in where.stdout


def test_the_cli_runs_from_the_installed_wheel(installed: Path, tmp_path: Path) -> None:
    shutil.copy(ROOT / "Pulumi.dev.yaml", tmp_path / "Pulumi.dev.yaml")
    (tmp_path / "Pulumi.yaml").write_text("name: flower-federation\nruntime: python\n")
    validated = run(installed, "-m", "flower_federation", "validate", "--stack", "dev", cwd=tmp_path)
    assert validated.returncode == 0 and validated.stdout.startswith("ok: federation 'demo'"), validated.stderr
    schema = run(installed, "-m", "flower_federation", "schema", cwd=tmp_path)
    assert json.loads(schema.stdout)["title"]
    values = "supernode:\n  superlink:\n    address: fl.example.org\n    port: 443\n"
    (tmp_path / "values.yaml").write_text(values)
    imported = run(
        installed, "-m", "flower_federation", "import", "helm", "values.yaml", "--output-dir", "out", cwd=tmp_path
    )
    assert imported.returncode == 0, imported.stderr
    assert (tmp_path / "out").is_dir() and list((tmp_path / "out").iterdir())
