"""The base of every config model: camelCase keys, unknown keys refused, strict types."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict
from pydantic.alias_generators import to_camel

# Bitnami's `resourcesPreset` names (its common chart's `common.resources.preset`), and
# `none`; what each sets is in `federation/resources.py`.
ResourcesPreset = Literal["none", "nano", "micro", "small", "medium", "large", "xlarge", "2xlarge"]


class Model(BaseModel):
    # camelCase keys only (the operator's spelling); anything unknown is an error.
    # Strict types: YAML already types values, so "0" or false is never silently a
    # replica count (which would slip past the operator's replicas >= 1 rule).
    model_config = ConfigDict(
        extra="forbid",
        strict=True,
        alias_generator=to_camel,
        validate_by_alias=True,
        validate_by_name=False,
        serialize_by_alias=True,
        frozen=True,
    )
