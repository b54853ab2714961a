"""`monitoring` across fields: what each role can monitor (a site runs no exporter, so nothing scrapes or charts
it there: only its own alerts), a switch that would render nothing (never silently: each refused by its path),
the labels a selector finds our objects by (the Grafana sidecar's, a Prometheus' ruleSelector and
serviceMonitorSelector), which the stack's own labels must not override, and thresholds that only make sense in
order."""

from __future__ import annotations

from collections.abc import Iterator

from flower_federation.config.errors import Problem, problem
from flower_federation.config.monitoring import AlertThresholds, DashboardSettings
from flower_federation.kube.limits import qualified_name_problem
from flower_federation.kube.naming import common_labels
from flower_federation.rules.raw import Raw, as_dict, get
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
    yield from _switches(raw, role)
    yield from _selected_labels(raw)


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


SWITCHES = ("serviceMonitor", "prometheusRules", "dashboard")


def _switches(raw: Raw, role: str) -> Iterator[Problem]:
    """Never a ServiceMonitor, rule or dashboard silently missing, nor a log tail silently shown."""
    on = get(raw, "monitoring", "enabled") is True
    rules_on = get(raw, "monitoring", "prometheusRules", "enabled") is True
    if not on:
        for section in SWITCHES:
            if get(raw, "monitoring", section, "enabled") is True:
                yield problem(
                    ("monitoring", section, "enabled"),
                    "needs monitoring.enabled: true (off, monitoring renders nothing)",
                )
    elif role == "site":
        for section, what in (("serviceMonitor", "scrape"), ("dashboard", "chart")):
            if get(raw, "monitoring", section, "enabled") is True:
                yield problem(("monitoring", section, "enabled"), SITE_HAS_NO_EXPORTER.format(what=what))
        if not rules_on:
            yield problem(
                ("monitoring", "enabled"),
                "a site's monitoring is its own alerts (it runs no exporter): set monitoring.prometheusRules.enabled: "
                "true, or turn monitoring off",
            )
    if get(raw, "monitoring", "prometheusRules", "supernodeLogTail") is True and not (
        on and rules_on and role == "site"
    ):
        yield problem(
            ("monitoring", "prometheusRules", "supernodeLogTail"),
            "only with a site's own alerts (role: site, monitoring.enabled and prometheusRules.enabled): it serves "
            "FlowerSiteSuperNodeExiting's runbook",
        )


def _selected_labels(raw: Raw) -> Iterator[Problem]:
    """Our objects' labels put the stack's `labels` (and our own) over a section's extra labels (plan.meta): a key
    in both would silently carry the stack's value, and the selector that should find the object would not."""
    stack = {k: v for k, v in as_dict(get(raw, "labels")).items() if isinstance(k, str)}
    ours = common_labels("x", "x", "x")
    for section in ("serviceMonitor", "prometheusRules"):
        for key, value in as_dict(get(raw, "monitoring", section, "labels")).items():
            if key in ours:
                yield problem(
                    ("monitoring", section, "labels", key), f"'{key}' is a label flower-federation sets itself"
                )
            elif key in stack and stack[key] != value:
                yield problem(
                    ("monitoring", section, "labels", key),
                    f"'{value}' would be overridden by labels.{key} ('{stack[key]}'): the selector meant to find "
                    "this object would not; keep one value",
                )
    if get(raw, "monitoring", "dashboard", "enabled") is True:
        defaults = DashboardSettings()
        key = get(raw, "monitoring", "dashboard", "labelKey")
        value = get(raw, "monitoring", "dashboard", "labelValue")
        key = key if isinstance(key, str) else defaults.label_key
        value = value if isinstance(value, str) else defaults.label_value
        if key in stack and stack[key] != value:
            yield problem(
                ("monitoring", "dashboard", "labelKey"),
                f"'{key}' is also in labels, as '{stack[key]}', which would override the dashboard's '{value}': the "
                "Grafana sidecar would not load it; remove it from labels or choose another labelKey",
            )
