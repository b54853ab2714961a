"""The config reference is generated from the config model (flower_federation/config/reference.py) and the
committed docs/config-reference.md holds exactly what `make docs` writes."""

from __future__ import annotations

import contextlib
import difflib
import io
from typing import Any, Literal, Optional

import pytest
from pydantic import BaseModel, Field

from flower_federation.cli.main import main
from flower_federation.config import Federation, Model
from flower_federation.config.reference import (
    BEGIN_MARKER,
    END_MARKER,
    REFERENCE_FILE,
    Row,
    default_text,
    reference_file_text,
    reference_markdown,
    sections,
    splice,
    type_text,
)


def rows() -> dict[str, Row]:
    return {r.path: r for s in sections() for r in s.rows}


def test_reference_file_is_current() -> None:
    current = REFERENCE_FILE.read_text(encoding="utf-8")
    wanted = reference_file_text(current)
    if current != wanted:
        diff = difflib.unified_diff(
            current.splitlines(keepends=True),
            wanted.splitlines(keepends=True),
            "docs/config-reference.md (committed)",
            "docs/config-reference.md (make docs)",
        )
        pytest.fail("docs/config-reference.md is stale: run `make docs`\n" + "".join(list(diff)[:60]), pytrace=False)


def test_docs_command_prints_the_generated_block() -> None:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(["docs"]) == 0
    assert out.getvalue() == reference_markdown()
    assert out.getvalue() in REFERENCE_FILE.read_text(encoding="utf-8")


def test_every_key_is_described_once() -> None:
    all_rows = [r for s in sections() for r in s.rows]
    assert [r.path for r in all_rows if not r.description] == []
    paths = [r.path for r in all_rows]
    assert len(paths) == len(set(paths))


def _fields(model: type[BaseModel], seen: set[type[BaseModel]]) -> set[str]:
    """Keys (aliases) of every model reachable from `model`."""
    if model in seen:
        return set()
    seen.add(model)
    keys = set()
    for name, info in model.model_fields.items():
        keys.add(info.alias or name)
        for arg in _types_in(info.annotation):
            if isinstance(arg, type) and issubclass(arg, BaseModel):
                keys |= _fields(arg, seen)
    return keys


def _types_in(annotation: Any) -> list[Any]:
    import typing

    args = typing.get_args(annotation)
    return [annotation] + [t for a in args for t in _types_in(a)]


def test_every_config_key_appears_in_the_reference() -> None:
    paths = list(rows()) + [s.path for s in sections()]
    documented = {key for p in paths for key in p.replace("[]", "").split(".")}
    assert _fields(Federation, set()) - documented == set()


def test_sections_follow_the_model() -> None:
    assert [s.path for s in sections()] == [
        "",
        "superlink",
        "superlink.image",
        "superlink.gateway.parentRefs[]",
        "superlink.superexec",
        "superlink.serviceAccount",
        "supernodes",
        "supernodes.pools[]",
        "sites[]",
        "clusters.<name>",
        "cli",
        "tls",
        "nodeAuth",
        "networkPolicy",
        "probes",
        "executor",
        "rbac",
        "affinity",
        "monitoring",
    ]


def test_rows_give_type_default_and_the_fields_own_description() -> None:
    r = rows()
    description = Federation.model_fields["namespace"].description
    assert r["namespace"] == Row("namespace", "string", "`flower`", str(description))
    assert r["mode"].type == "one of `StatefulSet`, `DaemonSet`"
    assert r["defaultResources"].default == "`{}`"
    assert default_text({"requests": {"cpu": "100m", "memory": "256Mi"}}) == "`{requests: {cpu: 100m, memory: 256Mi}}`"
    assert r["resourcesPreset"].type == (
        "one of `none`, `nano`, `micro`, `small`, `medium`, `large`, `xlarge`, `2xlarge`"
    )
    assert r["supernodes.pools[].name"].default == "required"
    assert r["supernodes.pools[].disruptionBudget.maxUnavailable"].type == "integer or string"
    assert r["superlink.service.ports.serverAppIO"].default == "unset"
    # An object's default inside its parent's default: the startup probe is slower to give up.
    assert r["probes.startupProbe.periodSeconds"].default == "`5`"
    assert r["probes.livenessProbe.periodSeconds"].default == "`10`"


def test_models_used_in_several_places_are_documented_once() -> None:
    r = rows()
    assert r["superlink.networkPolicy"].description.endswith("Same keys as `networkPolicy`.")
    assert r["supernodes.probes"].description.endswith("Same keys as `probes`.")
    assert "supernodes.pools[].networkPolicy.enabled" not in r and "networkPolicy.enabled" in r
    network = next(s for s in sections() if s.path == "networkPolicy")
    assert network.intro.endswith(
        "`superlink.networkPolicy`, `superlink.superexec.networkPolicy`, `supernodes.pools[].networkPolicy` and "
        "`supernodes.networkPolicy`."
    )


class _Leaf(Model):
    """A leaf."""

    flag: bool = Field(default=False, description="A | pipe.")


class _Root(Model):
    choice: Optional[Literal["a", "b"]] = Field(default=None, description="Pick.")
    leaves: list[_Leaf] = Field(default=[], description="Leaves.")
    one: _Leaf = _Leaf()
    other: Optional[_Leaf] = Field(default=None, description="Another.")
    extra: dict[str, Any] = Field(default={"x": "yes", "n": [1, "2"]}, description="Anything.")


def test_generic_walk_on_a_small_model() -> None:
    text = reference_markdown(_Root)
    assert text.startswith("### Top level\n\n| Path | Type | Default | Description |\n|---|---|---|---|\n")
    assert "| `choice` | one of `a`, `b` | unset | Pick. |" in text
    assert '| `extra` | map | `{x: "yes", n: [1, "2"]}` | Anything. |' in text  # YAML would read yes as true
    assert "| `leaves` | list of objects | `[]` | Leaves. Each item: see `leaves[]`. |" in text
    assert "### `leaves[]`\n\nA leaf." in text and "| `leaves[].flag` | boolean | `false` | A \\| pipe. |" in text
    # Objects at the top level get sections of their own (_Leaf is used by _Root only, so it is not "shared").
    assert "### `one`\n\nA leaf." in text and "### `other`\n\nA leaf." in text


def test_type_names() -> None:
    assert type_text(Optional[int]) == "integer"
    assert type_text(list[str]) == "list of string"
    assert type_text(dict[str, str]) == "map of string"
    assert type_text(list[Any]) == "list"


def test_splice_replaces_only_between_the_markers() -> None:
    doc = f"intro\n{BEGIN_MARKER}\nold\n{END_MARKER}\nafter\n"
    assert splice(doc, "new\n") == f"intro\n{BEGIN_MARKER}\n\nnew\n\n{END_MARKER}\nafter\n"
    assert splice(splice(doc, "new\n"), "new\n") == splice(doc, "new\n")
    for broken in ("no markers", f"{END_MARKER}\n{BEGIN_MARKER}", f"{BEGIN_MARKER}{BEGIN_MARKER}{END_MARKER}"):
        with pytest.raises(ValueError):
            splice(broken, "new\n")


def test_the_reference_lives_in_its_own_page_not_the_readme() -> None:
    readme = (REFERENCE_FILE.parents[1] / "README.md").read_text(encoding="utf-8")
    assert BEGIN_MARKER not in readme and END_MARKER not in readme
    assert "docs/config-reference.md" in readme
