"""The SuperNode Helm chart's parameters as `import helm` reads them. Where each goes is not
decided here: docs/helm-parameters.md is the one mapping table (parameter -> config path,
status, reason; flower_federation/importers/helm_parameters.py reads it), and each parameter's default is the
chart's own, read off its Parameters tables (docs/reference/flower-supernode-helm-chart.md).

By status:

- carried: the value is copied to the row's config path as is (`supernodes.pools[]` is the
  one pool a chart install becomes, `supernodes.pools[0]`); several parameters naming one
  path combine as the chart combines them (dicts merge, lists add up). A step of
  helm_steps.py computes it instead where it is in `helm_steps.COMPUTED` (names, images,
  TLS, node keys, isolation, security contexts, ...).
- partial: copied the same way, or computed by a step; what the note says is refused is
  refused there (by the step, or by the project's validation of the result).
- ignored: dropped; a value the user set is said in a comment.
- refused: a value other than the chart's default is refused at its path with the note
  (`--allow-drop` drops it, listed).

A parameter that gains a counterpart is a change of its row in docs/helm-parameters.md.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any, Optional

from flower_federation.importers.helm_parameters import CHART_FILE, chart_defaults, mappings

POOL = "supernodes.pools[0]"
POD = f"{POOL}.podTemplate"

# The chart's nameOverride default: the name its objects carry after the release's.
CHART_NAME = "flower-client"
# Mappings the chart renders whole (any key of a Kubernetes SecurityContext), though its
# table lists their default keys one by one: a values file's keys are taken as they come.
WHOLE = ("global.securityContext", "global.podSecurityContext")


@dataclass(frozen=True)
class Param:
    default: Any
    status: str  # carried, partial, ignored, refused (docs/helm-parameters.md)
    note: str
    to: Optional[str] = None  # the config path, for the one pool; None: no path


def _nest(flat: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for path, value in flat.items():
        node = out
        *parents, last = path.split(".")
        for part in parents:
            node = node.setdefault(part, {})
        node[last] = value
    return out


@functools.cache
def chart() -> dict[str, Param]:
    """Every parameter of the chart, in the table's order, with the chart's default."""
    defaults = chart_defaults(CHART_FILE.read_text(encoding="utf-8"))
    out: dict[str, Param] = {}
    for row in mappings():
        whole = next((w for w in WHOLE if row.parameter.startswith(w + ".")), None)
        if whole is not None:
            if whole not in out:
                leaves = {p[len(whole) + 1 :]: d for p, d in defaults.items() if p.startswith(whole + ".")}
                out[whole] = Param(_nest(leaves), row.status, row.note)
            continue
        to = row.config_path.replace("[]", "[0]") if row.config_path else None
        out[row.parameter] = Param(defaults[row.parameter], row.status, row.note, to)
    return out


CHART = chart()


def known_prefixes() -> frozenset[str]:
    """Every proper prefix of a parameter path (`supernode`, `supernode.superlink`, ...):
    where a values file may hold a mapping of further parameters."""
    out = set()
    for path in CHART:
        parts = path.split(".")
        out |= {".".join(parts[:i]) for i in range(1, len(parts))}
    return frozenset(out)


def merged(default: Any, value: Any) -> Any:
    """A parameter's value as Helm computes it: a mapping merges into the default's key by
    key (`null` deletes a key); anything else replaces it."""
    if isinstance(default, dict) and isinstance(value, dict):
        out = dict(default)
        for k, v in value.items():
            if v is None:
                out.pop(k, None)
            else:
                out[k] = merged(default.get(k), v)
        return out
    return value


class Values:
    """The values file read against the chart: what the user set, and every parameter's
    effective value."""

    def __init__(self, user: dict[str, Any]):
        self.user = user

    def get(self, path: str) -> Any:
        default = CHART[path].default
        return merged(default, self.user[path]) if path in self.user else default

    def set_by_user(self, path: str) -> bool:
        return path in self.user

    def changed(self, path: str) -> bool:
        """Set to something else than the chart's default."""
        return path in self.user and self.get(path) != CHART[path].default
