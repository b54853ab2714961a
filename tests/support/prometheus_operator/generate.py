"""Vendor strict JSON schemas of the Prometheus Operator kinds `monitoring` renders (ServiceMonitor,
PrometheusRule; monitoring.coreos.com/v1) from the operator's release CRDs, made strict exactly as the Gateway
API schemas are (tests/support/gateway_api/generate.py's `strict`: unknown fields refused at any depth):

    .venv/bin/python -m tests.support.prometheus_operator.generate PROMETHEUS_OPERATOR_GIT_DIR

PROMETHEUS_OPERATOR_GIT_DIR is a clone of prometheus-operator/prometheus-operator (bare or not) holding RELEASE.
Descriptions and `status` are left out; `apiVersion` and `kind` are required and fixed; `metadata` is the
Kubernetes 1.34 ObjectMeta of kubernetes-validate (name required). CEL rules are kept, unevaluated.
"""

from __future__ import annotations

import argparse
import json
import subprocess
from pathlib import Path
from typing import Any

import yaml

from tests.support.gateway_api.generate import OBJECT_META, cel_rules, strict

GROUP = "monitoring.coreos.com"
REPOSITORY = "prometheus-operator/prometheus-operator"
RELEASE = "v0.93.0"
KINDS = (("servicemonitors", "v1"), ("prometheusrules", "v1"))
OUT = Path(__file__).resolve().parent
SCRIPT = "tests/support/prometheus_operator/generate.py"


def crd_path(plural: str) -> str:
    return f"example/prometheus-operator-crd/{GROUP}_{plural}.yaml"


def without_int_or_string(node: Any) -> Any:
    """`x-kubernetes-int-or-string` nodes as the `anyOf: [integer, string]` the CRD already gives them (the
    Gateway API CRDs have none, so `strict` refuses the marker)."""
    if isinstance(node, list):
        return [without_int_or_string(v) for v in node]
    if not isinstance(node, dict):
        return node
    out = {k: without_int_or_string(v) for k, v in node.items()}
    if out.pop("x-kubernetes-int-or-string", None) and [a.get("type") for a in out.get("anyOf", [])] != [
        "integer",
        "string",
    ]:
        raise SystemExit(f"int-or-string without anyOf [integer, string]: {sorted(node)}")
    return out


def kind_schema(crd: dict[str, Any], version: str, comment: str) -> dict[str, Any]:
    kind = crd["spec"]["names"]["kind"]
    (served,) = [v for v in crd["spec"]["versions"] if v["name"] == version and v.get("served")]
    source = without_int_or_string(served["schema"]["openAPIV3Schema"])
    props = dict(source["properties"])
    props.pop("status", None)
    if set(props) != {"apiVersion", "kind", "metadata", "spec"}:
        raise SystemExit(f"{kind} {version}: unexpected top-level fields {sorted(props)}")
    schema = strict({**source, "properties": props})
    schema["properties"]["apiVersion"] = {"type": "string", "const": f"{GROUP}/{version}"}
    schema["properties"]["kind"] = {"type": "string", "const": kind}
    schema["properties"]["metadata"] = {"$ref": OBJECT_META, "required": ["name"]}
    schema["required"] = ["apiVersion", "kind", "metadata", *[r for r in source.get("required", []) if r != "status"]]
    return {"$schema": "https://json-schema.org/draft/2020-12/schema", "$comment": comment, **schema}


def readme(commit: str, files: list[tuple[str, str, dict[str, Any]]]) -> str:
    lines = [
        "# Prometheus Operator schemas (vendored, generated)",
        "",
        f"Strict JSON schemas (Draft 2020-12) of the Prometheus Operator kinds `monitoring` renders, from "
        f"[{REPOSITORY}](https://github.com/{REPOSITORY}) release **{RELEASE}** (commit `{commit}`), each CRD "
        "version's `spec.versions[].schema.openAPIV3Schema`, made strict as tests/support/gateway_api/README.md "
        "says (unknown fields refused, `status` and descriptions left out, ObjectMeta strict). "
        "`tests/support/schema.validate` checks every `monitoring.coreos.com` object against them.",
        "",
        "Do not edit: regenerate with `.venv/bin/python -m tests.support.prometheus_operator.generate "
        "PATH/TO/prometheus-operator.git` after changing `RELEASE` in `generate.py`.",
        "",
        "| file | kind | source | CEL rules (kept, not evaluated) |",
        "| --- | --- | --- | --- |",
    ]
    for name, path, schema in files:
        rules = len(list(cel_rules(schema)))
        lines.append(f"| `{name}` | {schema['properties']['kind']['const']} | `{path}` | {rules} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("source", type=Path, help=f"a git clone (bare or not) of {REPOSITORY} holding {RELEASE}")
    args = parser.parse_args(argv)
    git_dir = args.source / ".git" if (args.source / ".git").is_dir() else args.source

    def git(*cmd: str) -> str:
        return subprocess.run(["git", f"--git-dir={git_dir}", *cmd], check=True, capture_output=True, text=True).stdout

    commit = git("rev-parse", f"{RELEASE}^{{commit}}").strip()
    files = []
    for plural, version in KINDS:
        path = crd_path(plural)
        crd = yaml.safe_load(git("show", f"{RELEASE}:{path}"))
        comment = (
            f"Prometheus Operator {RELEASE} ({REPOSITORY} commit {commit}): {path}, "
            f"spec.versions[name={version}].schema.openAPIV3Schema, made strict by {SCRIPT}. Do not edit."
        )
        files.append(
            (
                f"{RELEASE}/{crd['spec']['names']['kind'].lower()}-{version}.json",
                path,
                kind_schema(crd, version, comment),
            )
        )
    for old in OUT.glob("*/*.json"):
        old.unlink()
    for name, _path, schema in files:
        (OUT / name).parent.mkdir(parents=True, exist_ok=True)
        (OUT / name).write_text(json.dumps(schema, indent=1) + "\n")
    (OUT / "README.md").write_text(readme(commit, files))
    print(f"wrote {len(files)} schemas and README.md to {OUT}")


if __name__ == "__main__":
    main()
