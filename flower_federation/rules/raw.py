"""Reading raw config the way rules need it: tolerating wrong types (pydantic reports
those), so one run can list every problem. Defaults come from the config model itself
(config/derived.py DEFAULTS)."""

from __future__ import annotations

import re
from typing import Any

from flower_federation.config.derived import SuperExecLayout, federation_name, superexec_layout
from flower_federation.config.errors import PathPart

Raw = dict[str, Any]  # a mapping of the raw config (possibly with wrong types inside)
# A state backup's file name (state_guard.py): no directory, no hidden file.
BACKUP_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+-]*\.db")  # fullmatch
Pools = list[tuple[int, Raw]]  # (index, raw pool) of every pool that is a mapping
At = tuple[PathPart, ...]  # a config path under `federation`


def get(data: Any, *keys: PathPart, default: Any = None) -> Any:
    for k in keys:
        if isinstance(k, int):
            if not isinstance(data, list) or k >= len(data):
                return default
        elif not isinstance(data, dict) or k not in data:
            return default
        data = data[k]
    return data


def as_dict(v: Any) -> dict[str, Any]:
    return v if isinstance(v, dict) else {}


def as_list(v: Any) -> list[Any]:
    return v if isinstance(v, list) else []


def pools_of(raw: Raw) -> Pools:
    return [(i, p) for i, p in enumerate(as_list(get(raw, "supernodes", "pools"))) if isinstance(p, dict)]


def effective_name(raw: Raw, stack: str) -> str:
    """`N`, as the plan names the federation."""
    return federation_name(raw.get("name"), stack)


def superexecs_of(raw: Raw) -> SuperExecLayout:
    """Where the SuperExecs run, as the plan places them."""
    return superexec_layout(raw.get("isolationMode"), raw.get("superexecPlacement"))
