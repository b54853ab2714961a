"""The Pulumi package schema the component plugin serves (flower_federation/provider/schema.json): current, valid
against Pulumi's own metaschema (vendored in tests/support/), every `$ref` resolving, every config key an input, and
every golden stack config a value its types accept; each check with a negative control."""

from __future__ import annotations

import contextlib
import copy
import io
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import regress
from jsonschema import validators

from flower_federation.cli.main import main
from flower_federation.config import Federation
from flower_federation.kube.goyaml import load_stack_file
from flower_federation.provider import schema as package
from flower_federation.provider.schema import (
    ANY,
    EXTRA_INPUTS,
    FEDERATION,
    KUBERNETES_PROVIDER,
    KUBERNETES_VERSION,
    OUTPUTS,
    SCHEMA_FILE,
    TOKEN_PREFIX,
    package_schema,
    schema_text,
)

ROOT = Path(__file__).resolve().parent.parent
METASCHEMA = json.loads((ROOT / "tests" / "support" / "pulumi-package-metaschema.json").read_text(encoding="utf-8"))
GOLDEN_STACKS = sorted((ROOT / "tests" / "golden").glob("Pulumi.*.yaml")) + [ROOT / "Pulumi.dev.yaml"]
CONFIG_KEY = "flower-federation:federation"
BUILTINS = {f"pulumi.json#/{name}" for name in ("Any", "Archive", "Asset", "Json")}
# Pulumi's codegen (pkg/codegen/schema/bind.go refPathRegex): the path of another package's schema.
EXTERNAL_PATH = re.compile(r"^/?(?P<package>[-\w]+)/(?P<version>v[^/]*)/schema\.json$")


def schema() -> dict[str, Any]:
    return json.loads(SCHEMA_FILE.read_text(encoding="utf-8"))


def resource(spec: dict[str, Any]) -> dict[str, Any]:
    found: dict[str, Any] = spec["resources"][FEDERATION]
    return found


# --- generated, current -----------------------------------------------------------------------------------------


def test_committed_schema_is_current() -> None:
    assert SCHEMA_FILE.read_bytes() == schema_text().encode(), (
        "flower_federation/provider/schema.json is stale: run `make schema`"
    )


def test_schema_package_prints_the_committed_bytes_and_plain_schema_the_config_schema() -> None:
    for argv, expected in ((["schema", "--package"], schema_text()), (["schema"], None)):
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            assert main(argv) == 0
        assert out.getvalue() == expected if expected else json.loads(out.getvalue())["title"] == "Federation"


def test_the_version_is_the_packages_and_generation_is_deterministic() -> None:
    assert schema()["version"] == package.project_version()
    assert schema_text("1.2.3") == schema_text("1.2.3") and json.loads(schema_text("1.2.3"))["version"] == "1.2.3"


# --- the metaschema ---------------------------------------------------------------------------------------------


def _ecma_pattern(validator: Any, pattern: str, instance: Any, _schema: Any) -> Iterator[jsonschema.ValidationError]:
    # The metaschema's patterns are ECMA-262 (named groups `(?<major>...)`), which Python's re does not read.
    if validator.is_type(instance, "string") and regress.Regex(pattern).find(instance) is None:
        yield jsonschema.ValidationError(f"{instance!r} does not match {pattern!r}")


MetaValidator = validators.extend(jsonschema.Draft202012Validator, {"pattern": _ecma_pattern})


