"""Config strings are checked by full-match grammars (issue 32 parts 1 and 8): no validation regex of the core uses
`re.match` (whose `$` takes a trailing newline), the reproductions of 048b1d8 are refused at their paths, and an image
reference is parsed by the OCI distribution grammar, with the verdict of `check`'s mandatory flower-images-pinned."""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Any

import pytest

from flower_federation.checks.model import MANDATORY
from tests.support.policy_objects import container, find, found, golden
from tests.support.validation import cfg, messages_by_path, process_cfg, with_settings

ROOT = Path(__file__).resolve().parents[1]
VALIDATING = ("kube", "config", "rules", "plan", "checks")
BASE = cfg(name="demo", version="1.42.0")  # one StatefulSet pool `a`, one replica
DIGEST = "sha256:" + "ab" * 32


def prefix_matches(source: str) -> list[int]:
    """Lines of `source` that call `.match(` (a compiled pattern's, or `re.match`): a prefix match."""
    return [
        node.lineno
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "match"
    ]


def test_no_validation_regex_matches_a_prefix() -> None:
    found_lines = [
        f"{path.relative_to(ROOT)}:{line}"
        for layer in VALIDATING
        for path in sorted((ROOT / "flower_federation" / layer).glob("*.py"))
        for line in prefix_matches(path.read_text(encoding="utf-8"))
    ]
    assert found_lines == [], "use fullmatch: `$` accepts a trailing newline"


def test_the_scan_sees_a_prefix_match() -> None:  # the negative control
    assert prefix_matches("import re\nNAME = re.compile('^a$')\nNAME.match(x)\nre.match('b', y)\n") == [3, 4]


def digit_tests(source: str) -> list[int]:
    """Lines of `source` that call `.isdigit()` or `.isnumeric()`: true of '²' (which int() refuses) and '٤' (which
    int() reads as 4)."""
    return [
        node.lineno
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr in ("isdigit", "isnumeric")
    ]


def test_no_number_is_read_by_str_isdigit() -> None:
    found_lines = [
        f"{path.relative_to(ROOT)}:{line}"
        for path in sorted((ROOT / "flower_federation").rglob("*.py"))
        for line in digit_tests(path.read_text(encoding="utf-8"))
    ]
    assert found_lines == [], "a number is ASCII digits: re.fullmatch(r'[0-9]+', text)"


def test_the_scan_sees_isdigit() -> None:  # the negative control
    assert digit_tests("a.isdigit()\nb = '1'.isnumeric()\nc.isdecimal()\n") == [1, 2]


def problems(**settings: Any) -> dict[str, str]:
    """Each problem's path of BASE with `settings` (`a__b=value` sets a.b), its messages joined."""
    return messages_by_path(with_settings(BASE, **settings))


@pytest.mark.parametrize(
    ("key", "value", "path"),
    [
        ("clusterDomain", "cluster.local; location /v1/ { proxy_pass https://127.0.0.1:9095; } #", "clusterDomain"),
        ("clusterDomain", "cluster.local\n", "clusterDomain"),
        ("namespace", "flower\n", "namespace"),
        ("name", "demo\n", "name"),
        ("version", "1.42.0\n", "version"),
        ("version", "1.42.0; x", "version"),
        ("version", "\u0661.\u0664\u0662.\u0660", "version"),  # Arabic-Indic digits: was read as 1.42.0
        ("superlink__persistence__size", "1Gi\n", "superlink.persistence.size"),
        ("superlink__persistence__restore", "1.41.0-x-20261125T101500Z.db\n", "superlink.persistence.restore"),
        ("cli__connectionName", "prod]\n[x", "cli.connectionName"),
        ("cli__connectionName", "default", "cli.connectionName"),
        ("cli__address", "127.0.0.1:8000\n", "cli.address"),
        ("cli__rootCertificates", "/ca.crt\u2028x", "cli.rootCertificates"),
        ("cli__rootCertificates", "~/ca.crt", "cli.rootCertificates"),
    ],
)
def test_a_string_that_would_change_a_generated_file_is_refused_at_its_path(key: str, value: str, path: str) -> None:
    got = problems(**{key: value})
    assert f"federation.{path}" in got, got
    assert repr(value) in got[f"federation.{path}"] or value in got[f"federation.{path}"], got


