"""Every integer of the config is bounded (config/base.py `Int32`): none reaches the API server beyond a Kubernetes
int32 field's range, nor goes through Pulumi's float64 numbers inexactly (`gpu.count: 9223372036854775807` was
rendered as ...808). A union of a count and a percentage says one problem at its key, not one per branch."""

from __future__ import annotations

import json
from typing import Any

import pytest

from flower_federation.config.base import INT32_MAX
from tests.support.paths import ROOT
from tests.support.validation import assert_valid, cfg, problems, sts_pool

SCHEMA = ROOT / "flower_federation" / "config" / "config.schema.json"


def _integers(node: Any, path: str = "") -> list[tuple[str, dict[str, Any]]]:
    found = []
    if isinstance(node, dict):
        kind = node.get("type")
        if kind == "integer" or (isinstance(kind, list) and "integer" in kind):
            found.append((path, node))
        for key, value in node.items():
            found += _integers(value, f"{path}/{key}")
    elif isinstance(node, list):
        for i, value in enumerate(node):
            found += _integers(value, f"{path}[{i}]")
    return found


def test_every_integer_of_the_config_schema_has_a_maximum() -> None:
    integers = _integers(json.loads(SCHEMA.read_text()))
    assert len(integers) > 40  # the walk finds them (49 on 2026-11-29)
    unbounded = [path for path, node in integers if node.get("maximum", INT32_MAX + 1) > INT32_MAX]
    assert unbounded == [], f"integers without a maximum within int32 (use config.base.Int32): {unbounded}"


BEYOND = INT32_MAX + 1
AT = "federation.supernodes.pools[0]"
CASES = {
    "replicas": (cfg(sts_pool("a", replicas=BEYOND)), f"{AT}.replicas"),
    "minReadySeconds": (cfg(sts_pool("a", minReadySeconds=BEYOND)), f"{AT}.minReadySeconds"),
    "a probe": (
        cfg(sts_pool("a"), probes={"livenessProbe": {"periodSeconds": BEYOND}}),
        "federation.probes.livenessProbe.periodSeconds",
    ),
    "a GPU count": (
        cfg(sts_pool("a", gpu={"enabled": True, "vendor": "nvidia", "count": 2**63 - 1})),
        f"{AT}.gpu.count",
    ),
    "a disruption budget": (
        cfg(sts_pool("a", disruptionBudget={"maxUnavailable": BEYOND})),
        f"{AT}.disruptionBudget.maxUnavailable",
    ),
}


@pytest.mark.parametrize("case", CASES)
def test_an_integer_beyond_int32_is_refused_at_its_path_quoting_it(case: str) -> None:
    raw, path = CASES[case]
    [(where, message)] = problems(raw)
    assert where == path and message.startswith("Input should be less than or equal to 2147483647, not "), message


def test_the_largest_int32_is_taken() -> None:
    assert_valid(cfg(sts_pool("a", minReadySeconds=INT32_MAX), probes={"livenessProbe": {"periodSeconds": INT32_MAX}}))


@pytest.mark.parametrize("value, says", [(1.5, "not 1.5"), (True, "not True")])
def test_a_count_or_percentage_of_neither_type_is_one_problem_at_its_key(value: Any, says: str) -> None:
    raw = cfg(sts_pool("a", disruptionBudget={"maxUnavailable": value}))
    assert problems(raw) == [(f"{AT}.disruptionBudget.maxUnavailable", f"must be a string or a whole number, {says}")]
