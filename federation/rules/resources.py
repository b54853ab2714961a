"""Resources: what the Kubernetes schema of a ResourceRequirements fragment cannot say.
A request above its limit in one `resources` map (the API server refuses the pod),
`executor.config.resources` (Flower copies it into every task pod unchecked, so a bad
one fails only at run time), and SuperExec presets where no SuperExec runs."""

from __future__ import annotations

from collections.abc import Iterator

from ..errors import Problem, problem
from ..k8s_schema import fragment_errors
from ..quantity import parse_quantity
from .fragments import quantities
from .raw import At, Pools, Raw, as_dict, get


def resources(raw: Raw, pools: Pools, isolation: str) -> Iterator[Problem]:
    sections: list[tuple[At, object]] = [
        (("defaultResources",), raw.get("defaultResources")),
        (("superlink", "resources"), get(raw, "superlink", "resources")),
        (("superlink", "superexecResources"), get(raw, "superlink", "superexecResources")),
    ]
    for i, pool in pools:
        for key in ("supernodeResources", "superexecResources"):
            sections.append((("supernodes", "pools", i, key), pool.get(key)))
    task = get(raw, "executor", "config", "resources")
    at_task: At = ("executor", "config", "resources")
    if task is not None:
        if isinstance(task, dict):
            for path, msg in fragment_errors(task, "resourcerequirements-v1.json"):
                yield problem(at_task + path, msg)
            yield from quantities(at_task, task)
        else:
            yield problem(at_task, "must be a mapping (ResourceRequirements: requests, limits)")
    sections.append((at_task, task))
    for at, value in sections:
        yield from _requests_within_limits(at, value)
    if isolation != "process":
        preset_at: list[At] = [("superlink", "superexecResourcesPreset")]
        preset_at += [("supernodes", "pools", i, "superexecResourcesPreset") for i, _ in pools]
        for at in preset_at:
            if get(raw, *at) is not None:
                yield problem(at, "only used with isolationMode: process (a SuperExec runs the apps only there)")


def _requests_within_limits(at: At, value: object) -> Iterator[Problem]:
    """Within one map the user wrote: which side should give way is theirs to say."""
    requests, limits = as_dict(as_dict(value).get("requests")), as_dict(as_dict(value).get("limits"))
    for name, amount in requests.items():
        if name not in limits:
            continue
        request, limit = parse_quantity(str(amount)), parse_quantity(str(limits[name]))
        if request is not None and limit is not None and request > limit:
            yield problem(at + ("requests", name), f"'{amount}' is above limits.{name} '{limits[name]}'")
