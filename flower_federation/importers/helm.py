"""`python -m flower_federation import helm VALUES.yaml`: a values file of Flower's SuperNode Helm
chart as a site stack (role: site), equivalent to `helm install RELEASE . --values VALUES.yaml`.

Every value of the file is read as Helm would (the chart's defaults under it, mappings merged
key by key, `null` removing a default) and must be a parameter of the chart. Where each goes
is docs/helm-parameters.md, the one mapping table (read by helm_parameters.py): a parameter is copied
to its config path, computed by a step (names, images, TLS, node keys, isolation, security
contexts: helm_steps.py, helm_node_auth.py, helm_pods.py), dropped and said (ignored), or refused there with the
table's reason. `global.imagePullSecrets`, which the chart's tables only name, is an alias
of the top-level `imagePullSecrets` (ALIASES); image pull secrets are taken as names or as
Kubernetes' `{name: ...}` entries. A refusal comes with the project's validation of the
stack `--allow-drop` would write, every problem in one report."""

from __future__ import annotations

import difflib
from typing import Any, Optional

from flower_federation.importers import helm_defaults, helm_pods, helm_steps
from flower_federation.importers.chart import CHART, Param, Values, known_prefixes
from flower_federation.importers.common import Stack, problems, validate

PREFIXES = known_prefixes()
SHARED = "a pool's SuperNodes and their SuperExecs share"
# Parameters the chart reads that its Parameters tables only mention (supernode.imagePullSecrets
# "overrides global.imagePullSecrets"): chart path -> config path. Not rows of
# docs/helm-parameters.md, which lists the tables' parameters; its text names them.
ALIASES = {"global.imagePullSecrets": "imagePullSecrets"}
PULL_SECRETS = ("global.imagePullSecrets", "supernode.imagePullSecrets", "superexec.imagePullSecrets")


def _leaves(values: dict[str, Any], stack: Stack, prefix: str = "") -> dict[str, Any]:
    """Every chart parameter the values file sets, by path; anything else is refused."""
    out: dict[str, Any] = {}
    for key, value in values.items():
        path = f"{prefix}.{key}" if prefix else str(key)
        if path in CHART or path in ALIASES:
            out[path] = value
        elif path in PREFIXES and isinstance(value, dict):
            out.update(_leaves(value, stack, path))
        elif path in PREFIXES:
            stack.refuse(path, f"must be a mapping of the chart's {path}.* parameters, not {value!r}")
        else:
            # Another spelling of a key of the same mapping (by the key alone: whole paths share their prefix).
            parent, _, key = path.rpartition(".")
            siblings = {k.rpartition(".")[2]: k for k in (*CHART, *PREFIXES) if k.rpartition(".")[0] == parent}
            near = [siblings[k] for k in difflib.get_close_matches(key, list(siblings), n=1, cutoff=0.75)]
            if near:  # a likely misspelling: --allow-drop would drop the value meant for `near`, so it never does
                why = f"not a parameter of the SuperNode Helm chart; did you mean {near[0]}? Fix the key there"
                stack.refuse(path, why, droppable=False)
            else:
                stack.refuse(path, "not a parameter of the SuperNode Helm chart (it would ignore it)")
    return out


def secret_names(value: Any, path: str, stack: Stack) -> list[str]:
    """Image pull secrets as chart users write them, names or Kubernetes' LocalObjectReferences
    (`- name: x`), as the list of Secret names the config takes; any other entry is refused."""
    if not isinstance(value, list):
        stack.refuse(path, f"must be a list of Secret names or {{name: <Secret>}} entries, not {value!r}")
        return []
    names = []
    for i, item in enumerate(value):
        if isinstance(item, dict) and set(item) == {"name"}:
            item = item["name"]
        if isinstance(item, str) and item:
            names.append(item)
        else:
            stack.refuse(f"{path}[{i}]", f"must be a Secret's name or {{name: <Secret>}}, not {item!r}")
    return names