@pytest.mark.parametrize(
    ("key", "path"), [("superlink__externalAddress", "superlink.externalAddress"), ("cli__address", "cli.address")]
)
@pytest.mark.parametrize("port", ["\u0664\u0664\u0663", "44\u0663", "\u00b2"])
def test_a_port_of_non_ascii_digits_is_refused_at_its_path(key: str, path: str, port: str) -> None:
    # str.isdigit() is true of each; int() read '٤٤٣' (Arabic-Indic digits) as 443, and externalAddress took it.
    value = f"fl.example.org:{port}"
    got = problems(**{key: value})
    assert repr(value) in got.get(f"federation.{path}", ""), got


@pytest.mark.parametrize(
    "image",
    [
        "flwr/superlink::1.42",
        "not an image",
        "Flwr/superlink:1.42.0",
        "flwr/superlink:1.42.0\n",
        "flwr//x:1.0",
        "flwr/superlink:1.42.0@sha256:abc",
        ":1.42.0",
        "flwr/superlink:-1",
        "flwr/superlink:\u0661.\u0664\u0662.\u0660",  # a tag is ASCII (Go's \w): was read as 1.42.0
        "flwr/superlink:t\u00e9st",
    ],
)
def test_an_image_that_does_not_parse_is_refused(image: str) -> None:
    got = problems(superlink__image=image)
    assert "is not an image reference" in got.get("federation.superlink.image", ""), got


@pytest.mark.parametrize(
    ("image", "pinned"),
    [
        ("flwr/supernode", False),
        ("flwr/supernode:latest", False),
        ("flwr/supernode:nightly", False),
        ("registry:5000/flwr/supernode", False),
        (f"flwr/supernode@{DIGEST}", True),
        (f"flwr/supernode:1.42.0@{DIGEST}", True),
        ("registry:5000/flwr/supernode:1.42.0-py3.11", True),
        ("[fd00::1]:5000/flwr/supernode:1.42.0", True),
    ],
)
def test_validate_gives_checks_verdict_on_pinning(image: str, pinned: bool) -> None:
    """validate refuses exactly what `check`'s mandatory policy fails, so nothing validate passes fails `check`."""
    _same_verdict_as_check(("dev", "demo-supernode-cpu", "supernode"), "supernodes.image", image, pinned)


def _same_verdict_as_check(where: tuple[str, str, str], setting: str, image: str, pinned: bool) -> None:
    """`image` in the golden stack's StatefulSet's container (`where`) through `check`, and as `setting` through
    validate: both refuse it exactly when it is not pinned."""
    stack, statefulset, name = where
    objects = golden(stack)
    container(find(objects, "StatefulSet", statefulset), name)["image"] = image
    check_fails = any(level == MANDATORY and policy == "flower-images-pinned" for level, policy, _, _ in found(objects))
    got = problems(**{setting.replace(".", "__"): image})
    refused = f"federation.{setting}" in got
    assert (check_fails, refused) == (not pinned, not pinned), got
    if refused:
        assert "flower-images-pinned" in got[f"federation.{setting}"], got


@pytest.mark.parametrize(
    "at",
    [
        ("networkPolicy", "ingressPodMatchLabels"),
        ("superlink", "controlService", "labels"),
        ("supernodes", "networkPolicy", "ingressNSMatchLabels"),
    ],
)
def test_every_label_map_is_held_to_the_label_grammar_at_its_path(at: tuple[str, ...]) -> None:
    """rules/label_maps.py finds the label maps in the schema: a value that is no label value is refused at its key
    (the API server would refuse the object, late and at whichever setting reached it first)."""
    got = problems(**{"__".join(at): {"app": "a\nb"}})
    assert f"federation.{'.'.join(at)}.app" in got, got


FLEET_PROXY = "nginxinc/nginx-unprivileged"


