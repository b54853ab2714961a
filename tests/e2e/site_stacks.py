"""The stacks of the sites scenario (sites.py), as a team would write them, and how each
is rendered: by itself, reading other stacks' outputs only through `stack_outputs`.

- `hub` (role hub): the SuperLink only, TLS generated, node authentication, a
  LoadBalancer Service and `superlink.externalAddress: fl.example.test` (so that name is
  in the server certificate); later `sites: [{name, fromStack}]` for the sites it admits.
- `hospital-a`, `hospital-b` (role site): one SuperNode each, dialling the hub named by
  `supernodes.superlink.certificate.fromStack` (address, port and CA from the hub stack's
  outputs); `partition-id` 0 and 1 of 2.
- `intruder` (role site, negative control): the same, but the hub does not list it.
- `misconfigured` (role site, negative control): the hub's address and port, but a CA
  that is not the hub's in `certificate.pem`.

Each render is the project's own (flower_federation.cli.offline.run_program, real key material);
`stack_outputs` is exactly what `render --stack-outputs org/proj/stack=FILE.json` and a
pulumi.StackReference supply. Pulumi keeps a stack's generated keys and certificates
across its `up`s (its state): `PulumiState` (tests/support/tls_provider.py) does the same
for one stack's renders.
"""

from __future__ import annotations

import copy
from typing import Any, Optional

from cryptography.hazmat.primitives import serialization

from flower_federation.cli.offline import run_program
from tests.e2e.cli_user import CLI_LABELS
from tests.e2e.rendering import _RENDER_LOCK, Rendered
from tests.support.tls_provider import PulumiState, self_signed

ORG = "acme/flower-federation"
HUB = "hub"
ADMITTED = ("hospital-a", "hospital-b")
INTRUDER = "intruder"
MISCONFIGURED = "misconfigured"
EXTERNAL_HOST = "fl.example.test"  # the hub's public name (public DNS, the certificate)
HUB_NAME = "fl"
HUB_NAMESPACE = "flower-hub"
SITE_NAMESPACE = "flower"
POOL = "ward"


def stack_name(name: str) -> str:
    return f"{ORG}/{name}"


def pem_body(openssh_key: str) -> str:
    """The first base64 line of a public key's PEM (SubjectPublicKeyInfo), as Flower logs keys."""
    key = serialization.load_ssh_public_key(openssh_key.encode())
    pem = key.public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo).decode()
    return pem.splitlines()[1]


# --- the stacks' configs ------------------------------------------------------------------


# The platform's Gateway in the hub's cluster (exposure "gateway"): its listener `fleet`
# presents the hub's listener certificate (Secret N-gateway-tls: the public name only, from
# the federation's CA), the one Secret the hub's ReferenceGrant allows.
GATEWAY_NAME = "public"
GATEWAY_NAMESPACE = "gateway-system"
GATEWAY_LISTENER = "fleet"


def hub_config(
    version: str,
    sites: tuple[str, ...] = (),
    exposure: str = "loadBalancer",
    monitoring: Optional[dict[str, Any]] = None,
) -> dict[str, Any]:
    raw: dict[str, Any] = {
        "role": "hub",
        "name": HUB_NAME,
        "namespace": HUB_NAMESPACE,
        "version": version,
        "nodeAuth": {"enabled": True},
        # HTTP era: the Fleet-only proxy is on by default (no exposeControlApi): the
        # public address serves the Fleet API only (fleet_only.py checks it).
        "superlink": {
            "networkPolicy": {"ingressPodMatchLabels": dict(CLI_LABELS)},  # the hub's flwr user
            "service": {"type": "LoadBalancer"},
            "externalAddress": EXTERNAL_HOST,
        },
    }
    if exposure == "gateway":  # a ClusterIP Service; sites dial the gateway's name on 443
        raw["superlink"] = {
            "networkPolicy": raw["superlink"]["networkPolicy"],
            "gateway": {
                "parentRefs": [{"name": GATEWAY_NAME, "namespace": GATEWAY_NAMESPACE, "sectionName": GATEWAY_LISTENER}],
                "hostname": EXTERNAL_HOST,
            },
        }
    if sites:
        raw["sites"] = [{"name": s, "fromStack": stack_name(s)} for s in sites]
    if monitoring:  # the exporter, its ServiceMonitor and PrometheusRule (site_monitoring.py)
        raw["monitoring"] = copy.deepcopy(monitoring)
    return raw


def site_config(
    version: str,
    name: str,
    partition: tuple[int, int],
    superlink: Optional[dict[str, Any]] = None,
    distributed: bool = False,
) -> dict[str, Any]:
    """A site with one SuperNode; `superlink` defaults to everything from the hub stack. `distributed`: its
    ClientApps run in a SuperExec pod of their own (process isolation), which dials the SuperNode's Runtime API
    across the site's pod network (HTTP era: over TLS, verified with the site's own CA)."""
    raw: dict[str, Any] = {
        "role": "site",
        "name": name,
        "namespace": SITE_NAMESPACE,
        "version": version,
        "nodeAuth": {"enabled": True},
        "supernodes": {
            "superlink": superlink or {"certificate": {"fromStack": stack_name(HUB)}},
            "pools": [
                {
                    "name": POOL,
                    "replicas": 1,
                    "nodeConfig": {"partition-id": partition[1], "num-partitions": partition[0]},
                }
            ],
        },
    }
    if distributed:
        raw["isolationMode"] = "process"
        raw["superexecPlacement"] = "distributed"
        raw["supernodes"]["pools"][0]["images"] = {"superexecClientApp": f"flwr/superexec:{version}"}
    return raw


def other_ca() -> str:
    """A CA certificate that is not the hub's (what a site pasted from the wrong place)."""
    return self_signed("someone else's CA", is_ca=True)[0]


# --- rendering ------------------------------------------------------------------------------


def render_stack(
    name: str, raw: dict[str, Any], state: PulumiState, stack_outputs: Optional[dict[str, dict[str, Any]]] = None
) -> Rendered:
    """One stack's render, reading other stacks' outputs only from `stack_outputs`
    ({org/project/stack: outputs as `pulumi stack output --json --show-secrets`})."""
    with _RENDER_LOCK:  # the Pulumi SDK's lazy imports are not thread-safe (lanes render at once)
        run = run_program(
            {"federation": copy.deepcopy(raw)}, name, provider=state, stack_outputs=copy.deepcopy(stack_outputs or {})
        )
        return Rendered(raw, run.manifests(show_secrets=True), run.stack_outputs_json(show_secrets=True))


def workload(rendered: Rendered, kind: str, name: str) -> dict[str, Any]:
    return next(m for m in rendered.manifests if m["kind"] == kind and m["metadata"]["name"] == name)


def secret_text(rendered: Rendered, name: str, key: str) -> str:
    m = workload(rendered, "Secret", name)
    return m.get("stringData", {}).get(key) or ""
