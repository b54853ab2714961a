"""The e2e harness's Gateway API emulation (tests/e2e/harness/gateway.py), without root: what
it programs from hand-written objects (the routes' locations with Gateway API path
semantics, the backends with and without a BackendTLSPolicy, the 404 default), what a real
controller would refuse, and, where an nginx binary is present, that nginx accepts the
configuration (`nginx -t`). tests/e2e/test_e2e_gateway_emulation.py sends traffic through it."""

from __future__ import annotations

import copy
import re
import subprocess
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from tests.e2e import gateway_objects as g
from tests.e2e.harness.gateway import _locations, program
from tests.e2e.harness.host import HarnessError
from tests.e2e.harness.pods import nginx_path
from tests.support.processes import free_port

GW_NS, FED = "gateway-system", "fed"
HOST = "fleet.example.test"
ADDRESS = "127.0.0.1"
PROXY_IP, BACKEND_IP = "10.0.0.5", "10.0.0.6"

CA = g.CA("federation CA")
LISTENER_CERT = CA.issue(HOST)
PROXY_CERT = CA.issue("proxy.fed.svc")


def _pod(name: str, ip: str, labels: dict[str, str], ports: dict[str, int]) -> SimpleNamespace:
    """What the controller reads of a harness Pod."""
    spec = {"containers": [{"name": "c", "ports": [{"name": n, "containerPort": p} for n, p in ports.items()]}]}
    return SimpleNamespace(name=name, namespace=FED, ip=ip, labels=labels, spec=spec)


PODS = [
    _pod("proxy-0", PROXY_IP, {"app": "proxy"}, {"fleet": 8000}),
    _pod("backend-0", BACKEND_IP, {"app": "backend"}, {"http": 8080}),
]


def _objects() -> list[dict[str, Any]]:
    """The federation's objects (namespace fed) as the product renders them, plus a plain backend."""
    return [
        g.tls_secret("fleet-tls", FED, *LISTENER_CERT),
        g.reference_grant("gateways-read-fleet-tls", FED, "Gateway", GW_NS, "Secret", "fleet-tls"),
        g.ca_config_map("fed-ca", FED, CA.pem),
        # Service port 443 -> the container port named `fleet` (8000): the gateway dials the pod's 8000.
        g.service("proxy", FED, {"app": "proxy"}, [("fleet", 443, "fleet")]),
        g.service("plain", FED, {"app": "backend"}, [("http", 8080, 8080)]),
        g.backend_tls_policy("proxy-tls", FED, [("proxy", "fleet")], "fed-ca", "proxy.fed.svc"),
        g.http_route(
            "fleet",
            FED,
            (GW_NS, "edge"),
            [([("PathPrefix", "/v1/fleet/")], ("proxy", 443)), ([("Exact", "/plain")], ("plain", 8080))],
            hostnames=[HOST],
        ),
        # Another Gateway's route: not this one's business.
        g.http_route("other", FED, (GW_NS, "elsewhere"), [([("PathPrefix", "/")], ("plain", 8080))]),
    ]


def _gateway(port: int = 443, secret_ns: str | None = FED) -> dict[str, Any]:
    return g.gateway("edge", GW_NS, HOST, "fleet-tls", secret_ns, port)


def _program(objects: list[dict[str, Any]], gateway: dict[str, Any] | None = None, tmp: Path = Path("/nowhere")):
    return program(gateway or _gateway(), objects, PODS, ADDRESS, tmp)


def _server_blocks(config: str) -> list[str]:
    return config.split("    server {")[1:]


def _location(config: str, match: str) -> str:
    """The body of `location <match> {...}` (the first)."""
    m = re.search(r"location " + re.escape(match) + r" \{(.*?)\n        \}", config, re.S)
    assert m, f"no location {match}:\n{config}"
    return m.group(1)


# --- what it programs -----------------------------------------------------------------------


def test_a_fleet_route_becomes_verified_tls_locations_on_path_element_boundaries():
    out = _program(_objects())
    assert out.routes == ["fed/fleet"]
    config = out.config
    # PathPrefix /v1/fleet/: the trailing slash ignored, whole path elements only.
    for match in ("= /v1/fleet", "^~ /v1/fleet/"):
        body = _location(config, match)
        assert f"proxy_pass https://{PROXY_IP}:8000;" in body  # the pod's target port, not the Service's 443
        assert "proxy_ssl_verify on;" in body
        assert "proxy_ssl_name proxy.fed.svc;" in body
        assert "proxy_ssl_server_name on;" in body
        assert "proxy_ssl_trusted_certificate /nowhere/backend-ca-fed-proxy-tls.crt;" in body
        assert 'set $gw_route "fed/fleet#0";' in body
    assert out.files["backend-ca-fed-proxy-tls.crt"] == CA.pem
    # Exact /plain, no BackendTLSPolicy: plain HTTP.
    assert f"proxy_pass http://{BACKEND_IP}:8080;" in _location(config, "= /plain")
    assert "location ^~ /plain/" not in config
    # The listener: its hostname, the certificate of the Secret the ReferenceGrant lets it read.
    assert f"server_name {HOST};" in config
    assert f"listen {ADDRESS}:443 ssl;" in config
    assert out.files["listener-fleet-0.crt"] == LISTENER_CERT[0]
    assert out.files["listener-fleet-0.key"] == LISTENER_CERT[1]
    # Requests and responses pass as sent, streamed, with generous timeouts.
    for line in (
        "client_max_body_size 0;",
        "proxy_request_buffering off;",
        "proxy_buffering off;",
        "proxy_http_version 1.1;",
        "proxy_read_timeout 3600s;",
        "proxy_send_timeout 3600s;",
        "underscores_in_headers on;",
        "proxy_set_header Host $http_host;",
    ):
        assert line in config
    # The other Gateway's route is not programmed here.
    assert "fed/other" not in config


