"""Golden renders as objects to mutate, for the policy tests (tests/test_policies*.py): each negative
control takes a golden render, breaks one promise in it, and expects exactly that violation."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

from flower_federation.checks.model import Violation
from flower_federation.checks.policies import run
from flower_federation.checks.reading import read_clusters
from tests.support.golden import GOLDEN_DIR, GOLDENS

GOLDEN_NAMES = tuple(g.name for g in GOLDENS)


def golden_clusters(name: str) -> list[tuple[str, list[dict[str, Any]]]]:
    return read_clusters((GOLDEN_DIR / f"{name}.rendered.yaml").read_text(encoding="utf-8"))


def golden(name: str) -> list[dict[str, Any]]:
    """The objects of a golden render's first (or only) cluster, a fresh copy to mutate."""
    return copy.deepcopy(golden_clusters(name)[0][1])


def find(objects: list[dict[str, Any]], kind: str, name: str) -> dict[str, Any]:
    (found,) = [o for o in objects if o["kind"] == kind and o["metadata"]["name"] == name]
    return found


def pod_spec(obj: dict[str, Any]) -> dict[str, Any]:
    spec: dict[str, Any] = obj["spec"]["template"]["spec"]
    return spec


def container(obj: dict[str, Any], name: str, kind: str = "containers") -> dict[str, Any]:
    (found,) = [c for c in pod_spec(obj)[kind] if c["name"] == name]
    return found


def drop_flag(args: list[str], flag: str, takes_value: bool = True) -> None:
    i = args.index(flag)
    del args[i : i + (2 if takes_value else 1)]


def summary(violations: list[Violation]) -> set[tuple[str, str, str, str]]:
    """(level, policy, object, field) of each violation."""
    return {(v.level, v.policy, str(v.ref), v.path) for v in violations}


def found(objects: list[dict[str, Any]]) -> set[tuple[str, str, str, str]]:
    return summary(run(objects))


def write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path
