"""Vendor strict JSON schemas of the Gateway API kinds the project renders, from each
release's CRDs (a folder per release, one file per kind and served version, plus README.md).

    .venv/bin/python -m tests.support.gateway_api.generate GATEWAY_API_GIT_DIR

GATEWAY_API_GIT_DIR is a clone of kubernetes-sigs/gateway-api (bare or not) holding
the tags in RELEASES; the CRDs are read from those tags. Several releases, because a
rendered object must pass every release it can meet: the oldest we support (v1.4, whose
TLSRoute is v1alpha2, experimental) and the current ones (v1.5+, TLSRoute v1, standard).
A bump: add the release to RELEASES with its SELECTION, then run the command; the tests
check each file names its release.

Each schema is the CRD version's `schema.openAPIV3Schema`, made strict the way the API
server with strict field validation is: `additionalProperties: false` on every object
schema with `properties` (unless `x-kubernetes-preserve-unknown-fields`), `uniqueItems`
on `x-kubernetes-list-type: set` lists, `apiVersion` and `kind` required and fixed,
`metadata` the Kubernetes 1.34 ObjectMeta of kubernetes-validate (name required).
Descriptions and `status` are left out (rendered objects carry no status).
`x-kubernetes-list-map-keys` is kept and enforced by tests/support/schema.py;
`x-kubernetes-validations` (CEL) is kept, unevaluated, and listed in README.md.
"""

from __future__ import annotations

import argparse
import json
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml

GROUP = "gateway.networking.k8s.io"
REPOSITORY = "kubernetes-sigs/gateway-api"
Selection = tuple[tuple[str, str, tuple[str, ...]], ...]
# (channel, CRD plural, versions vendored). Standard channel wherever the kind is in it.
_STANDARD: Selection = (
    ("standard", "httproutes", ("v1",)),
    ("standard", "grpcroutes", ("v1",)),
    ("standard", "backendtlspolicies", ("v1",)),
    ("standard", "referencegrants", ("v1beta1",)),
)
# TLSRoute is experimental-only in v1.4 (it serves v1alpha2 and v1alpha3 there). From v1.5 it is v1 in the
# standard channel, whose CRD still lists v1alpha2/v1alpha3 but no longer serves them (only the experimental
# channel does, deprecated): a cluster on the standard channel refuses a v1alpha2 TLSRoute.
RELEASES: dict[str, Selection] = {
    "v1.4.1": (*_STANDARD, ("experimental", "tlsroutes", ("v1alpha2", "v1alpha3"))),
    "v1.5.1": (*_STANDARD, ("standard", "tlsroutes", ("v1",))),
    "v1.6.1": (*_STANDARD, ("standard", "tlsroutes", ("v1",))),
}
# kubernetes-validate's definitions (`$id` https://kubernetes.io/api/_definitions.json),
# registered beside these schemas by tests/support/schema.py.
OBJECT_META = "https://kubernetes.io/api/_definitions.json#/$defs/io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"
OUT = Path(__file__).resolve().parent
SCRIPT = "tests/support/gateway_api/generate.py"


def crd_path(channel: str, plural: str) -> str:
    return f"config/crd/{channel}/{GROUP}_{plural}.yaml"


def strict(node: dict[str, Any]) -> dict[str, Any]:
    """One structural-schema node (and what it holds), without descriptions, strict."""
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key == "description":
            continue
        if key == "properties":
            out[key] = {name: strict(sub) for name, sub in value.items()}
        elif key in ("items", "additionalProperties", "not") and isinstance(value, dict):
            out[key] = strict(value)
        elif key in ("allOf", "anyOf", "oneOf"):
            out[key] = [strict(sub) for sub in value]
        else:
            out[key] = value
    if node.get("x-kubernetes-int-or-string") or node.get("nullable"):
        raise SystemExit(f"unsupported schema node (int-or-string / nullable): {sorted(node)}")
    preserve = node.get("x-kubernetes-preserve-unknown-fields") is True
    if node.get("type") == "object" and not preserve and "additionalProperties" not in node:
        # With `properties`: no other field. Without (nor additionalProperties): no field at all.
        out["additionalProperties"] = False
    if node.get("x-kubernetes-list-type") == "set":
        out["uniqueItems"] = True
    return out


def kind_schema(crd: dict[str, Any], version: str, comment: str, release: str) -> dict[str, Any]:
    kind = crd["spec"]["names"]["kind"]
    (served,) = [v for v in crd["spec"]["versions"] if v["name"] == version]
    if not served.get("served"):
        raise SystemExit(f"{kind} {version} is not served in {release}")
    source = served["schema"]["openAPIV3Schema"]
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


def cel_rules(node: dict[str, Any], path: str = "") -> Iterator[tuple[str, str, str]]:
    """(field path, message, rule) of every x-kubernetes-validations rule, outermost first."""
    for rule in node.get("x-kubernetes-validations", []):
        yield path or ".", rule.get("message") or rule.get("messageExpression", ""), rule["rule"]
    for name, sub in node.get("properties", {}).items():
        yield from cel_rules(sub, f"{path}.{name}")
    if isinstance(node.get("items"), dict):
        yield from cel_rules(node["items"], f"{path}[]")
    if isinstance(node.get("additionalProperties"), dict):
        yield from cel_rules(node["additionalProperties"], f"{path}{{}}")