@pytest.mark.parametrize(
    "image",
    [
        "NGINX:latest ",  # /tmp/atk l2: uppercase, a trailing space
        "nginxinc/nginx-unprivileged:1.27\n;$(id)",  # l1: a newline, then a command
        f"{FLEET_PROXY}:1.28.0\n",
        f"{FLEET_PROXY}:1.28.0 x",
        f"{FLEET_PROXY}:1.28.0;{{",
        f"{FLEET_PROXY}@sha256:abc",
    ],
)
def test_the_fleet_proxy_image_is_held_to_the_reference_grammar(image: str) -> None:
    got = problems(superlink__fleetProxy__image=image)
    assert "is not an image reference" in got.get("federation.superlink.fleetProxy.image", ""), got
    assert repr(image) in got["federation.superlink.fleetProxy.image"], got


@pytest.mark.parametrize("part", [("registry", "docker.io\n"), ("repository", "Nginx"), ("tag", "1.28.0 x")])
def test_the_fleet_proxy_image_parts_are_held_to_their_grammar(part: tuple[str, str]) -> None:
    key, value = part
    image = {"repository": FLEET_PROXY, "tag": "1.28.0", key: value}
    got = problems(superlink__fleetProxy__image=image)
    assert f"'{value}' is not valid here" in got.get(f"federation.superlink.fleetProxy.image.{key}", ""), got


@pytest.mark.parametrize(
    ("image", "pinned"),
    [
        (FLEET_PROXY, False),
        (f"{FLEET_PROXY}:latest", False),
        (f"{FLEET_PROXY}:mainline-alpine", False),
        (f"{FLEET_PROXY}@{DIGEST}", True),
        (f"{FLEET_PROXY}:1.28.0-alpine", True),
        (f"{FLEET_PROXY}:1.27", True),  # a version, though no Flower one: the proxy's tag says no Flower dialect
        ("nginxinc/nginx-unprivileged:1.28.0-alpine@" + DIGEST, True),
    ],
)
def test_validate_gives_checks_verdict_on_the_fleet_proxy_image(image: str, pinned: bool) -> None:
    """The proxy is a container of the SuperLink's pod, a Flower pod, so `check`'s mandatory flower-images-pinned
    judges its image: validate refuses exactly that, at superlink.fleetProxy.image."""
    _same_verdict_as_check(("hub", "fl-superlink", "fleet-proxy"), "superlink.fleetProxy.image", image, pinned)


def test_the_fleet_proxy_image_in_parts_needs_a_tag_or_digest() -> None:
    got = problems(superlink__fleetProxy__image={"repository": FLEET_PROXY})
    assert "give a tag or a digest" in got.get("federation.superlink.fleetProxy.image", ""), got


def test_every_image_of_the_schema_is_under_the_image_rules() -> None:
    """Every field the schema types as an image (an ImageRef: a reference or its parts) is one rules/images.py checks:
    the Fleet-only proxy's was left out, and took `NGINX:latest ` and a newline."""
    from flower_federation.rules.images import image_locations
    from tests.test_injection_invariant import string_fields

    fields = set(string_fields())
    in_schema = {f.lstrip(".") for f in fields if f + ".repository" in fields and f + ".digest" in fields}
    checked = {
        ".".join("[]" if isinstance(k, int) else k for k in at).replace(".[]", "[]")
        for at, _ in image_locations({"supernodes": {"pools": [{}]}}, [(0, {})])
    }
    assert in_schema and in_schema == checked, (in_schema, checked)


@pytest.mark.parametrize("at", [("superlink", "superexec"), ("supernodes", "pools", 0, "superexec")])
def test_a_superexecs_pull_secret_is_a_secret_name(at: tuple[Any, ...]) -> None:
    raw = process_cfg(version="1.42.0", superexecPlacement="distributed")
    node: Any = raw
    for key in at:
        node = node[key] if isinstance(key, int) else node.setdefault(key, {})
    node["imagePullSecrets"] = ["regcred\n; x"]
    got = messages_by_path(raw)
    where = "federation." + ".".join(f"[{k}]" if isinstance(k, int) else k for k in at).replace(".[", "[")
    assert "not a Secret name" in got.get(f"{where}.imagePullSecrets[0]", ""), got
