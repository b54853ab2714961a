"""Where flower-federation's defaults differ from the SuperNode chart's, for one import:
each difference said in a comment of the stack file, and with --preserve-behaviour the
chart's behaviour set explicitly. Values the user set are imported as they are and are not
differences."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .chart import POOL

if TYPE_CHECKING:
    from .helm_steps import Steps

NETPOL = f"{POOL}.networkPolicy"


def differences(steps: Steps) -> list[str]:
    v = steps.vals
    out: list[str] = []
    components = ["supernode"] + (["superexec"] if steps.process else [])

    def chart_default(param: str) -> bool:
        """True where no component's value for `param` was set: the chart's default acts."""
        return not any(v.set_by_user(f"{c}.{param}") for c in components)

    if v.get("supernode.networkPolicy.enabled") is not False:
        if chart_default("networkPolicy.allowExternalEgress"):
            out.append(
                "Egress: the chart's NetworkPolicy lets SuperNodes and SuperExecs reach anything "
                "(networkPolicy.allowExternalEgress: true); here only cluster DNS and the SuperLink's port (ClientApps "
                "that fetch data need allowExternalEgress or extraEgress). "
                + steps.set_preserved(f"{NETPOL}.allowExternalEgress", True)
            )
        if not v.set_by_user("supernode.networkPolicy.allowExternal"):
            text = (
                "Ingress: the chart admits its ClientAppIo API (9094) from anywhere (networkPolicy.allowExternal: "
                "true) through a ClusterIP Service; here the pool's Service is headless (stable pod names) and the API "
            )
            if steps.distributed:
                text += "takes only the pool's own SuperExecs. " + steps.set_preserved(f"{NETPOL}.allowExternal", True)
            else:
                text += "stays on the pod's loopback (no SuperExec dials it), so there is nothing to admit or preserve."
            out.append(text)
    if chart_default("automountServiceAccountToken"):
        preserved = [steps.set_preserved(f"{POOL}.automountServiceAccountToken", True)]
        if steps.process:
            preserved.append(steps.set_preserved(f"{POOL}.superexec.automountServiceAccountToken", True))
        out.append(
            "Service account token: the chart mounts one in every pod (automountServiceAccountToken: true); here none "
            "(Flower never calls the Kubernetes API). " + " ".join(preserved)
        )
    out.append(
        "Resources: the chart gives a container only the requests and limits of its values (none by default); "
        "here every container starts from its role's preset, requests and a memory limit (the README's "
        "'Resources'), with supernode.resources / superexec.resources key by key over it. "
        + steps.set_preserved("resourcesPreset", "none")
    )
    out.append(
        "Kept, as nothing is lost by them: SuperNodes run as a StatefulSet (stable names, one node key per ordinal), "
        "with a PodDisruptionBudget (maxUnavailable 1) and a startup probe. TLS is on by default in both."
    )
    return out
