"""Liveness and readiness probes that hit Flower's real health endpoints.

- gRPC health (`--health-server-address`, always SERVING while the process runs): every
  program up to Flower 1.42; the kubelet's native gRPC probe checks it.
- HTTP-era SuperLink: `GET /health` on the API port, HTTPS when TLS is on (the kubelet
  does not verify the certificate).
"""

from __future__ import annotations

from typing import Any, Optional

from flower_federation.config import Probes, ProbeSettings
from flower_federation.flower.versions import GRPC_HEALTH_UNTIL, FlowerVersion


def _settings(s: ProbeSettings, liveness: bool) -> dict[str, Any]:
    return {
        "initialDelaySeconds": s.initial_delay_seconds,
        "periodSeconds": s.period_seconds,
        "timeoutSeconds": s.timeout_seconds,
        "failureThreshold": s.failure_threshold,
        # Kubernetes requires 1 for liveness (config rules say so too).
        "successThreshold": 1 if liveness else s.success_threshold,
    }


def _both(handler: dict[str, Any], probes: Probes) -> dict[str, Any]:
    out = {}
    if probes.liveness_probe.enabled:
        out["livenessProbe"] = {**handler, **_settings(probes.liveness_probe, True)}
    if probes.readiness_probe.enabled:
        out["readinessProbe"] = {**handler, **_settings(probes.readiness_probe, False)}
    if probes.startup_probe.enabled:
        # Kubernetes requires successThreshold 1 for startup probes too.
        out["startupProbe"] = {**handler, **_settings(probes.startup_probe, True)}
    return out


def grpc_health(version: FlowerVersion, port: int, probes: Probes) -> dict[str, Any]:
    if version >= GRPC_HEALTH_UNTIL:
        return {}
    return _both({"grpc": {"port": port}}, probes)


def http_health(port_name: str, tls: bool, probes: Probes) -> dict[str, Any]:
    return _both({"httpGet": {"path": "/health", "port": port_name, "scheme": "HTTPS" if tls else "HTTP"}}, probes)


def proxy_health(port_name: str, tls: bool, probes: Probes) -> dict[str, Any]:
    """A proxy in front of an HTTP-era SuperLink: ready when `GET /health` answers through
    it, alive while it accepts connections (a SuperLink restart is not the proxy's fault)."""
    out = {}
    if probes.readiness_probe.enabled:
        handler = {"httpGet": {"path": "/health", "port": port_name, "scheme": "HTTPS" if tls else "HTTP"}}
        out["readinessProbe"] = {**handler, **_settings(probes.readiness_probe, False)}
    if probes.liveness_probe.enabled:
        out["livenessProbe"] = {"tcpSocket": {"port": port_name}, **_settings(probes.liveness_probe, True)}
    return out


def inherit(*layers: Optional[Probes]) -> Probes:
    """Probe settings resolved key by key: the model's defaults, then each layer's keys
    that were set in config (later layers win). Setting only
    `superlink.probes.livenessProbe.periodSeconds` keeps every other top-level setting."""
    resolved = Probes()
    for layer in layers:
        if layer is None:
            continue
        update = {}
        for probe in layer.model_fields_set:
            given: ProbeSettings = getattr(layer, probe)
            current: ProbeSettings = getattr(resolved, probe)
            update[probe] = current.model_copy(update={k: getattr(given, k) for k in given.model_fields_set})
        resolved = resolved.model_copy(update=update)
    return resolved