Vendored = list[tuple[str, str, str, dict[str, Any]]]  # (file under OUT, CRD path, version, schema)


def readme(commits: dict[str, str], files: Vendored) -> str:
    releases = ", ".join(f"**{release}** (commit `{commit}`)" for release, commit in commits.items())
    lines = [
        "# Gateway API schemas (vendored, generated)",
        "",
        f"Strict JSON schemas (Draft 2020-12) of the Gateway API kinds the project renders, from "
        f"[{REPOSITORY}](https://github.com/{REPOSITORY}) releases {releases}, a folder per release, "
        "each CRD version's `spec.versions[].schema.openAPIV3Schema`. "
        "`tests/support/schema.validate` checks every `gateway.networking.k8s.io` object against the schema of "
        "each release that serves its kind and version (any other kind or version of that group is refused); "
        "every other object goes to kubernetes-validate.",
        "",
        "Do not edit: regenerate with `.venv/bin/python -m tests.support.gateway_api.generate "
        "PATH/TO/gateway-api.git` after changing `RELEASES` in `generate.py`.",
        "",
        "| file | apiVersion | kind | source (CRD in the release) |",
        "| --- | --- | --- | --- |",
    ]
    for name, path, version, schema in files:
        kind = schema["properties"]["kind"]["const"]
        lines.append(f"| `{name}` | `{GROUP}/{version}` | {kind} | `{path}` |")
    lines += [
        "",
        "## What the conversion does",
        "",
        "- `additionalProperties: false` on every object schema that has no `additionalProperties` and no "
        "`x-kubernetes-preserve-unknown-fields: true` (the API server with strict field validation refuses "
        "unknown fields).",
        "- `x-kubernetes-list-type: set` gets `uniqueItems: true`; `x-kubernetes-list-map-keys` (duplicate keys "
        "refused) is enforced by `tests/support/schema.py`, as are Go (RE2) `pattern` semantics (`$` is the "
        "end of the text) and integers that are JSON integers (not `1.0`).",
        "- `apiVersion` and `kind` are required and fixed; `metadata` is kubernetes-validate's 1.34 ObjectMeta "
        "(strict) with `name` required.",
        "- Descriptions and the `status` subtree are left out: a rendered object carrying `status` is refused.",
        "- Kept verbatim: types, enums, patterns, lengths, bounds, `required`, `default` (annotation only: "
        "nothing is defaulted, so the CEL rules below that rely on defaults see them only on the server).",
        "",
        "## CEL rules (`x-kubernetes-validations`): kept in the files, NOT evaluated",
        "",
        "No CEL evaluator is a dependency; a rendered object must respect these by construction "
        "(the API server evaluates them after defaulting).",
    ]
    for name, _path, _version, schema in files:
        rules = list(cel_rules(schema))
        lines += ["", f"### `{name}` ({len(rules)} rules)", ""]
        if not rules:
            lines.append("None.")
            continue
        lines += ["| field | message | rule |", "| --- | --- | --- |"]
        for field, message, rule in rules:
            message_cell, rule_cell = message.replace("|", "\\|"), rule.replace("|", "\\|")
            lines.append(f"| `{field}` | {message_cell} | `{rule_cell}` |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "source", type=Path, help=f"a git clone (bare or not) of {REPOSITORY} holding the tags {', '.join(RELEASES)}"
    )
    parser.add_argument("--out", type=Path, default=OUT, help="where the files go (default: beside this script)")
    args = parser.parse_args(argv)
    source: Path = args.source
    out: Path = args.out
    git_dir = source / ".git" if (source / ".git").is_dir() else source

    def git(*cmd: str) -> str:
        run = subprocess.run(["git", f"--git-dir={git_dir}", *cmd], check=True, capture_output=True, text=True)
        return run.stdout

    commits: dict[str, str] = {}
    files: Vendored = []
    for release, selection in RELEASES.items():
        commit = commits[release] = git("rev-parse", f"{release}^{{commit}}").strip()
        for channel, plural, versions in selection:
            path = crd_path(channel, plural)
            crd = yaml.safe_load(git("show", f"{release}:{path}"))
            notes = crd["metadata"].get("annotations", {})
            if notes.get(f"{GROUP}/bundle-version") != release or notes.get(f"{GROUP}/channel") != channel:
                raise SystemExit(f"{path}: bundle-version/channel {notes} is not {release}/{channel}")
            for version in versions:
                comment = (
                    f"Gateway API {release} ({REPOSITORY} commit {commit}), {channel} channel: {path}, "
                    f"spec.versions[name={version}].schema.openAPIV3Schema, made strict by {SCRIPT}. Do not edit."
                )
                schema = kind_schema(crd, version, comment, release)
                name = f"{release}/{crd['spec']['names']['kind'].lower()}-{version}.json"
                files.append((name, path, version, schema))
    for old in [*out.glob("*.json"), *out.glob("*/*.json")]:
        old.unlink()
    for name, _path, _version, schema in files:
        (out / name).parent.mkdir(parents=True, exist_ok=True)
        (out / name).write_text(json.dumps(schema, indent=1) + "\n")
    (out / "README.md").write_text(readme(commits, files))
    print(f"wrote {len(files)} schemas of {len(RELEASES)} releases and README.md to {out}")


if __name__ == "__main__":
    main()
