"""`monitoring` across fields: what each role can monitor (a site runs no exporter, so nothing scrapes or charts
it there: only its own alerts), the Grafana sidecar's label, which reaches the dashboard's ConfigMap, and
thresholds that only make sense in order."""

from __future__ import annotations

from collections.abc import Iterator

from flower_federation.config.errors import Problem, problem
from flower_federation.config.monitoring import AlertThresholds
from flower_federation.kube.limits import qualified_name_problem
from flower_federation.kube.naming import common_labels
from flower_federation.rules.raw import Raw, get
from flower_federation.rules.workloads import label_value_problem

SITE_HAS_NO_EXPORTER = (
    "a site runs no SuperLink, so no exporter to {what}: enable it in the hub's stack (a site's monitoring renders "
    "its own alerts: prometheusRules)"
)


def monitoring(raw: Raw, role: str) -> Iterator[Problem]:
    yield from _certificate_days(raw)
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


def _certificate_days(raw: Raw) -> Iterator[Problem]:
    """The critical certificate alert must fire later (closer to expiry) than the warning: critical at or above the
    warning would page at once, with no warning first, and the dashboard's colours would overlap."""
    at = ("monitoring", "prometheusRules", "thresholds")
    warning, critical = get(raw, *at, "certificateWarningDays"), get(raw, *at, "certificateCriticalDays")
    warning = warning if isinstance(warning, int) and not isinstance(warning, bool) else None
    critical = critical if isinstance(critical, int) and not isinstance(critical, bool) else None
    if warning is None and critical is None:
        return
    defaults = AlertThresholds()  # the defaults, stated once in the config model, stand in for the one not given
    warning = defaults.certificate_warning_days if warning is None else warning
    critical = defaults.certificate_critical_days if critical is None else critical
    if critical >= warning:
        yield problem(
            at + ("certificateCriticalDays",),
            f"{critical} must be below certificateWarningDays ({warning}): the critical alert is the later, "
            "closer-to-expiry one",
        )