def metaschema_errors(spec: dict[str, Any]) -> list[str]:
    assert METASCHEMA["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    errors = MetaValidator(METASCHEMA).iter_errors(spec)
    return sorted(f"{'/'.join(map(str, e.absolute_path))}: {e.message[:200]}" for e in errors)


def test_the_schema_is_valid_against_pulumis_metaschema() -> None:
    assert metaschema_errors(schema()) == []


def test_the_language_section_uses_only_what_the_metaschema_defines() -> None:
    # The package's `language` is a free object in the metaschema; `$defs/languageSpec` says what each language
    # reads, without refusing other keys: a misspelt one would be ignored by codegen.
    language = schema()["language"]
    specs = METASCHEMA["$defs"]["languageSpec"]["properties"]
    assert set(language) <= set(specs)
    for name, settings in language.items():
        spec = METASCHEMA["$defs"][specs[name]["$ref"].removeprefix("#/$defs/")]
        assert set(settings) <= set(spec["properties"]), name
        assert MetaValidator({"$defs": METASCHEMA["$defs"], "$ref": specs[name]["$ref"]}).is_valid(settings)
    assert not MetaValidator({"$defs": METASCHEMA["$defs"], "$ref": specs["go"]["$ref"]}).is_valid(
        {"importBasePath": 1}
    )


def _mutations() -> dict[str, Any]:
    return {
        "a type that is no Pulumi type": lambda s: resource(s)["inputProperties"]["namespace"].update(type="text"),
        "a map with items": lambda s: resource(s)["inputProperties"]["labels"].update(items={"type": "string"}),
        "a version that is not semver": lambda s: s.update(version="v1.2"),
        "a type token with two parts": lambda s: s["types"].update({"flower-federation:Pool": {"type": "object"}}),
        "an enum without its values": lambda s: s["types"][TOKEN_PREFIX + "Role"].pop("enum"),
        "a $ref beside items": lambda s: resource(s)["inputProperties"]["superlink"].update(items={"type": "string"}),
    }


@pytest.mark.parametrize("mutation", sorted(_mutations()))
def test_the_metaschema_check_fails_on_a_broken_schema(mutation: str) -> None:
    broken = copy.deepcopy(schema())
    _mutations()[mutation](broken)
    assert metaschema_errors(broken) != []


# --- references -------------------------------------------------------------------------------------------------


def refs(node: Any) -> Iterator[str]:
    if isinstance(node, dict):
        if isinstance(node.get("$ref"), str):
            yield node["$ref"]
        for value in node.values():
            yield from refs(value)
    elif isinstance(node, list):
        for value in node:
            yield from refs(value)


def dangling(spec: dict[str, Any]) -> list[str]:
    """`$ref`s that resolve neither to a type of this package, a built-in, nor the Kubernetes provider of the pinned
    pulumi-kubernetes (as Pulumi's codegen parses them: bind.go parseTypeSpecRef)."""
    bad = []
    for ref in refs(spec):
        path, _, fragment = ref.partition("#")
        if not path and fragment.startswith("/types/"):
            ok = fragment.removeprefix("/types/") in spec["types"]
        elif path:
            match = EXTERNAL_PATH.match(path)
            ok = ref in BUILTINS or (
                match is not None
                and match["package"] == "kubernetes"
                and match["version"] == f"v{KUBERNETES_VERSION}"
                and fragment == "/provider"
                and {"name": "kubernetes", "version": KUBERNETES_VERSION} in spec.get("dependencies", [])
            )
        else:
            ok = False
        if not ok:
            bad.append(ref)
    return bad


def test_every_ref_resolves() -> None:
    spec = schema()
    assert dangling(spec) == []
    assert KUBERNETES_PROVIDER in set(refs(spec)) and ANY in set(refs(spec))


@pytest.mark.parametrize(
    "ref",
    [
        "#/types/flower-federation:index:Nope",
        "#/resources/flower-federation:index:Pool",
        "/kubernetes/schema.json#/provider",
        "/kubernetes/v4.0.0/schema.json#/provider",
        "pulumi.json#/Anything",
    ],
)
def test_a_dangling_ref_is_found(ref: str) -> None:
    broken = copy.deepcopy(schema())
    resource(broken)["inputProperties"]["superlink"]["$ref"] = ref
    assert dangling(broken) == [ref]


def test_the_kubernetes_provider_is_the_pinned_one() -> None:
    pins = (ROOT / "requirements.txt").read_text(encoding="utf-8").splitlines()
    assert f"pulumi-kubernetes=={KUBERNETES_VERSION}" in pins, (
        "provider/schema.py KUBERNETES_VERSION != requirements.txt"
    )


# --- inputs and outputs -----------------------------------------------------------------------------------------


def missing_inputs(model: type[Federation], spec: dict[str, Any]) -> set[str]:
    keys = {field.alias or name for name, field in model.model_fields.items()}
    return keys - set(resource(spec)["inputProperties"])


def test_every_config_key_is_an_input_by_its_alias() -> None:
    spec = schema()
    inputs = set(resource(spec)["inputProperties"])
    assert missing_inputs(Federation, spec) == set()
    assert inputs - set(EXTRA_INPUTS) == {f.alias for f in Federation.model_fields.values()}
    assert {"createNamespace", "nodeAuth", "clusterProviders", "nodeAuthKeys"} <= inputs
    assert resource(spec)["inputProperties"]["nodeAuthKeys"]["secret"] is True


def test_every_nested_model_is_a_type_with_its_keys() -> None:
    spec, model = schema(), Federation.model_json_schema(by_alias=True)
    for name, node in model["$defs"].items():
        assert set(spec["types"][TOKEN_PREFIX + name]["properties"]) == set(node["properties"]), name
    assert spec["types"][TOKEN_PREFIX + "Cluster"]["properties"]["kubeconfig"]["secret"] is True


def test_a_config_key_without_an_input_is_found(monkeypatch: pytest.MonkeyPatch) -> None:
    # Negative control: a new key of the config the committed schema lacks, and generation picks it up.
    class Wider(Federation):
        extra_setting: int = 0

    assert missing_inputs(Wider, schema()) == {"extraSetting"}
    monkeypatch.setattr(package, "json_schema", lambda: Wider.model_json_schema(by_alias=True))
    assert missing_inputs(Wider, package_schema("0.0.0")) == set()


def test_outputs_are_stated_once() -> None:
    r = resource(schema())
    assert set(r["properties"]) == set(OUTPUTS)
    assert set(r["required"]) == {name for name, out in OUTPUTS.items() if out.required}
    assert {"fleetAddress", "namespace", "role", "flowerVersion", "nodePublicKeys"} == set(r["required"])
    assert r["isComponent"] is True and r["requiredInputs"] == []


# --- the golden stack configs are values of these types ---------------------------------------------------------


def conformance(value: Any, spec: dict[str, Any], types: dict[str, Any], path: str = "") -> list[str]:
    """Where `value` is not what the Pulumi type `spec` accepts: objects (no unknown keys, required ones present),
    maps, arrays, enums, unions (`oneOf`), Any, and the scalars."""
    where = path or "."
    if "oneOf" in spec:
        options = [conformance(value, option, types, path) for option in spec["oneOf"]]
        return [] if [] in options else [f"{where}: {value!r} is none of {len(options)} alternatives"]
    ref = spec.get("$ref")
    if ref == ANY:
        return []
    if ref is not None:
        if not ref.startswith("#/types/"):
            return [f"{where}: a config value cannot be a {ref}"]
        named = types[ref.removeprefix("#/types/")]
        if "enum" in named:
            allowed = [e["value"] for e in named["enum"]]
            return [] if value in allowed else [f"{where}: {value!r} is not one of {allowed}"]
        if not isinstance(value, dict):
            return [f"{where}: {value!r} is not an object"]
        problems = [f"{where}: unknown key {k!r}" for k in value if k not in named["properties"]]
        problems += [f"{where}: missing {k!r}" for k in named.get("required", []) if k not in value]
        for key, item in value.items():
            if key in named["properties"]:
                problems += conformance(item, named["properties"][key], types, f"{path}.{key}")
        return problems
    kind = spec["type"]
    if kind == "array":
        if not isinstance(value, list):
            return [f"{where}: {value!r} is not an array"]
        return [p for i, item in enumerate(value) for p in conformance(item, spec["items"], types, f"{path}[{i}]")]
    if kind == "object":
        if not isinstance(value, dict):
            return [f"{where}: {value!r} is not a map"]
        values = spec.get("additionalProperties", {"type": "string"})
        return [p for key, item in value.items() for p in conformance(item, values, types, f"{path}.{key}")]
    python = {"string": (str,), "integer": (int,), "number": (int, float), "boolean": (bool,)}[kind]
    if isinstance(value, bool) and kind != "boolean" or not isinstance(value, python):
        return [f"{where}: {value!r} is not a {kind}"]
    return []


def inputs_spec(spec: dict[str, Any]) -> dict[str, Any]:
    r = resource(spec)
    return {"type": "object", "properties": r["inputProperties"], "required": r["requiredInputs"]}


def config_problems(config: Any, spec: dict[str, Any]) -> list[str]:
    types = {**spec["types"], FEDERATION: inputs_spec(spec)}
    return conformance(config, {"$ref": f"#/types/{FEDERATION}"}, types)


def golden(path: Path) -> Any:
    return load_stack_file(path.read_text(encoding="utf-8"))["config"][CONFIG_KEY]


@pytest.mark.parametrize("stack", GOLDEN_STACKS, ids=lambda p: p.name)
def test_every_golden_stack_config_is_a_value_of_the_schemas_types(stack: Path) -> None:
    assert config_problems(golden(stack), schema()) == []


def wide_configs() -> dict[str, Any]:
    """The tests' widest configs: every feature at once (each TLS source), the security matrix, the chart's
    settings: podTemplate patches, probes, images in parts, GPUs, the executor, ..."""
    from tests.support.stacks import chart_settings, security_stacks
    from tests.test_every_feature import TLS_SOURCES, every_feature

    return {
        **{f"every-feature-{tls}": every_feature(settings) for tls, settings in TLS_SOURCES.items()},
        **security_stacks(),
        "chart-settings": chart_settings(),
    }


def test_the_widest_configs_are_values_of_the_schemas_types() -> None:
    spec = schema()
    configs = wide_configs()
    assert {name: config_problems(config, spec) for name, config in configs.items()} == dict.fromkeys(configs, [])
    walked = json.dumps(configs)
    for key in ("podTemplate", "livenessProbe", "repository", "gpu", "executor", "nodeConfig", "volumes"):
        assert f'"{key}"' in walked, key


@pytest.mark.parametrize(
    ("change", "problem"),
    [
        (lambda c: c.update(namespace=5), ".namespace: 5 is not a string"),
        (lambda c: c.update(role="spoke"), ".role: 'spoke' is not one of"),
        (lambda c: c.update(mode="Deployment"), ".mode: 'Deployment' is not one of"),
        (lambda c: c["supernodes"]["pools"][0].update(replica=2), ".supernodes.pools[0]: unknown key 'replica'"),
        (lambda c: c["supernodes"]["pools"][0].pop("name"), ".supernodes.pools[0]: missing 'name'"),
        (lambda c: c["supernodes"].update(image=["flwr/supernode"]), ".supernodes.image: ['flwr/supernode'] is none"),
        (lambda c: c.update(labels={"team": 7}), ".labels.team: 7 is not a string"),
        (lambda c: c.update(createNamespace=1), ".createNamespace: 1 is not a boolean"),
        (lambda c: c.update(tolerations={"key": "gpu"}), ".tolerations: {'key': 'gpu'} is not an array"),
    ],
)
def test_a_wrong_typed_config_value_is_found(change: Any, problem: str) -> None:
    config = copy.deepcopy(golden(ROOT / "tests" / "golden" / "Pulumi.multi-cluster.yaml"))
    change(config)
    assert any(p.startswith(problem) for p in config_problems(config, schema())), config_problems(config, schema())


# --- what codegen needs -----------------------------------------------------------------------------------------


def test_types_are_what_pulumi_codegen_binds() -> None:
    spec = schema()
    used = {ref.removeprefix("#/types/") for ref in refs(spec) if ref.startswith("#/types/")}
    assert used == set(spec["types"]), "every type is used, none is missing"
    for token, t in spec["types"].items():
        if t["type"] == "object":
            assert isinstance(t["properties"], dict) and t["properties"], token
            assert set(t.get("required", [])) <= set(t["properties"]), token
            assert not {"pulumi", "urn"} & set(t["properties"]), token
        else:
            values = [e["value"] for e in t["enum"]]
            assert t["type"] == "string" and values and len(set(values)) == len(values), token
            names = [e.get("name", v) for e, v in zip(t["enum"], values, strict=True)]
            assert all(re.fullmatch(r"[A-Za-z][A-Za-z0-9]*", n) for n in names), token


def test_no_type_name_clashes_with_the_names_go_and_python_derive() -> None:
    # Go makes FooArgs, FooInput, FooOutput, FooPtr, FooArray, FooMap ... of every type and of the resource; Python
    # FooArgs. A type named like another's derived name would not compile.
    names = {token.rsplit(":", 1)[1] for token in [*schema()["types"], FEDERATION]}
    suffixes = ("Args", "Input", "Output", "Ptr", "PtrInput", "PtrOutput", "Array", "ArrayInput", "Map", "MapInput")
    assert {n + s for n in names for s in suffixes} & names == set()
    assert len({n.lower() for n in names}) == len(names)
