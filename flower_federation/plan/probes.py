"""Liveness and readiness probes that hit Flower's real health endpoints.

- gRPC health (`--health-server-address`, always SERVING while the process runs): every
  program up to Flower 1.42; the kubelet's native gRPC probe checks it.
- HTTP-era SuperLink: `GET /health` on the API port, HTTPS when TLS is on (the kubelet
  does not verify the certificate).
- From Flower 1.43 (no gRPC health server): a SuperNode's Runtime HTTP API answers
  `GET /health` (flwr/supernode/main.py includes flwr/supercore/routers/health, 1.42 and the
  1.43 nightly alike), on loopback, where no kubelet reaches: an exec probe runs the image's
  own Python in the container to GET it (`runtime_health`). A SuperExec serves nothing: its
  probe checks that its process (the container's PID 1) is not stopped or a zombie
  (`process_alive`), what the gRPC health server's answer said of it.
"""

from __future__ import annotations

from collections.abc import Callable
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


# GET the URL it is given (the loopback Runtime API's /health); an answer outside 200-399 (the kubelet's httpGet
# rule), a refused connection or no answer within the probe's timeout exits non-zero. TLS is not verified, as the
# kubelet's own HTTPS probes do not verify: the hop is the container's loopback, and the Runtime API's certificate
# names what SuperExecs dial, which need not include 127.0.0.1. The probe runs every periodSeconds in every
# SuperNode, so it costs what it must and no more: `-I -S` (no site, no environment: the standard library alone),
# http.client rather than urllib.request (which imports email and more), and for HTTPS a context without the
# system's CA store (it verifies nothing): about 40% less CPU a probe than urllib.request with a default context
# (bench/probe_cost.py, docs/benchmarks.md "Exec probes"). urllib.parse is loaded by http.client anyway.
RUNTIME_HEALTH = (
    "import sys,http.client,urllib.parse\n"
    "url,timeout=urllib.parse.urlsplit(sys.argv[1]),float(sys.argv[2])\n"
    "if url.scheme=='https':\n"
    "    import ssl\n"
    "    ctx=ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)\n"
    "    ctx.check_hostname=False\n"
    "    ctx.verify_mode=ssl.CERT_NONE\n"
    "    conn=http.client.HTTPSConnection(url.hostname,url.port,timeout=timeout,context=ctx)\n"
    "else:\n"
    "    conn=http.client.HTTPConnection(url.hostname,url.port,timeout=timeout)\n"
    "conn.request('GET',url.path)\n"
    "sys.exit(not 200<=conn.getresponse().status<400)"
)
# The interpreter's options for both exec probes: isolated (-I: no PYTHON* variables, no user site) and no site
# module (-S): the standard library is all they use, and site's start-up is a third of a bare start's CPU.
PROBE_PYTHON = ["python", "-I", "-S", "-c"]
# PID 1's state (the third field of /proc/1/stat, after the parenthesised name): T/t stopped, Z zombie.
PROCESS_ALIVE = "import sys\nstate=open('/proc/1/stat').read().rsplit(')',1)[1].split()[0]\nsys.exit(state in 'TtZ')"


def _exec_each(command: Callable[[ProbeSettings], list[str]], probes: Probes) -> dict[str, Any]:
    """`_both` for an exec probe whose command depends on the probe's settings (its timeout)."""
    out = {}
    for key, settings, liveness in (
        ("livenessProbe", probes.liveness_probe, True),
        ("readinessProbe", probes.readiness_probe, False),
        ("startupProbe", probes.startup_probe, True),
    ):
        if settings.enabled:
            out[key] = {"exec": {"command": command(settings)}, **_settings(settings, liveness)}
    return out


def runtime_health(port: int, tls: bool, probes: Probes) -> dict[str, Any]:
    """A SuperNode's probes from Flower 1.43: `GET /health` on its Runtime API, from inside the container."""
    url = f"{'https' if tls else 'http'}://127.0.0.1:{port}/health"
    return _exec_each(lambda s: [*PROBE_PYTHON, RUNTIME_HEALTH, url, str(s.timeout_seconds)], probes)


def process_alive(probes: Probes) -> dict[str, Any]:
    """A SuperExec's probes from Flower 1.43: its process is running (not stopped, not a zombie)."""
    return _exec_each(lambda s: [*PROBE_PYTHON, PROCESS_ALIVE], probes)


def supernode_health(
    version: FlowerVersion, grpc_port: int, runtime_port: int, tls: bool, probes: Probes
) -> dict[str, Any]:
    """The gRPC health server up to 1.42 (unchanged renders), the Runtime API's /health from 1.43."""
    if version < GRPC_HEALTH_UNTIL:
        return grpc_health(version, grpc_port, probes)
    return runtime_health(runtime_port, tls, probes)


def superexec_health(version: FlowerVersion, grpc_port: int, probes: Probes) -> dict[str, Any]:
    if version < GRPC_HEALTH_UNTIL:
        return grpc_health(version, grpc_port, probes)
    return process_alive(probes)


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
