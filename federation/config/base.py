"""The base of every config model: camelCase keys, unknown keys refused, strict types."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict
from pydantic.alias_generators import to_camel


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
