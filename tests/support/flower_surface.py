"""Runs inside a Flower venv (`<venv>/bin/python flower_surface.py`) and prints, as one JSON object, what of that
Flower the project depends on and the canary (tests/support/canary.py) compares between versions:

- `flags`: every option string of each program's argparse parser, the ones its main() calls (flower_worker.PARSERS);
- `routes`: `METHOD /path` of the Fleet, Control and health routes the SuperLink's and the SuperNode's HTTP apps
  register (their own `create_app`, read through the OpenAPI document FastAPI builds from the registered routes;
  none before the HTTP era);
- `revisions`: the state's Alembic revisions ({revision: [down revisions, first docstring line]}) and heads, read
  with Flower's own Alembic configuration (none before Alembic).

Only the standard library and Flower: it runs under the venv's Python, any tested version."""

import json
import sys
from importlib.metadata import PackageNotFoundError, version

import flower_worker  # this file's directory is sys.path[0]

# The routes a deployment depends on: the SuperNodes' Fleet API (through the Fleet-only proxy), the CLI's Control
# API and the probes' /health. (The Runtime API stays inside a pod: its routes are Flower's own business.)
ROUTE_PREFIXES = ("/v1/fleet/", "/v1/control/", "/health")


def _flwr_version():
    for dist in ("flwr", "flwr-nightly"):  # the nightly installs the same `flwr` module
        try:
            return dist, version(dist)
        except PackageNotFoundError:
            continue
    raise RuntimeError("neither flwr nor flwr-nightly is installed")


def _flags():
    out = {}
    for program in flower_worker.PARSERS:
        parser = flower_worker._parser(program)
        out[program] = sorted(o for action in parser._actions for o in action.option_strings)
    return out


def _routes():
    out = {}
    for app, module in (("superlink", "flwr.superlink.main"), ("supernode", "flwr.supernode.main")):
        try:
            create_app = __import__(module, fromlist=["create_app"]).create_app
        except (ImportError, AttributeError):
            continue  # no HTTP app: the gRPC era
        paths = create_app().openapi()["paths"]
        out[app] = sorted(
            f"{method.upper()} {path}"
            for path, ops in paths.items()
            if path.startswith(ROUTE_PREFIXES)
            for method in ops
        )
    return out


def _revisions():
    try:
        from alembic.script import ScriptDirectory
        from flwr.supercore.state.alembic.utils import build_alembic_config
        from sqlalchemy import create_engine
    except ImportError:
        return {"all": {}, "heads": []}  # no Alembic: Flower before 1.26
    script = ScriptDirectory.from_config(build_alembic_config(create_engine("sqlite://")))
    revisions = {}
    for rev in script.walk_revisions():
        down = rev.down_revision
        downs = [] if down is None else [down] if isinstance(down, str) else list(down)
        revisions[rev.revision] = [sorted(downs), (rev.doc or "").strip().splitlines()[0] if rev.doc else ""]
    return {"all": revisions, "heads": sorted(script.get_heads())}


def main():
    dist, ver = _flwr_version()
    doc = {"package": dist, "version": ver, "flags": _flags(), "routes": _routes(), "revisions": _revisions()}
    sys.stdout.write(json.dumps(doc, sort_keys=True) + "\n")


if __name__ == "__main__":
    main()
