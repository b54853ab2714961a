"""An imported stack as `Pulumi.<stack>.yaml` text: what was imported and how, in comments
(names, where our defaults differ from the source's, dropped values, the secret config to
set), then `config:` with the federation value under its key, keys in the config
reference's order. Same stack, same bytes."""

from __future__ import annotations

import textwrap
import types
import typing
from typing import Any, Optional

import yaml
from pydantic import BaseModel

from flower_federation.config import Federation
from flower_federation.config.reference import fields_in_order
from flower_federation.importers.common import Stack
from flower_federation.kube.goyaml import StackDumper

CONFIG_KEY = "flower-federation:federation"
WIDTH = 100


def _model_of(annotation: Any) -> Optional[type[BaseModel]]:
    """The config model a field holds (through Optional / list), if any."""
    origin = typing.get_origin(annotation)
    if origin in (typing.Union, types.UnionType):
        found = [m for a in typing.get_args(annotation) if (m := _model_of(a)) is not None]
        return found[0] if found else None
    if origin is list:
        return _model_of(typing.get_args(annotation)[0])
    return annotation if isinstance(annotation, type) and issubclass(annotation, BaseModel) else None


def ordered(value: Any, model: Optional[type[BaseModel]] = Federation) -> Any:
    """`value` with the keys of config models in the reference's order (their fields' order);
    free-form mappings (nodeConfig, podTemplate, ...) keep the source's order."""
    if isinstance(value, list):
        return [ordered(v, model) for v in value]
    if not isinstance(value, dict) or model is None:
        return value
    fields = {(f.alias or name): f for name, f in fields_in_order(model)}
    keys = [k for k in fields if k in value] + [k for k in value if k not in fields]
    return {k: ordered(value[k], _model_of(fields[k].annotation) if k in fields else None) for k in keys}


def _comment(text: str, bullet: str = "") -> list[str]:
    indent = " " * len(bullet)
    lines = textwrap.wrap(text, WIDTH - 2 - len(bullet), break_on_hyphens=False, break_long_words=False)
    return [f"# {bullet if i == 0 else indent}{line}" for i, line in enumerate(lines)]


def _section(title: str, items: list[str]) -> list[str]:
    if not items:
        return []
    out = ["#", *_comment(title)]
    for item in items:
        out += _comment(item, "  - ")
    return out


def stack_file(stack: Stack) -> str:
    head = [
        f"# Pulumi.{stack.stack}.yaml",
        *_comment(f"{stack.origin[0].upper()}{stack.origin[1:]}, imported by `{stack.command}`."),
        *_comment(_check(stack)),
    ]
    head += _section("Names:", stack.names)
    head += _section("Where flower-federation's defaults differ from the source's:", stack.differences)
    head += _section("Notes:", stack.notes)
    head += _section("Dropped (--allow-drop), not in this stack:", [f"{r.path}: {r.reason}" for r in stack.dropped])
    if stack.secrets:
        head += ["#", *_comment("Secret config, never in this file: set it with")]
        head += [f"#   {line}" for line in stack.secrets]
    if stack.offline_secrets:
        head += _comment(
            "Its offline form, for `validate` and `render` (which cannot decrypt secrets) of a copy of this file that "
            "is never committed: these lines under `config:`, the key in place of <...>:"
        )
        head += [f"#     {line}" for line in stack.offline_secrets]
    # Quoted where Pulumi (YAML 1.2) or a YAML 1.1 reader would take a string for something else (`'1e-3'`).
    body = yaml.dump(
        {"config": {CONFIG_KEY: ordered(stack.config)}},
        Dumper=StackDumper,
        sort_keys=False,
        default_flow_style=False,
        allow_unicode=True,
        width=120,
    )
    return "\n".join(head) + "\n" + body


def _check(stack: Stack) -> str:
    validate = f"`python -m flower_federation validate --config-file Pulumi.{stack.stack}.yaml`"
    render = "`python -m flower_federation render --config-file ...`"
    if not stack.offline_secrets:
        return f"Check it with {validate} and look at its objects with {render}."
    return (
        f"Check it with {validate} once its secret config (below) is set, and look at its objects with {render}: "
        "offline, the secret cannot be decrypted, so check a copy of this file with the secret's offline form (below)."
    )


def stack_files(stacks: list[Stack]) -> str:
    """One stack file, or several one after the other (each starts with its own name)."""
    return "---\n".join(stack_file(s) for s in stacks)
