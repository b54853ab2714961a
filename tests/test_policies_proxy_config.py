"""`flower-control-api-internal` reads the Fleet-only proxy's nginx.conf from the ConfigMap its
container mounts, parsed by crossplane (checks/proxy_config.py states the rule): the rendered
config passes; each way of making it forward a non-Fleet path is caught (negative controls,
issue 32 part 2), by `check` and by the policy pack alike, since both run the same function."""

from __future__ import annotations

from typing import Any

import pytest

from flower_federation.checks import proxy_config
from flower_federation.checks.model import MANDATORY
from flower_federation.checks.policies import run
from tests.support.policy_objects import container, find, found, golden
from tests.test_policies_pack import everything

POLICY = "flower-control-api-internal"
INGRESS = ("Ingress flower-hub/fl-superlink", "spec.rules[0].http.paths[0].backend")
GUARD = (
    '            if ($request_uri !~ "^/v1/fleet(/[A-Za-z0-9_-]+)+$") {\n                return 404;\n            }\n'
)


def _conf(objects: list[dict[str, Any]]) -> dict[str, Any]:
    data: dict[str, Any] = find(objects, "ConfigMap", "fl-superlink-fleet-proxy")["data"]
    return data


def _edit(old: str, new: str) -> list[dict[str, Any]]:
    objects = golden("hub")
    text = _conf(objects)["nginx.conf"]
    assert old in text, old
    _conf(objects)["nginx.conf"] = text.replace(old, new, 1)
    return objects


def _messages(objects: list[dict[str, Any]]) -> list[str]:
    return [v.message for v in run(objects) if v.policy == POLICY]


def test_the_rendered_proxy_config_passes() -> None:
    objects = golden("hub")
    assert proxy_config.problems(_conf(objects)["nginx.conf"]) == []
    assert found(objects) == set()


# The injection of issue 32 (`clusterDomain`) lands in `proxy_ssl_name`: a Control-forwarding location.
INJECTED = (
    "proxy_ssl_name fl-superlink.flower-hub.svc.cluster.local; location /v1/ { proxy_pass https://127.0.0.1:9095; } #"
)

CASES = {
    "injected location": (
        "proxy_ssl_name fl-superlink.flower-hub.svc.cluster.local;",
        INJECTED,
        "forwards from outside `location /v1/fleet/`",
    ),
    "proxy_pass in location /": (
        "    location / {\n            return 404;",
        "    location / {\n            proxy_pass https://127.0.0.1:9095;",
        "`proxy_pass https://127.0.0.1:9095` (line",
    ),
    "second server": (
        "    server {\n",
        "    server {\n        listen 8443;\n        location / { proxy_pass https://127.0.0.1:9095; }\n    }\n"
        "    server {\n",
        "2 `server` blocks",
    ),
    "missing $request_uri guard": (GUARD, "", "does not start with its guard"),
    "guard on the normalised $uri": (
        '($request_uri !~ "^/v1/fleet',
        '($uri !~ "^/v1/fleet',
        "does not start with its guard",
    ),
    "a URI part in proxy_pass": (
        "proxy_pass https://superlink;\n        }\n        location = /health",
        "proxy_pass https://superlink/v1/control/;\n        }\n        location = /health",
        "forwards to a URI part or a variable",
    ),
    "include": (
        "    server_tokens off;",
        "    server_tokens off;\n    include /etc/nginx/conf.d/*.conf;",
        "included file",
    ),
    "rewrite before the guard": (
        "    location /v1/fleet/ {\n",
        "    location /v1/fleet/ {\n        rewrite ^ /x break;\n",
        "guard",
    ),
    "regex location": (
        "    location / {",
        "    location ~ ^/v1/(control|runtime)/ {\n            grpc_pass grpcs://127.0.0.1:9095;\n        }\n"
        "        location / {",
        "`grpc_pass grpcs://127.0.0.1:9095`",
    ),
    "an upstream server off the pod": (
        "        server 127.0.0.1:9095;",
        "        server 10.0.0.7:9095;",
        "whose servers ['10.0.0.7:9095'] are not loopback",
    ),
    "a second upstream server off the pod": (
        "        server 127.0.0.1:9095;",
        "        server 127.0.0.1:9095;\n        server fleet.example.org:443 backup;",
        "whose servers ['fleet.example.org:443'] are not loopback",
    ),
    "proxy_pass to another host": (
        "proxy_pass https://superlink;\n        }\n        location = /health",
        "proxy_pass https://fleet.example.org;\n        }\n        location = /health",
        "forwards to `fleet.example.org`, not to the SuperLink over loopback",
    ),
    "proxy_pass to a host named like loopback": (
        "proxy_pass https://superlink;\n        }\n        location = /health",
        "proxy_pass https://127.0.0.1.example.org;\n        }\n        location = /health",
        "forwards to `127.0.0.1.example.org`",
    ),
    "an unknown directive": (
        "    server_tokens off;",
        "    server_tokens off;\n    content_by_lua 'x';",
        "does not parse",
    ),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_config_that_may_forward_a_non_fleet_path_fails(case: str) -> None:
    old, new, expected = CASES[case]
    objects = _edit(old, new)
    messages = _messages(objects)
    assert messages and any(expected in m for m in messages), messages
    assert {(level, policy, ref, path) for level, policy, ref, path in found(objects)} == {
        (MANDATORY, POLICY, *INGRESS)
    }
    assert all("ConfigMap flower-hub/fl-superlink-fleet-proxy key nginx.conf" in m for m in messages), messages


def test_a_config_the_objects_do_not_hold_fails() -> None:
    objects = [
        o for o in golden("hub") if o["kind"] != "ConfigMap" or o["metadata"]["name"] != "fl-superlink-fleet-proxy"
    ]
    (message,) = _messages(objects)
    assert "fl-superlink-fleet-proxy key nginx.conf (mounted at /etc/fleet-proxy) is not among the objects" in message
    # The proxy runs another file than the ConfigMap's: that file is not among the objects either.
    objects = golden("hub")
    proxy = container(find(objects, "StatefulSet", "fl-superlink"), "fleet-proxy")
    proxy["command"] = ["nginx", "-e", "stderr"]
    (message,) = _messages(objects)
    assert "/etc/nginx/nginx.conf comes from no ConfigMap volume" in message


def test_the_policy_pack_runs_the_same_check() -> None:
    assert everything(golden("hub")) == set()
    objects = _edit(*CASES["injected location"][:2])
    assert everything(objects) == {(POLICY, "mandatory", "fl-superlink")}


@pytest.mark.parametrize("target", ["https://127.0.0.1:9095", "https://[::1]:9095", "https://localhost:9095"])
def test_forwarding_to_loopback_directly_passes(target: str) -> None:
    """The loopback rule refuses only what leaves the pod: the SuperLink's loopback address, named directly instead
    of through the upstream group, still passes."""
    objects = _edit(
        "proxy_pass https://superlink;\n        }\n        location = /health",
        f"proxy_pass {target};\n        }}\n        location = /health",
    )
    assert proxy_config.problems(_conf(objects)["nginx.conf"]) == []
