"""The Grafana dashboard (`monitoring.dashboard`, issue 34 part 4): a ConfigMap `N-federation-dashboard` holding
one dashboard as JSON, labelled for the Grafana sidecar (`labelKey: labelValue`, its `sidecar.dashboards.label`
and `labelValue`), in the federation's namespace beside the exporter.

Built with Grafana's own model (grafana-foundation-sdk's builders and types), never hand-written JSON, so every
field is one Grafana reads; the panels and their queries are plain data (dashboard_panels.py). The SDK is imported
only when a dashboard is rendered: a stack without it never loads it.

Deterministic: keys sorted, panel ids 1..n in order, grid positions from the panels' widths, the dashboard's uid
a digest of the namespace and federation name (stable across renders, distinct per federation, so two federations'
dashboards never replace each other in Grafana). The data source is a variable (`datasource`, any Prometheus),
so the dashboard needs no uid of yours.

Why no namespace setting: the stack's Pulumi credentials write to the federation's namespace, not necessarily
Grafana's; kube-prometheus-stack's sidecar searches every namespace (`searchNamespace: ALL`, its default since
chart 45.12), and Grafana's own chart takes `sidecar.dashboards.searchNamespace` for the same."""

from __future__ import annotations

import hashlib
import json
from typing import Any

from flower_federation.builders.dashboard_panels import STAT, PanelSpec, panels
from flower_federation.kube.naming import FEDERATION_EXPORTER
from flower_federation.kube.objects import Manifest
from flower_federation.plan import FederationPlan

FILE_SUFFIX = ".json"  # the sidecar writes each data key as a file: it must end in .json
DATASOURCE = "datasource"
HEIGHT = 8
GRID_WIDTH = 24


def uid(plan: FederationPlan) -> str:
    """At most 40 characters (Grafana's limit)."""
    return "flower-" + hashlib.sha256(f"{plan.namespace}/{plan.name}".encode()).hexdigest()[:24]


def _panel(spec: PanelSpec, panel_id: int, x: int, y: int) -> Any:
    from grafana_foundation_sdk.builders import common as cb
    from grafana_foundation_sdk.builders import dashboard as db
    from grafana_foundation_sdk.builders import prometheus, stat, timeseries
    from grafana_foundation_sdk.models import common as cm
    from grafana_foundation_sdk.models import dashboard as dm

    builder: Any
    if spec.kind == STAT:
        # The latest value of each series (a certificate's time left, a site count), not an average over the range.
        reduce = cb.ReduceDataOptions().calcs(["lastNotNull"]).values(False)
        builder = stat.Panel().reduce_options(reduce).graph_mode(cm.BigValueGraphMode.NONE)
        builder.color_mode(cm.BigValueColorMode.VALUE).text_mode(cm.BigValueTextMode.VALUE_AND_NAME)
    else:
        builder = timeseries.Panel()
    builder.id(panel_id).title(spec.title).description(spec.description).unit(spec.unit)
    builder.datasource(dm.DataSourceRef(type_val="prometheus", uid=f"${{{DATASOURCE}}}"))
    builder.grid_pos(dm.GridPos(h=HEIGHT, w=spec.width, x=x, y=y))
    for i, query in enumerate(spec.queries):  # refIds A, B, ... as Grafana names them
        builder.with_target(prometheus.Dataquery().expr(query.expr).legend_format(query.legend).ref_id(chr(65 + i)))
    if spec.steps:
        steps = [dm.Threshold(value=value, color=color) for value, color in spec.steps]
        builder.thresholds(db.ThresholdsConfig().mode(dm.ThresholdsMode.ABSOLUTE).steps(steps))
    return builder


def dashboard_model(plan: FederationPlan) -> Any:
    """The dashboard in Grafana's model (grafana_foundation_sdk.models.dashboard.Dashboard)."""
    from grafana_foundation_sdk.builders import dashboard as db

    board = db.Dashboard(f"Flower federation {plan.name} ({plan.namespace})").uid(uid(plan))
    board.tags(["flower", "flower-federation"]).refresh("1m").time("now-6h", "now").timezone("utc").readonly()
    board.with_variable(db.DatasourceVariable(DATASOURCE).label("Prometheus").type("prometheus"))
    x = y = 0
    for panel_id, spec in enumerate(panels(plan), start=1):
        if x + spec.width > GRID_WIDTH:
            x, y = 0, y + HEIGHT
        board.with_panel(_panel(spec, panel_id, x, y))
        x += spec.width
    return board.build()


def dashboard_json(plan: FederationPlan) -> str:
    from grafana_foundation_sdk.cog.encoder import JSONEncoder

    return json.dumps(dashboard_model(plan), cls=JSONEncoder, sort_keys=True, indent=1) + "\n"


def config_map(plan: FederationPlan) -> Manifest:
    settings = plan.spec.monitoring.dashboard
    name = plan.names.federation_dashboard
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": plan.meta(name, FEDERATION_EXPORTER, extra_labels={settings.label_key: settings.label_value}),
        "data": {name + FILE_SUFFIX: dashboard_json(plan)},
    }


def objects(plan: FederationPlan) -> list[Manifest]:
    """Called where the exporter runs (monitoring.objects): the dashboard charts its metrics."""
    return [config_map(plan)] if plan.spec.monitoring.dashboard.enabled else []
