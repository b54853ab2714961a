"""Reading raw config the way rules need it: tolerating wrong types (pydantic reports
those), so one run can list every problem. Defaults come from the config model itself."""

from __future__ import annotations

from typing import Any

from ..config import Federation
from ..errors import PathPart

# Every default, as the config model defines it (`DEFAULTS.mode`, `DEFAULTS.tls.source`, ...).
DEFAULTS = Federation()


def get(data: Any, *keys: PathPart, default: Any = None) -> Any:
    for k in keys:
        if isinstance(k, int):
            if not isinstance(data, list) or k >= len(data):
                return default
        elif not isinstance(data, dict) or k not in data:
            return default
        data = data[k]
    return data

def as_dict(v: Any) -> dict:
    return v if isinstance(v, dict) else {}

def as_list(v: Any) -> list:
    return v if isinstance(v, list) else []

def pools_of(raw: dict) -> list[tuple[int, dict]]:
    return [(i, p) for i, p in enumerate(as_list(get(raw, "supernodes", "pools"))) if isinstance(p, dict)]

def effective_name(raw: dict, stack: str) -> str:
    name = raw.get("name")
    return name if isinstance(name, str) else stack
