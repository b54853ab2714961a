"""The hub of e2e scenario 6g as rendered (tests/e2e/site_stacks.py, real certificates from
the program's pulumi-tls state), programmed by the harness's Gateway controller without
root: the platform's Gateway presents the hub's listener certificate (Secret N-gateway-tls,
the one Secret the hub's ReferenceGrant names), which carries the public hostname only;
presenting the SuperLink's own Secret, as scenario 6g did before issue 32 part 6, is refused
as a real controller would (no ReferenceGrant for it)."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from cryptography import x509

from tests.e2e import gateway_objects as g
from tests.e2e.harness.gateway import program
from tests.e2e.harness.host import HarnessError
from tests.e2e.site_stacks import (
    EXTERNAL_HOST,
    GATEWAY_NAME,
    GATEWAY_NAMESPACE,
    HUB,
    HUB_NAME,
    HUB_NAMESPACE,
    Rendered,
    hub_config,
    render_stack,
)
from tests.support.flower import HTTP_ERA
from tests.support.manifests import get
from tests.support.program import load_cert
from tests.support.tls_provider import PulumiState


@pytest.fixture(scope="module")
def hub() -> Rendered:
    return render_stack(HUB, hub_config(HTTP_ERA, (), "gateway"), PulumiState())


def _program(hub: Rendered, listener_secret: str) -> Any:
    service = get(hub.manifests, "Service", f"{HUB_NAME}-superlink")
    pod = SimpleNamespace(
        name=f"{HUB_NAME}-superlink-0",
        namespace=HUB_NAMESPACE,
        ip="10.0.0.5",
        labels=dict(service["spec"]["selector"]),
        spec={"containers": [{"name": "fleet-proxy", "ports": [{"name": "fleet", "containerPort": 8000}]}]},
    )
    gateway = g.gateway(GATEWAY_NAME, GATEWAY_NAMESPACE, EXTERNAL_HOST, listener_secret, HUB_NAMESPACE)
    objects = [m for m in hub.manifests if m.get("metadata", {}).get("namespace") == HUB_NAMESPACE]
    return program(gateway, objects, [pod], "127.0.0.1", Path("/nowhere"))  # type: ignore[list-item]


def test_the_gateway_presents_the_hubs_listener_certificate(hub: Rendered) -> None:
    out = _program(hub, f"{HUB_NAME}-gateway-tls")
    assert out.routes == [f"{HUB_NAMESPACE}/{HUB_NAME}-superlink"]
    secret = get(hub.manifests, "Secret", f"{HUB_NAME}-gateway-tls")
    (served,) = [text for text in out.files.values() if text == secret["stringData"]["tls.crt"]]
    san = load_cert(served).extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert san.get_values_for_type(x509.DNSName) == [EXTERNAL_HOST]


def test_the_superlinks_own_secret_is_no_longer_granted_to_the_gateway(hub: Rendered) -> None:
    with pytest.raises(HarnessError) as refused:
        _program(hub, f"{HUB_NAME}-superlink-tls")
    assert f"Secret {HUB_NAMESPACE}/{HUB_NAME}-superlink-tls" in str(refused.value)
    assert "ReferenceGrant" in str(refused.value)
