"""`monitoring` across fields: what each role can monitor (a site runs no exporter, so nothing scrapes or charts
it there: only its own alerts), and the Grafana sidecar's label, which reaches the dashboard's ConfigMap."""

from __future__ import annotations

from collections.abc import Iterator

from flower_federation.config.errors import Problem, problem
from flower_federation.kube.limits import qualified_name_problem
from flower_federation.kube.naming import common_labels
from flower_federation.rules.raw import Raw, get
from flower_federation.rules.workloads import label_value_problem

SITE_HAS_NO_EXPORTER = (
    "a site runs no SuperLink, so no exporter to {what}: enable it in the hub's stack (a site's monitoring renders "
    "its own alerts: prometheusRules)"
)


def monitoring(raw: Raw, role: str) -> Iterator[Problem]:
    at = ("monitoring", "dashboard")
    key, value = get(raw, *at, "labelKey"), get(raw, *at, "labelValue")
    if isinstance(key, str):
        why = qualified_name_problem(key)
        if why:
            yield problem(at + ("labelKey",), f"'{key}' is not a Kubernetes label key: {why}")
        elif key in common_labels("x", "x", "x"):
            yield problem(at + ("labelKey",), f"'{key}' is a label flower-federation sets itself; choose another")
    if isinstance(value, str) and (why := label_value_problem(value)):
        yield problem(at + ("labelValue",), why)
    if role == "site" and get(raw, "monitoring", "enabled") is True:
        # Never a ServiceMonitor or dashboard silently missing: each is refused by its path.
        for section, what in (("serviceMonitor", "scrape"), ("dashboard", "chart")):
            if get(raw, "monitoring", section, "enabled") is True:
                yield problem(("monitoring", section, "enabled"), SITE_HAS_NO_EXPORTER.format(what=what))