def test_requests_no_rule_matches_answer_404_without_a_backend():
    config = _program(_objects()).config
    blocks = _server_blocks(config)
    # The listener's server and a catch-all default server (other hosts, no SNI): each ends in a 404.
    assert len(blocks) == 2
    for block in blocks:
        assert "location / { return 404; }" in block
    default = next(b for b in blocks if "default_server" in b)
    assert "proxy_pass" not in default
    assert "server_name _;" in default


def test_a_rule_without_backends_answers_500_and_a_prefix_slash_replaces_the_404():
    objects = _objects()
    objects[-2] = g.http_route(
        "fleet", FED, (GW_NS, "edge"), [([("PathPrefix", "/")], ("plain", 8080)), ([("Exact", "/gone")], None)]
    )
    config = _program(objects).config
    listener = next(b for b in _server_blocks(config) if f"server_name {HOST};" in b)
    assert "return 404" not in listener
    assert f"proxy_pass http://{BACKEND_IP}:8080;" in _location(listener, "/")
    assert "return 500;" in _location(listener, "= /gone")


@pytest.mark.parametrize(
    ("path", "locations"),
    [
        ({"type": "PathPrefix", "value": "/v1/fleet/"}, [("= /v1/fleet", False), ("^~ /v1/fleet/", False)]),
        ({"type": "PathPrefix", "value": "/v1/fleet"}, [("= /v1/fleet", False), ("^~ /v1/fleet/", False)]),
        ({"type": "PathPrefix", "value": "/"}, [("/", False)]),
        ({}, [("/", False)]),
        ({"type": "Exact", "value": "/health"}, [("= /health", True)]),
    ],
)
def test_path_matches_as_nginx_locations(path, locations):
    assert _locations(path, "here") == locations


def test_an_exact_match_wins_over_a_prefix_of_the_same_path():
    objects = _objects()
    objects[-2] = g.http_route(
        "fleet",
        FED,
        (GW_NS, "edge"),
        [([("PathPrefix", "/v1/fleet")], ("proxy", 443)), ([("Exact", "/v1/fleet")], ("plain", 8080))],
    )
    config = _program(objects).config
    assert f"proxy_pass http://{BACKEND_IP}:8080;" in _location(config, "= /v1/fleet")
    assert f"proxy_pass https://{PROXY_IP}:8000;" in _location(config, "^~ /v1/fleet/")


# --- what a controller would refuse ----------------------------------------------------------


def _refused(objects: list[dict[str, Any]], gateway: dict[str, Any] | None = None) -> str:
    with pytest.raises(HarnessError) as info:
        _program(objects, gateway)
    return str(info.value)


def test_refused_a_route_naming_the_gateway_in_another_namespace():
    objects = _objects()
    objects[-2]["spec"]["parentRefs"][0]["namespace"] = FED
    assert "HTTPRoute fed/fleet" in _refused(objects)
    # The namespace defaults to the route's: the same mistake.
    del objects[-2]["spec"]["parentRefs"][0]["namespace"]
    assert "its parentRef names Gateway fed/edge, not Gateway gateway-system/edge" in _refused(objects)


def test_refused_a_route_to_a_listener_the_gateway_lacks_or_that_does_not_admit_it():
    objects = _objects()
    objects[-2]["spec"]["parentRefs"][0]["sectionName"] = "grpc"
    assert "HTTPRoute fed/fleet" in _refused(objects)
    objects = _objects()
    gateway = _gateway()
    gateway["spec"]["listeners"][0]["allowedRoutes"] = {"namespaces": {"from": "Same"}}
    assert "HTTPRoute fed/fleet: not accepted by Gateway gateway-system/edge" in _refused(objects, gateway)
    objects[-2]["spec"]["hostnames"] = ["other.example.test"]
    assert "do not intersect" in _refused(objects)


