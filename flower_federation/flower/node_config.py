"""Rendering `nodeConfig` into the value of `flower-supernode --node-config`.

Flower parses that value with `flwr.common.config.parse_config_args`: a regex
`(\\S+?)=('[^']*'|"[^"]*"|\\S+)` cuts it into `key=value` pairs and each value is read as
TOML. So a string must be a TOML basic string that contains no literal `"`; we write `"`
and every control character as `\\uXXXX` escapes, which TOML decodes back exactly.

Placeholders are resolved per pod by Kubernetes itself, with no shell: `{index}` and
`{node}` become `$(VAR)` references to downward-API env vars, which the kubelet expands in
`args`. Every literal `$` is written `$$` so nothing a user typed is ever expanded.
`{pool}` and `{replicas}` are known when rendering and are substituted directly.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from typing import Optional, Union

NodeConfigValue = Union[str, int, float, bool]

# Env vars the pod gets from the downward API to resolve placeholders.
POD_INDEX_ENV = "FLOWER_POD_INDEX"
NODE_NAME_ENV = "FLOWER_NODE_NAME"
# Since Kubernetes 1.28 every StatefulSet pod carries its ordinal as this label.
POD_INDEX_LABEL = "apps.kubernetes.io/pod-index"

# Placeholders whose value only StatefulSet pods have.
STATEFULSET_ONLY = ("{index}", "{replicas}")

KEY_RE = re.compile(r"^[A-Za-z0-9_-]+$")
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1

_PLACEHOLDER_RE = re.compile(r"\{(index|replicas|pool|node)\}")


def _escape_k8s(text: str) -> str:
    """Make literal text survive Kubernetes `$(VAR)` expansion unchanged."""
    return text.replace("$", "$$")


def _toml_basic_string(text: str) -> str:
    out = []
    for ch in text:
        if ch == "\\":
            out.append("\\\\")
        elif ch == '"' or ord(ch) < 0x20 or ord(ch) == 0x7F:
            out.append(f"\\u{ord(ch):04X}")
        else:
            out.append(ch)
    return '"' + "".join(out) + '"'


def _toml_float(value: float) -> str:
    if math.isnan(value):
        return "nan"
    if math.isinf(value):
        return "inf" if value > 0 else "-inf"
    text = repr(value)
    # TOML needs a fraction or exponent to read a float as a float.
    return text if any(c in text for c in ".eE") else text + ".0"


def _resolve_string(text: str, pool: str, replicas: Optional[int]) -> str:
    """Substitute placeholders in a string value, escaping everything else for
    Kubernetes expansion. Returns the (already TOML-quoted) argument fragment."""
    pieces: list[str] = []
    pos = 0

    def quoted_literal(literal: str) -> str:
        return _escape_k8s(_toml_basic_string(literal)[1:-1])

    for m in _PLACEHOLDER_RE.finditer(text):
        pieces.append(quoted_literal(text[pos : m.start()]))
        name = m.group(1)
        if name == "pool":
            pieces.append(quoted_literal(pool))
        elif name == "replicas":
            pieces.append(str(replicas))
        elif name == "index":
            pieces.append(f"$({POD_INDEX_ENV})")
        else:  # node
            pieces.append(f"$({NODE_NAME_ENV})")
        pos = m.end()
    pieces.append(quoted_literal(text[pos:]))
    return '"' + "".join(pieces) + '"'


def render_value(value: NodeConfigValue, pool: str, replicas: Optional[int]) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return _toml_float(value)
    if value == "{index}":
        return f"$({POD_INDEX_ENV})"
    if value == "{replicas}":
        return str(replicas)
    return _resolve_string(value, pool, replicas)


def render_node_config(config: Mapping[str, NodeConfigValue], pool: str, replicas: Optional[int]) -> Optional[str]:
    """The `--node-config` argument for a pool, or None when there is nothing to pass.
    Keys are sorted so the output never depends on config order."""
    if not config:
        return None
    return " ".join(f"{k}={render_value(config[k], pool, replicas)}" for k in sorted(config))


def uses_placeholder(config: Mapping[str, NodeConfigValue], placeholder: str) -> bool:
    return any(isinstance(v, str) and placeholder in v for v in config.values())


def value_problem(value: object) -> Optional[str]:
    """Why a nodeConfig value cannot be passed to Flower, or None."""
    if isinstance(value, (bool, float)):
        return None
    if isinstance(value, int):
        if not INT64_MIN <= value <= INT64_MAX:
            return "integer out of TOML's 64-bit range"
        return None
    if isinstance(value, str):
        return None
    kind = "null" if value is None else type(value).__name__
    return f"must be a string, integer, float or boolean, not {kind}"
