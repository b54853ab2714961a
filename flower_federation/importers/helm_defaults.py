"""Where flower-federation's defaults differ from the SuperNode chart's, for one import:
each difference said in a comment of the stack file, and with --preserve-behaviour the
chart's behaviour set explicitly. Values the user set are imported as they are and are not
differences. Each component is judged on its own: a values file that sets the SuperNode's
egress or token leaves the SuperExec's at the chart's default, which is then a difference
of its own (set at `supernodes.pools[0].superexec.*`). Also here: what the chart's defaults
imply that this import sets (an exposed ClientAppIo Service), and chart values that mean
something else here (superexec.replicas and the GPUs it multiplies, supernode.env, a proxy in the
env that our egress policy blocks), said in the Notes."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from flower_federation.config.shared_settings import DEFAULT_MAX_UNAVAILABLE
from flower_federation.flower.dialects import SUPERNODE_APPIO_PORT
from flower_federation.importers import resources_note
from flower_federation.importers.chart import POOL
from flower_federation.importers.common import TELEMETRY, telemetry_set_in

if TYPE_CHECKING:
    from flower_federation.importers.chart import Values
    from flower_federation.importers.helm_state import ChartImport

NETPOL = f"{POOL}.networkPolicy"
SUPEREXEC = f"{POOL}.superexec"
EXPOSED_TYPES = ("NodePort", "LoadBalancer")
# Environment variables that make a client dial through a proxy (gRPC's, and the usual HTTP ones), any case.
PROXY_VARIABLES = {"https_proxy", "http_proxy", "grpc_proxy", "all_proxy"}


def differences(steps: ChartImport) -> list[str]:
    """The differences said while the steps run; `closing` says the rest once the stack is complete."""
    return [*_egress(steps), *_ingress(steps), *_tokens(steps), *_liveness(steps), *_telemetry(steps)]


def exposure(steps: ChartImport) -> None:
    """The chart's default supernode.networkPolicy.allowExternal is true: a values file that
    exposes the ClientAppIo Service and leaves it there meant outside SuperExecs to reach it."""
    v, s = steps.vals, steps.stack
    kind = v.get("supernode.service.type")
    steps.exposed = (
        steps.distributed
        and kind in EXPOSED_TYPES
        and v.get("supernode.networkPolicy.enabled") is not False
        and not v.set_by_user("supernode.networkPolicy.allowExternal")
    )
    if steps.exposed:
        s.set(
            f"{POOL}.networkPolicy.allowExternal",
            True,
            "supernode.service.type, with supernode.networkPolicy.allowExternal at the chart's default (true)",
        )
        s.notes.append(
            f"supernode.service.type {kind} exposes the ClientAppIo API, which the chart's NetworkPolicy admits "
            "from anywhere (supernode.networkPolicy.allowExternal defaults to true there): so this stack sets "
            f"{POOL}.networkPolicy.allowExternal: true, as our default would keep outside SuperExecs out."
        )


def semantics(steps: ChartImport) -> None:
    """Chart values that mean something else here, said where the values use them."""
    v, s = steps.vals, steps.stack
    _proxies(steps)
    if not steps.process:
        return
    _superexec_count(steps)
    own = v.get("superexec.env") if v.set_by_user("superexec.env") else []
    own_names = {e.get("name") for e in own if isinstance(e, dict)} if isinstance(own, list) else set()
    env = v.get("supernode.env") if v.set_by_user("supernode.env") else []
    names = (
        [e["name"] for e in env if isinstance(e, dict) and isinstance(e.get("name"), str)]
        if isinstance(env, list)
        else []
    )
    reaching = [n for n in names if n not in own_names]
    if reaching:
        s.notes.append(
            f"supernode.env reaches the SuperExec containers too here, where ClientApp code runs (the pool's env "
            f"is the SuperExecs' base, superexec.env over it by name): {', '.join(reaching)}; the chart gives it to "
            "the SuperNode only. Set a variable in superexec.env to give the SuperExecs another value."
        )


def _proxies(steps: ChartImport) -> None:
    """A proxy the SuperNodes' env names (Flower's gRPC and HTTP clients dial through it): their NetworkPolicy here
    admits only DNS and the SuperLink's port, where the chart's lets them reach anything by default."""
    v, s = steps.vals, steps.stack
    found = [
        f"{path} sets {e['name']}: {e['value']!r}" if "value" in e else f"{path} sets {e['name']} (from valueFrom)"
        for path in ("global.env", "supernode.env")
        if v.set_by_user(path) and isinstance(v.get(path), list)
        for e in v.get(path)
        if isinstance(e, dict) and str(e.get("name")).lower() in PROXY_VARIABLES
    ]
    egress = "supernode.networkPolicy.allowExternalEgress"
    if (
        not found
        or v.get("supernode.networkPolicy.enabled") is False
        or v.get(egress) is True
        and v.set_by_user(egress)
    ):
        return  # no policy, or egress the values open themselves
    text = (
        f"A proxy: {'; '.join(found)}. The SuperNodes then dial the SuperLink through it, and their NetworkPolicy "
        "here admits only cluster DNS and the SuperLink's port, so that connection is blocked unless the egress "
        f"admits the proxy: {NETPOL}.extraEgress with the proxy's address and port (an ipBlock and a port), or "
        "allowExternalEgress: true"
    )
    if v.set_by_user(egress):
        s.notes.append(text + f" ({egress} is false in the values).")
    elif steps.preserve:
        s.notes.append(
            f"{text}. Covered here: --preserve-behaviour set {NETPOL}.allowExternalEgress: true (the chart's "
            "default), which admits it."
        )
    else:
        s.notes.append(f"{text}, which --preserve-behaviour sets (the chart's default).")


def _superexec_count(steps: ChartImport) -> None:
    """superexec.replicas is the chart's total, SuperExecs per SuperNode here: said where the values set it, and
    wherever the count of SuperExec pods differs from the chart's (several SuperNodes, superexec.replicas left at
    its 1), with the GPUs each SuperExec requests, which come as many times."""
    v, s = steps.vals, steps.stack
    per, nodes = v.get("superexec.replicas"), v.get("supernode.replicas")
    if not isinstance(per, int) or not isinstance(nodes, int):
        return  # validation refuses it
    if not v.set_by_user("superexec.replicas") and nodes * per == per:
        return
    given = "" if v.set_by_user("superexec.replicas") else " (the chart's default)"
    workload = f"{steps.name}-superexec-{steps.pool}"
    workloads = f"StatefulSets {workload} and -1, -2, ..., each" if per > 1 else f"StatefulSet {workload}"
    text = (
        f"superexec.replicas: {per}{given} is SuperExecs per SuperNode here: {workloads} with the pool's replicas, so "
        f"supernode.replicas x superexec.replicas = {nodes} x {per} = {nodes * per} SuperExec pods; the chart runs "
        "superexec.replicas SuperExec pods in total, shared by all SuperNodes."
    )
    for name, each in _gpus(v.get("superexec.resources")).items():
        count = int(str(each)) if re.fullmatch(r"[0-9]+", str(each)) else None
        totals = (
            f"{nodes * per * count} {name} in all, where the chart's {per} SuperExec pod{'s' if per != 1 else ''} "
            f"requested {per * count}"
            if count is not None
            else f"{nodes * per} times that, where the chart's requested it {per} times"
        )
        text += f" Their GPUs multiply too: {name}: {each} per SuperExec pod (superexec.resources), so {totals}."
    s.notes.append(text)


def _gpus(resources: object) -> dict[str, object]:
    """The GPUs a container's resources request: extended resources named like one (nvidia.com/gpu, amd.com/gpu,
    gpu.intel.com/i915), by name, from its limits (which Kubernetes takes as the request), else its requests."""
    out: dict[str, object] = {}
    for part in ("limits", "requests"):
        given = resources.get(part) if isinstance(resources, dict) else None
        for name, quantity in given.items() if isinstance(given, dict) else ():
            if "gpu" in str(name).lower():
                out.setdefault(str(name), quantity)
    return out


def _policy_here(v: Values, component: str) -> bool:
    """Whether the component has a NetworkPolicy here: the SuperExecs' inherits the pool's
    (the SuperNode's) `enabled` unless superexec.networkPolicy.enabled is set."""
    if component == "superexec" and v.set_by_user("superexec.networkPolicy.enabled"):
        return v.get("superexec.networkPolicy.enabled") is not False
    return v.get("supernode.networkPolicy.enabled") is not False


def _egress(steps: ChartImport) -> list[str]:
    v = steps.vals
    param = "networkPolicy.allowExternalEgress"
    supernode = _policy_here(v, "supernode") and not v.set_by_user(f"supernode.{param}")
    # The SuperExecs' policy inherits the pool's allowExternalEgress: one the values set true opens them too.
    superexec = (
        steps.process
        and _policy_here(v, "superexec")
        and not v.set_by_user(f"superexec.{param}")
        and not (v.set_by_user(f"supernode.{param}") and v.get(f"supernode.{param}") is True)
    )
    here = "here only cluster DNS and the SuperLink's port"
    if supernode and superexec:
        return [
            "Egress: the chart's NetworkPolicies let SuperNodes and SuperExecs reach anything "
            f"(supernode.{param} and superexec.{param}: true); {here}, and for SuperExecs their SuperNode (ClientApps "
            "that fetch data need allowExternalEgress or extraEgress). "
            + steps.set_preserved(f"{NETPOL}.allowExternalEgress", True)
            + " The SuperExecs' policy inherits it."
        ]
    out = []
    if supernode:
        out.append(
            f"Egress: the chart's SuperNode NetworkPolicy lets SuperNodes reach anything (supernode.{param}: true); "
            f"{here} (ClientApps that run in the SuperNode and fetch data need allowExternalEgress or extraEgress). "
            + steps.set_preserved(f"{NETPOL}.allowExternalEgress", True)
        )
    if superexec:
        out.append(
            f"Egress: the chart's SuperExec NetworkPolicy lets the SuperExecs, where ClientApp code runs, reach "
            f"anything (superexec.{param}: true, which the values leave at the chart's default); here only cluster "
            "DNS and their SuperNode, plus what the SuperNode's networkPolicy settings allow, which the SuperExecs' "
            f"policy inherits (ClientApps that fetch data need superexec.{param} or superexec.networkPolicy."
            "extraEgress). " + steps.set_preserved(f"{SUPEREXEC}.networkPolicy.allowExternalEgress", True)
        )
    return out


def _ingress(steps: ChartImport) -> list[str]:
    v = steps.vals
    if v.get("supernode.networkPolicy.enabled") is False or v.set_by_user("supernode.networkPolicy.allowExternal"):
        return []
    if steps.exposed:
        return []  # helm_steps set allowExternal: true for the exposed Service and said so
    text = (
        f"Ingress: the chart admits its ClientAppIo API ({SUPERNODE_APPIO_PORT}) from anywhere "
        "(networkPolicy.allowExternal: true) through a ClusterIP Service; here the pool's Service is headless "
        "(stable pod names) and the API "
    )
    if steps.distributed:
        text += "takes only the pool's own SuperExecs. " + steps.set_preserved(f"{NETPOL}.allowExternal", True)
    else:
        text += "stays on the pod's loopback (no SuperExec dials it), so there is nothing to admit or preserve."
    return [text]


def _tokens(steps: ChartImport) -> list[str]:
    v = steps.vals
    param = "automountServiceAccountToken"
    supernode = not v.set_by_user(f"supernode.{param}")
    superexec = steps.process and not v.set_by_user(f"superexec.{param}")
    if not supernode and not superexec:
        return []
    who = " and ".join(c for c, on in (("SuperNode", supernode), ("SuperExec", superexec)) if on)
    params = " and ".join(f"{c}.{param}" for c, on in (("supernode", supernode), ("superexec", superexec)) if on)
    preserved = steps.preserved(
        [(path, True) for path, on in ((f"{POOL}.{param}", supernode), (f"{SUPEREXEC}.{param}", superexec)) if on]
    )
    return [
        f"Service account token: the chart mounts one in every {who} pod ({params}: true, the chart's default); "
        "here none (Flower never calls the Kubernetes API). " + preserved
    ]


def _liveness(steps: ChartImport) -> list[str]:
    """The chart's liveness probes give up after 1 s, three times in a row; ours after 5 s, six times (a busy
    SuperLink answered late and was killed mid-round: docs/benchmarks.md, "Many SuperNodes")."""
    v = steps.vals
    keys = [k for k in ("timeoutSeconds", "failureThreshold") if not v.set_by_user(f"supernode.livenessProbe.{k}")]
    if not keys or v.get("supernode.livenessProbe.enabled") is False:
        return []
    chart = {k: v.get(f"supernode.livenessProbe.{k}") for k in keys}
    preserved = steps.preserved([(f"supernodes.probes.livenessProbe.{k}", chart[k]) for k in keys])
    said = " and ".join(f"supernode.livenessProbe.{k}: {chart[k]}" for k in keys)
    return [
        f"Liveness probes: the chart restarts a container whose probe fails {said} (its defaults); here a probe "
        "waits 5 s and restarts after six failures in a row, so a busy program is not killed mid-round. " + preserved
    ]


def closing(steps: ChartImport) -> None:
    """The last differences, said once the stack is complete: its resources as the render of the written stack
    gives them (resources_note.py; with --preserve-behaviour, without presets), then what is kept; and a note
    where ClientApps train on a GPU under a preset's memory limit."""
    if steps.process:
        lift = "supernode.resources / superexec.resources (supernodeResources / superexecResources here)"
    else:
        lift = "supernode.resources (supernodeResources here)"
    preserved = steps.set_preserved("resourcesPreset", "none")
    does = "gives a container only the requests and limits of its values (none by default)"
    found = resources_note.rendered(steps.stack)  # once the stack is complete: the figures are its render's
    text = resources_note.difference(
        steps.stack, found, source="the chart", does=does, own="the values'", lift=lift, preserved=preserved
    )
    steps.stack.differences += [text, _kept()] if text else [_kept()]
    steps.stack.notes += resources_note.gpu_notes(steps.stack, found, "the chart")


def _telemetry(steps: ChartImport) -> list[str]:
    v = steps.vals
    paths = ("global.env", "supernode.env", "superexec.env")
    if telemetry_set_in([v.get(p) for p in paths if v.set_by_user(p)]):
        return []
    return [TELEMETRY.format(where="the chart") + steps.preserved([("telemetry", True)])]


def _kept() -> str:
    return (
        "Kept, as nothing is lost by them: SuperNodes run as a StatefulSet (stable names, one node key per ordinal), "
        f"with a PodDisruptionBudget (maxUnavailable {DEFAULT_MAX_UNAVAILABLE}) and a startup probe. TLS is on by "
        "default in both."
    )