def test_refused_a_listener_certificate_in_another_namespace_without_a_reference_grant():
    for grant in (
        None,
        g.reference_grant("g", FED, "Gateway", "somewhere-else", "Secret", "fleet-tls"),
        g.reference_grant("g", FED, "Gateway", GW_NS, "Secret", "another-secret"),
        g.reference_grant("g", GW_NS, "Gateway", GW_NS, "Secret", "fleet-tls"),  # in the Gateway's namespace
        g.reference_grant("g", FED, "HTTPRoute", GW_NS, "Secret", "fleet-tls"),
    ):
        objects = [o for o in _objects() if o["kind"] != "ReferenceGrant"] + ([grant] if grant else [])
        message = _refused(objects)
        assert "Gateway gateway-system/edge listener fleet" in message
        assert "Secret fed/fleet-tls" in message
        assert "ReferenceGrant" in message
    # A grant without a name covers every Secret of the namespace.
    objects = [o for o in _objects() if o["kind"] != "ReferenceGrant"]
    objects.append(g.reference_grant("g", FED, "Gateway", GW_NS, "Secret"))
    assert _program(objects).routes == ["fed/fleet"]


def test_refused_a_listener_certificate_secret_missing_or_without_a_key():
    objects = [o for o in _objects() if o["kind"] != "Secret"]
    assert "Secret fed/fleet-tls not found" in _refused(objects)
    objects.append(g.tls_secret("fleet-tls", FED, LISTENER_CERT[0], ""))
    assert "Secret fed/fleet-tls has no tls.key" in _refused(objects)


def test_a_listener_certificate_as_secret_data_base64():
    import base64

    objects = [o for o in _objects() if o["kind"] != "Secret"]
    secret = g.tls_secret("fleet-tls", FED, *LISTENER_CERT)
    secret["data"] = {k: base64.b64encode(v.encode()).decode() for k, v in secret.pop("stringData").items()}
    objects.append(secret)
    assert _program(objects).files["listener-fleet-0.key"] == LISTENER_CERT[1]


def test_refused_a_backend_in_another_namespace_without_a_reference_grant():
    objects = _objects()
    objects[-2]["spec"]["rules"][1]["backendRefs"][0]["namespace"] = "shared"
    objects.append(g.service("plain", "shared", {"app": "backend"}, [("http", 8080, 8080)]))
    objects = [
        o for o in objects if not (o["kind"] == "Service" and o["metadata"] == {"name": "plain", "namespace": FED})
    ]
    message = _refused(objects)
    assert "HTTPRoute fed/fleet rule 1" in message and "Service shared/plain" in message and "ReferenceGrant" in message
    objects.append(g.reference_grant("routes", "shared", "HTTPRoute", FED, "Service", "plain"))
    # Granted: it goes on to the backing pods, which are in namespace fed only.
    assert "selects 0 pods" in _refused(objects)


def test_refused_a_backend_tls_policy_whose_ca_is_missing():
    objects = [o for o in _objects() if o["kind"] != "ConfigMap"]
    message = _refused(objects)
    assert "BackendTLSPolicy fed/proxy-tls" in message and "ConfigMap fed/fed-ca not found" in message
    objects.append(g.ca_config_map("fed-ca", FED, CA.pem, key="ca.pem"))
    message = _refused(objects)
    assert "BackendTLSPolicy fed/proxy-tls" in message and "has no ca.crt" in message


def test_refused_what_is_not_emulated():
    objects = _objects()
    objects[-2]["spec"]["rules"][0]["filters"] = [{"type": "RequestHeaderModifier"}]
    assert "HTTPRoute fed/fleet rule 0: filters not emulated" in _refused(objects)
    objects = _objects()
    objects[-2]["spec"]["rules"][0]["matches"][0]["headers"] = [{"name": "x", "value": "y"}]
    assert "headers matches are not emulated" in _refused(objects)
    objects = _objects()
    objects[-2]["spec"]["rules"][0]["matches"][0]["path"]["type"] = "RegularExpression"
    assert "RegularExpression is not emulated" in _refused(objects)
    gateway = _gateway()
    gateway["spec"]["listeners"][0]["tls"]["mode"] = "Passthrough"
    assert "tls.mode Passthrough is not emulated" in _refused(_objects(), gateway)


def test_no_route_attached_is_refused_naming_the_routes_seen():
    objects = [o for o in _objects() if not (o["kind"] == "HTTPRoute" and o["metadata"]["name"] == "fleet")]
    assert "no HTTPRoute attaches to Gateway gateway-system/edge" in _refused(objects)


def test_the_objects_are_not_changed():
    objects = _objects()
    before = copy.deepcopy(objects)
    _program(objects)
    assert objects == before


# --- nginx accepts it -----------------------------------------------------------------------


def test_nginx_accepts_the_configuration(tmp_path):
    """`nginx -t` on what is programmed (it binds the listeners: a free port on 127.0.0.1, so no
    root is needed); without an nginx binary, the generation alone is checked (above)."""
    port = free_port()
    out = _program(_objects(), _gateway(port=port), tmp_path)
    assert f"listen {ADDRESS}:{port} ssl;" in out.config
    nginx = nginx_path()
    if nginx is None:
        return
    for name, text in out.files.items():
        (tmp_path / name).write_text(text)
    (tmp_path / "nginx.conf").write_text(out.config)
    res = subprocess.run(
        [nginx, "-t", "-p", f"{tmp_path}/", "-e", "stderr", "-c", str(tmp_path / "nginx.conf")],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert res.returncode == 0, f"nginx -t refused it:\n{res.stderr}\n{out.config}"
