"""The base of every config model: camelCase keys, unknown keys refused, strict types."""

from __future__ import annotations

import types
import typing
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

# Bitnami's `resourcesPreset` names (its common chart's `common.resources.preset`), and
# `none`; what each sets is in `flower_federation/builders/resources.py`.
# The most a Kubernetes int32 field holds (replicas, probe timings, minReadySeconds, a disruption budget's count), and
# what Pulumi carries exactly (its numbers are float64): every integer of the config without a smaller bound of its
# own is held to it, so none reaches the API server as a number it cannot decode.
INT32_MAX = 2**31 - 1
Int32 = Annotated[int, Field(le=INT32_MAX)]

ResourcesPreset = Literal["none", "nano", "micro", "small", "medium", "large", "xlarge", "2xlarge"]


class Model(BaseModel):
    # camelCase keys in config (the operator's spelling; load_plan validates a stack file's value by alias
    # only), field names too for a Python program's keyword arguments (`FederationArgs(create_namespace=...)`,
    # what type checkers see); anything unknown is an error.
    # Strict types: YAML already types values, so "0" or false is never silently a
    # replica count (which would slip past the operator's replicas >= 1 rule).
    model_config = ConfigDict(
        extra="forbid",
        strict=True,
        alias_generator=to_camel,
        validate_by_alias=True,
        validate_by_name=True,
        serialize_by_alias=True,
        frozen=True,
    )


def field_type(annotation: Any) -> Any:
    """A field's annotation down to the type that holds its keys: `Optional[X]` -> X,
    `Annotated[X, ...]` -> X, a union of a string and a model (an image) -> the model.
    For walking config paths through the models (error hints, the Helm parameter table)."""
    origin = typing.get_origin(annotation)
    if origin is typing.Annotated:
        return field_type(typing.get_args(annotation)[0])
    if origin in (typing.Union, types.UnionType):
        args = [field_type(a) for a in typing.get_args(annotation) if a is not type(None)]
        models = [a for a in args if isinstance(a, type) and issubclass(a, Model)]
        return args[0] if len(args) == 1 else models[0] if len(models) == 1 else annotation
    return annotation
