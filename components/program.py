"""The Pulumi program: config in, federation out. `__main__.py` and the offline
renderer both run exactly this."""

from __future__ import annotations

import json
from typing import Any

import pulumi
from pulumi.runtime import config as runtime_config

from federation import manifests, nodeauth, sshkeys
from federation.errors import ConfigError, Problem
from federation.outputs import connection_name, stack_outputs
from federation.plan import FederationPlan, load_plan

from .federation import FederationComponent

PROJECT = "flower-federation"
CONFIG_KEY = "federation"
NODE_KEYS_KEY = sshkeys.CONFIG_KEY


def _node_auth_keys() -> tuple[Any, list[Problem]]:
    """The `nodeAuthKeys` secret config value, read once for validation. It must be a
    secret (`pulumi config set --secret`), so keys never sit in plain text in a stack file."""
    full_key = f"{PROJECT}:{NODE_KEYS_KEY}"
    text = runtime_config.get_config(full_key)
    if text is None:
        return None, []
    problems = []
    if not runtime_config.is_config_secret(full_key):
        problems.append(
            Problem(NODE_KEYS_KEY, "holds private keys: set it with `pulumi config set --secret --path ...`")
        )
    try:
        return json.loads(text), problems
    except (TypeError, ValueError):
        return text, problems + [Problem(NODE_KEYS_KEY, "must be a mapping {pool: {slot: private key}}")]


def load() -> FederationPlan:
    """Validated plan from stack config; a config error stops the program with the full
    list of problems and no traceback, before any resource is registered."""
    raw = pulumi.Config(PROJECT).get_object(CONFIG_KEY)
    keys, key_problems = _node_auth_keys()
    try:
        if key_problems:
            raise ConfigError(key_problems)
        return load_plan(raw, pulumi.get_stack(), keys)
    except ConfigError as err:
        raise pulumi.RunError(str(err)) from None


def render(plan: FederationPlan) -> manifests.Manifests:
    """Every object, rendered once and checked, before anything is registered."""
    try:
        return manifests.render(plan)
    except manifests.InvariantError as err:
        raise pulumi.RunError(str(err)) from None


def run() -> FederationComponent:
    plan = load()
    rendered = render(plan)
    federation = FederationComponent(plan.name, plan, rendered.clusters[0])
    for key, value in stack_outputs(plan).items():
        pulumi.export(key, value)
    if federation.tls is not None and federation.tls.ca_certificate is not None:
        # Public: what a `flwr` user outside the cluster trusts (root-certificates).
        pulumi.export("caCertificate", federation.tls.ca_certificate)
    if plan.spec.node_auth.enabled:
        public = pulumi.Output.all(**{name: pool.public_keys for name, pool in federation.pools.items()})
        pulumi.export(
            "nodeAuth",
            {
                "publicKeys": public,
                "registerScript": public.apply(lambda keys: nodeauth.register_script(connection_name(plan), keys)),
            },
        )
    return federation
