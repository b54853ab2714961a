"""`python -m flower_federation check FILE.yaml... [--strict]`: every policy of checks/ over
Kubernetes manifests (our `render`, `helm template`, `kubectl get -o yaml`, `-` for stdin).

The files are one set of objects, as `kubectl apply -f a -f b` would create them; a render's
`# cluster: NAME` lines split it by cluster. Violations are printed by object and field, with
their level and remediation. Exit 1 when one is mandatory (with --strict, any); advisory ones
alone are printed and exit 0. Exit 2 when a file cannot be read as Kubernetes objects."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING, Any

import yaml

from flower_federation.cli.stack_file import UsageError, yaml_error

if TYPE_CHECKING:
    from flower_federation.checks.model import Violation

# checks/ (its policies, crossplane's nginx parser) is imported by `check` alone, inside its functions: every
# command builds this parser, and `render` (issue 36: its own cost within 1.2x of the Pulumi SDK's) uses none of it.

HELP = "check Kubernetes manifests against the federation's policies (TLS, node auth, NetworkPolicies, ...)"


def add_parser(sub: Any) -> None:
    p = sub.add_parser("check", help=HELP, description=HELP[0].upper() + HELP[1:] + ".")
    p.add_argument(
        "files", nargs="+", metavar="FILE.yaml", help="multi-document YAML of Kubernetes objects; - is stdin"
    )
    p.add_argument("--strict", action="store_true", help="exit 1 on advisory violations too")
    p.set_defaults(fn=cmd_check)


def _read(path: str) -> str:
    if path == "-":
        return sys.stdin.read()
    try:
        with open(path, encoding="utf-8") as f:
            return f.read()
    except FileNotFoundError:
        raise UsageError(f"{path}: no such file") from None
    except IsADirectoryError:
        raise UsageError(f"{path}: is a directory, not a YAML file") from None
    except UnicodeDecodeError:
        raise UsageError(f"{path}: not UTF-8 text") from None
    except OSError as err:
        raise UsageError(f"{path}: cannot read it: {err.strerror}") from None


def _load(paths: list[str]) -> dict[str, list[dict[str, Any]]]:
    from flower_federation.checks.reading import NotManifests, read_clusters

    clusters: dict[str, list[dict[str, Any]]] = {}
    for path in paths:
        name = "<stdin>" if path == "-" else path
        try:
            groups = read_clusters(_read(path))
        except yaml.YAMLError as err:
            raise UsageError(yaml_error(name, err)) from None
        except NotManifests as err:
            raise UsageError(f"{name}: {err}") from None
        if not any(objects for _, objects in groups):
            raise UsageError(f"{name}: holds no Kubernetes object")
        for cluster, objects in groups:
            clusters.setdefault(cluster, []).extend(objects)
    return clusters


def _print(v: Violation, cluster: str) -> None:
    from flower_federation.checks.policies import BY_NAME

    where = f"[cluster {cluster}] " if cluster else ""
    print(f"{v.level.upper()} {v.policy}: {where}{v.ref} {v.path}")
    print(f"  {v.message}")
    print(f"  remediation: {BY_NAME[v.policy].remediation}")


def _count(n: int, one: str, many: str = "") -> str:
    return f"{n} {one if n == 1 else many or one + 's'}"


def cmd_check(args: argparse.Namespace) -> int:
    from flower_federation.checks.model import ADVISORY, MANDATORY
    from flower_federation.checks.policies import POLICIES, flatten, run

    clusters = _load(args.files)
    found = [(cluster, v) for cluster, objects in clusters.items() for v in run(objects)]
    named = len(clusters) > 1
    for cluster, v in found:
        _print(v, cluster if named else "")
    counts = {level: sum(1 for _, v in found if v.level == level) for level in (MANDATORY, ADVISORY)}
    objects = sum(len(list(flatten(o))) for o in clusters.values())
    scope = f"{_count(len(POLICIES), 'policy', 'policies')}, {_count(objects, 'object')}"
    if found:
        # One noun for both counts: "1 mandatory and 0 advisory violations".
        print(f"check: {counts[MANDATORY]} mandatory and {counts[ADVISORY]} advisory violations ({scope})")
    else:
        print(f"check: no violations ({scope})")
    return 1 if counts[MANDATORY] or (args.strict and counts[ADVISORY]) else 0
