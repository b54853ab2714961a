"""Resources: what the Kubernetes schema of a ResourceRequirements fragment cannot say
beyond fragments.quantities (amounts, and no request above its limit in one map):
`executor.config.resources` (Flower copies it into every task pod unchecked, so a bad
one fails only at run time), `monitoring.resources` (the exporter's, outside the component sections
fragments.py walks), and SuperExec presets where no SuperExec runs."""

from __future__ import annotations

from collections.abc import Iterator

from flower_federation.config.errors import Problem, problem
from flower_federation.kube.openapi import fragment_errors
from flower_federation.rules.fragments import quantities
from flower_federation.rules.raw import At, Pools, Raw, get


def resources(raw: Raw, pools: Pools, isolation: str) -> Iterator[Problem]:
    task = get(raw, "executor", "config", "resources")
    at_task: At = ("executor", "config", "resources")
    if task is not None:
        if isinstance(task, dict):
            for path, msg in fragment_errors(task, "resourcerequirements-v1.json"):
                yield problem(at_task + path, msg)
            yield from quantities(at_task, task)
        else:
            yield problem(at_task, "must be a mapping (ResourceRequirements: requests, limits)")
    exporter = get(raw, "monitoring", "resources")
    if isinstance(exporter, dict):
        for path, msg in fragment_errors(exporter, "resourcerequirements-v1.json"):
            yield problem(("monitoring", "resources") + path, msg)
        yield from quantities(("monitoring", "resources"), exporter)
    if isolation != "process":
        preset_at: list[At] = [("superlink", "superexecResourcesPreset")]
        preset_at += [("supernodes", "pools", i, "superexecResourcesPreset") for i, _ in pools]
        for at in preset_at:
            if get(raw, *at) is not None:
                yield problem(at, "only used with isolationMode: process (a SuperExec runs the apps only there)")
