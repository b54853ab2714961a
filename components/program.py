"""The Pulumi program: config in, federation out. `__main__.py` and the offline
renderer both run exactly this."""

from __future__ import annotations

import pulumi

from federation.errors import ConfigError
from federation.outputs import stack_outputs
from federation.plan import FederationPlan, load_plan

from .federation import FederationComponent

PROJECT = "flower-federation"
CONFIG_KEY = "federation"


def load() -> FederationPlan:
    """Validated plan from stack config; a config error stops the program with the full
    list of problems and no traceback, before any resource is registered."""
    raw = pulumi.Config(PROJECT).get_object(CONFIG_KEY)
    try:
        return load_plan(raw, pulumi.get_stack())
    except ConfigError as err:
        raise pulumi.RunError(str(err)) from None


def run() -> FederationComponent:
    plan = load()
    federation = FederationComponent(plan.name, plan)
    for key, value in stack_outputs(plan).items():
        pulumi.export(key, value)
    return federation
