"""The federation exporter (`monitoring.enabled`, docs/observability.md): a container `federation-exporter` in the
SuperLink's pod, in the SuperLink's image (the only image with Flower's client code, at the SuperLink's own
version), running `flower/scripts/federation_exporter.py`; its ConfigMap (the script, the `flwr` connection
config for the Control API on loopback, the trusted keys' site and pool); and a ClusterIP Service
`N-federation-exporter` for the scrapers (network_links.py admits only `monitoring.scrapers` to its port).

Why a container of the SuperLink's pod, not a Deployment: it reaches the Control API over loopback (the server
certificate names 127.0.0.1), reads the state volume's usage and the state-guard backups (a ReadWriteOnce
volume one pod mounts), and the mounted certificates, and it is upgraded with the SuperLink, so its client
always speaks that SuperLink's Control API. It mounts the server certificate alone (never its key) and the
state volume read-only.

The ConfigMap is not immutable and no checksum of it rolls the pod: when the trusted keys change, Kubernetes
updates the mounted file in place and the exporter re-reads it on its next poll, so a site joining never
restarts the SuperLink.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Optional

import tomli_w

from flower_federation.builders import dashboard, monitoring_rules, pods, resources
from flower_federation.builders.workload_parts import secret_volume
from flower_federation.flower.dialects import LOOPBACK
from flower_federation.flower.layout import (
    CA_DIR,
    CA_FILE,
    CA_VOLUME,
    EXPORTER_CERT_DIR,
    EXPORTER_CERT_VOLUME,
    EXPORTER_CONTAINER,
    EXPORTER_DIR,
    EXPORTER_VOLUME,
    STATE_DIR,
    STATE_FILE,
    STATE_VOLUME,
    WRITABLE_PATHS,
)
from flower_federation.kube.naming import FEDERATION_EXPORTER, SUPERLINK, selector_labels
from flower_federation.kube.objects import Container, Manifest
from flower_federation.plan import FederationPlan

SCRIPT = Path(__file__).resolve().parents[1] / "flower" / "scripts" / "federation_exporter.py"
SCRIPT_FILE = "federation_exporter.py"
CONFIG_FILE = "config.toml"
KEY_LABELS_FILE = "key-labels"
CONNECTION = "federation"  # federation_exporter.CONNECTION (a test keeps the two equal)
PORT_NAME = "metrics"
BACKUP_DIR = f"{STATE_DIR}/backups"  # state_guard.BACKUP_DIR (a test keeps the two equal)
# A pool name in a site key's comment, as a site stack writes it (`<site federation>/<pool>/<slot>`,
# node_auth.key_comment); any other comment leaves the pool unnamed ("-").
SITE_KEY_COMMENT = re.compile(r"[a-z]([-a-z0-9]*[a-z0-9])?/(?P<pool>[a-z]([-a-z0-9]*[a-z0-9])?)/[0-9]+")
NO_POOL = "-"


def enabled(plan: FederationPlan) -> bool:
    """Where the exporter runs: beside a SuperLink this stack runs (a site's part is issue 34 part 3)."""
    return plan.spec.monitoring.enabled and plan.runs_superlink


def connection_config(plan: FederationPlan) -> str:
    """The exporter's `flwr` config: the Control API on loopback, verified with the CA (the server certificate
    names 127.0.0.1: config/derived.py)."""
    conn: dict[str, Any] = {"address": f"{LOOPBACK}:{plan.ports.control}"}
    if plan.client_ca_file:
        conn["root-certificates"] = plan.client_ca_file
    else:
        conn["insecure"] = True
    return tomli_w.dumps({"superlink": {"default": CONNECTION, CONNECTION: conn}})


def site_pool(site: str, key_line: str) -> tuple[str, str]:
    fields = key_line.split()
    comment = fields[2] if len(fields) > 2 else ""
    match = SITE_KEY_COMMENT.fullmatch(comment)
    return site, match["pool"] if match else NO_POOL


def key_labels(plan: FederationPlan, pool_keys: Optional[dict[str, dict[str, str]]] = None) -> str:
    """KEY_LABELS_FILE: `site pool key-type key-material` per admitted site key (validated keys, a validated site
    name, a pool name only as its grammar allows), sorted. `pool_keys` ({pool: {slot: key}}): the stack's own pools'
    keys, made at deploy time, which the shell fills in (shell/superlink.py), under the federation's own name as
    site; at render they are unknown, and a key only known at deploy time is left out (the exporter counts its
    node under site "unknown")."""
    lines = set()
    for site, keys in plan.site_keys:
        for key in keys:
            fields = key.split()
            if len(fields) >= 2 and not key.startswith("<"):
                lines.add(" ".join((*site_pool(site, key), fields[0], fields[1])))
    for pool, slots in (pool_keys or {}).items():
        for key in slots.values():
            fields = key.split()
            if len(fields) >= 2 and not key.startswith("<"):
                lines.add(" ".join((plan.name, pool, fields[0], fields[1])))
    return "".join(f"{line}\n" for line in sorted(lines))


def config_map(plan: FederationPlan) -> Manifest:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": plan.meta(plan.names.federation_exporter, FEDERATION_EXPORTER),
        "data": {
            SCRIPT_FILE: SCRIPT.read_text(),
            CONFIG_FILE: connection_config(plan),
            KEY_LABELS_FILE: key_labels(plan),
        },
    }


