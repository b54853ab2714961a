"""Stack outputs: SuperLink addresses, pools, and the `flwr` CLI connection config."""

from __future__ import annotations

from typing import Any

import tomli_w

from .dialects import FLWR_CONFIG_TOML_SINCE
from .layout import CA_FILE
from .plan import FederationPlan

TLS_DISABLED_WARNING = (
    "TLS IS DISABLED (insecure: true): Fleet and Control traffic, including model updates, "
    "travels in plaintext and SuperNodes cannot verify the SuperLink."
)


def connection_name(plan: FederationPlan) -> str:
    return plan.spec.cli.connection_name or plan.name


def flwr_connection(plan: FederationPlan) -> dict[str, Any]:
    conn: dict[str, Any] = {"address": plan.spec.cli.address or plan.control_address}
    if plan.trust is None:
        conn["insecure"] = True
    else:
        # Flower 1.26+ wants an absolute path. The default is where our pods mount the
        # CA, which fits the default in-cluster address (flwr run from a pod).
        conn["root-certificates"] = plan.spec.cli.root_certificates or CA_FILE
    return conn


def flwr_config(plan: FederationPlan) -> dict[str, Any]:
    """What to put in the CLI's config for this federation, in the form the federation's
    Flower version reads."""
    name = connection_name(plan)
    conn = flwr_connection(plan)
    if plan.version >= FLWR_CONFIG_TOML_SINCE:
        return {"superlink": {"default": name, name: conn}}
    return {"tool": {"flwr": {"federations": {"default": name, name: conn}}}}


def flwr_config_file(plan: FederationPlan) -> str:
    return "~/.flwr/config.toml" if plan.version >= FLWR_CONFIG_TOML_SINCE else "pyproject.toml"


def stack_outputs(plan: FederationPlan) -> dict[str, Any]:
    spec = plan.spec
    pools = {
        p.name: {"kind": spec.mode, "replicas": p.replicas if spec.mode == "StatefulSet" else "one per eligible node"}
        for p in spec.supernodes.pools
    }
    return {
        "namespace": plan.namespace,
        "flowerVersion": str(plan.version),
        "superlink": {
            "fleetAddress": plan.fleet_address,
            "controlAddress": plan.control_address,
            "serviceType": spec.superlink.service.type,
        },
        "pools": pools,
        "tls": "enabled" if plan.trust else TLS_DISABLED_WARNING,
        "flwrConfigFile": flwr_config_file(plan),
        "flwrConfig": tomli_w.dumps(flwr_config(plan)),
    }