def import_values(
    values: Any,
    *,
    origin: str,
    command: str,
    release: Optional[str] = None,
    namespace: Optional[str] = None,
    allow_drop: bool = False,
    preserve: bool = False,
) -> Stack:
    """The site stack equivalent to installing the chart with `values`; ImportRefused lists
    every value it cannot carry over."""
    stack = Stack(stack="site", origin=origin, command=command)
    if values is None:
        values = {}
    if not isinstance(values, dict):
        stack.refuse("(values file)", "must be a mapping of chart parameters", droppable=False)
        stack.settle(allow_drop)
    user = _leaves(values, stack)
    for path, value in sorted(user.items()):
        if value is None:
            stack.refuse(path, "null removes the chart's default, which leaves this parameter without a meaning")
    for path in PULL_SECRETS:
        if user.get(path) is not None:
            user[path] = secret_names(user[path], path, stack)
    aliases = {p: user.pop(p) for p in ALIASES if p in user}
    for path, value in aliases.items():
        if value is not None:
            stack.set(ALIASES[path], value, path)
    vals = Values({p: v for p, v in user.items() if v is not None})
    steps = helm_steps.Steps(vals, stack, release=release, namespace=namespace, preserve=preserve)
    steps.run()
    _copy_plain(vals, stack, steps)
    helm_pods.our_labels(steps)
    _refuse_listed(vals, stack, steps)
    helm_defaults.closing(steps)
    stack.settle(allow_drop, problems)
    validate(stack)
    return stack


def _plain(path: str, param: Param) -> bool:
    return param.status in ("carried", "partial") and param.to is not None and path not in helm_steps.COMPUTED


def _copy_plain(vals: Values, stack: Stack, steps: helm_steps.Steps) -> None:
    """Parameters copied as they are. Several naming one config path combine as the chart
    combines them (`global.*`, then the component's own); SuperNode and SuperExec values
    that land in one place must agree, since a pool's SuperNodes and SuperExecs share it."""
    targets: dict[str, list[str]] = {}
    for path, param in CHART.items():
        if _plain(path, param) and steps.active(path):
            targets.setdefault(str(param.to), []).append(path)
    for target, paths in targets.items():
        # The chart's `""` is "unset" (a node port, an address): nothing to copy.
        set_ones = [p for p in paths if vals.set_by_user(p) and not vals.get(p) == CHART[p].default == ""]
        if not set_ones:
            continue
        value = _combine(vals, stack, target, paths)
        if value is not None:
            stack.set(target, value, ", ".join(set_ones))


def _combine(vals: Values, stack: Stack, target: str, paths: list[str]) -> Any:
    values = [(p, vals.get(p)) for p in paths]
    if all(isinstance(v, dict) for _, v in values):
        out: dict[str, Any] = {}
        owner: dict[str, str] = {}
        for path, value in values:
            for k, v in value.items():
                if k in out and out[k] != v and _components(owner[k], path):
                    stack.refuse(path, f"{k!r} differs from {owner[k]}'s: {SHARED} {target}")
                    continue
                out[k], owner[k] = v, path
        return out
    if all(isinstance(v, list) for _, v in values):
        items: list[Any] = []
        for _, value in values:
            items += [v for v in value if v not in items]
        return items
    first_path, first = values[0]
    for path, value in values[1:]:
        if value != first:
            # Blame the value the user set; both sides are named.
            mine, theirs = (path, first_path) if vals.set_by_user(path) else (first_path, path)
            stack.refuse(
                mine,
                f"{vals.get(mine)!r} here, {vals.get(theirs)!r} in {theirs}: {SHARED} {target}; set both alike",
            )
            return None
    return first


def _components(a: str, b: str) -> bool:
    """Two parameters of different components (SuperNode vs SuperExec), not global vs one."""
    return not a.startswith("global.") and a.split(".")[0] != b.split(".")[0]


def _refuse_listed(vals: Values, stack: Stack, steps: helm_steps.Steps) -> None:
    """Refused parameters set to anything but the chart's default; ignored ones set at all are said."""
    for path, param in CHART.items():
        if path in helm_steps.COMPUTED or not steps.active(path):
            continue
        if param.status == "refused" and vals.changed(path):
            stack.refuse(path, param.note)
        elif param.status == "ignored" and vals.set_by_user(path):
            stack.notes.append(f"Ignored: {path} ({param.note})")


__all__ = ["import_values"]