def service(plan: FederationPlan) -> Manifest:
    port = plan.spec.monitoring.port
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": plan.meta(plan.names.federation_exporter, FEDERATION_EXPORTER),
        "spec": {
            "type": "ClusterIP",
            "selector": selector_labels(plan.name, SUPERLINK),
            "ports": [{"name": PORT_NAME, "port": port, "targetPort": PORT_NAME, "protocol": "TCP"}],
        },
    }


def volumes(plan: FederationPlan) -> list[dict[str, Any]]:
    out = [{"name": EXPORTER_VOLUME, "configMap": {"name": plan.names.federation_exporter, "defaultMode": 0o444}}]
    if plan.trust:
        out.append(secret_volume(EXPORTER_CERT_VOLUME, plan.trust.server_secret, {"tls.crt": "tls.crt"}, 0o440))
    return out


def container(plan: FederationPlan) -> Container:
    """`federation-exporter`: restricted like every container of ours (read-only root filesystem, its scratch
    emptyDir for FLWR_HOME and /tmp), its own probes: alive while its polls keep coming, ready once it
    serves (its readiness is the SuperLink pod's too, so it never depends on the SuperLink answering)."""
    m = plan.spec.monitoring
    files = f"{EXPORTER_DIR}/"
    args = [files + SCRIPT_FILE, "--config", files + CONFIG_FILE, "--key-labels", files + KEY_LABELS_FILE]
    args += ["--port", str(m.port), "--interval", str(m.poll_interval_seconds)]
    mounts = [{"name": EXPORTER_VOLUME, "mountPath": EXPORTER_DIR, "readOnly": True}]
    if plan.spec.superlink.persistence.enabled:
        args += ["--state", STATE_FILE, "--backups", BACKUP_DIR]
        mounts.append({"name": STATE_VOLUME, "mountPath": STATE_DIR, "readOnly": True})
    if plan.trust:
        args += ["--cert", f"{EXPORTER_CERT_DIR}/tls.crt", "--ca", CA_FILE]
        mounts += [
            {"name": EXPORTER_CERT_VOLUME, "mountPath": EXPORTER_CERT_DIR, "readOnly": True},
            {"name": CA_VOLUME, "mountPath": CA_DIR, "readOnly": True},
        ]
    c = pods.container(
        EXPORTER_CONTAINER,
        plan.superlink_image,
        args,
        env=[{"name": "FLWR_HOME", "value": WRITABLE_PATHS["flwr-home"]}, *pods.telemetry_env(plan.spec.telemetry)],
        resources=resources.exporter(plan),
        mounts=mounts,
        security_overrides=plan.spec.security_context,
        pull_policy=plan.pull_policy(plan.spec.superlink.image),
    )
    c["command"] = ["python"]
    c["ports"] = [{"name": PORT_NAME, "containerPort": m.port, "protocol": "TCP"}]
    c["readinessProbe"] = {"httpGet": {"path": "/metrics", "port": PORT_NAME}, "periodSeconds": 30}
    c["livenessProbe"] = {
        "httpGet": {"path": "/healthz", "port": PORT_NAME},
        "periodSeconds": 60,
        "failureThreshold": 3,
    }
    return c


def objects(plan: FederationPlan) -> list[Manifest]:
    """The exporter's own objects (the container joins the SuperLink's pod: superlink.py), the Prometheus
    Operator's that scrape it and alert on it (monitoring_rules.py), and the dashboard of its metrics (dashboard.py)."""
    if not enabled(plan):
        return []
    return [config_map(plan), service(plan), *monitoring_rules.objects(plan), *dashboard.objects(plan)]
