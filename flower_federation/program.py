"""The Pulumi program: config in, federation out. `__main__.py` and the offline
renderer both run exactly this."""

from __future__ import annotations

import json
from typing import Any

import pulumi
import pulumi_kubernetes as k8s
from pulumi.runtime import config as runtime_config

from flower_federation.builders import manifests, node_auth, registration
from flower_federation.config.errors import ConfigError, Problem, problem
from flower_federation.flower import public_keys
from flower_federation.plan import FederationPlan, load_plan
from flower_federation.plan.outputs import connection_name, stack_outputs, warnings
from flower_federation.plan.sites import referenced_stacks
from flower_federation.shell import stack_refs
from flower_federation.shell.federation import FederationComponent

PROJECT = "flower-federation"
CONFIG_KEY = "federation"
NODE_KEYS_KEY = public_keys.CONFIG_KEY
# The Kubernetes provider of a named cluster is `cluster-<name>` (offline.py reads it back).
CLUSTER_PROVIDER_PREFIX = "cluster-"


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


def _kubeconfig_problems(raw: Any) -> list[Problem]:
    """A kubeconfig is a credential: it must come from secret config."""
    if not isinstance(raw, dict) or not isinstance(raw.get("clusters"), dict):
        return []
    if runtime_config.is_config_secret(f"{PROJECT}:{CONFIG_KEY}"):
        return []
    return [
        problem(
            ("clusters", name, "kubeconfig"),
            "holds credentials: set it with `pulumi config set --secret --path "
            f"'federation.clusters.{name}.kubeconfig' \"$(cat kubeconfig)\"`",
        )
        for name, cluster in raw["clusters"].items()
        if isinstance(cluster, dict) and cluster.get("kubeconfig")
    ]


def load() -> FederationPlan:
    """Validated plan from stack config; a config error stops the program with the full
    list of problems and no traceback, before any resource is registered. Stacks named
    by `fromStack` are read only once the config is otherwise valid."""
    raw = pulumi.Config(PROJECT).get_object(CONFIG_KEY)
    keys, secret_problems = _node_auth_keys()
    secret_problems += _kubeconfig_problems(raw)
    try:
        try:
            plan = load_plan(raw, pulumi.get_stack(), keys)
        except ConfigError as err:  # every problem at once, the secret config's too
            raise ConfigError(secret_problems + err.problems) from None
        if secret_problems:
            raise ConfigError(secret_problems)
        stacks = referenced_stacks(raw)
        if stacks:
            plan = load_plan(raw, pulumi.get_stack(), keys, stack_refs.read(stacks))
        return plan
    except ConfigError as err:
        raise pulumi.RunError(str(err)) from None


def render(plan: FederationPlan) -> manifests.Manifests:
    """Every object, rendered once and checked, before anything is registered."""
    try:
        return manifests.render(plan)
    except manifests.InvariantError as err:
        raise pulumi.RunError(str(err)) from None


def providers(plan: FederationPlan) -> dict[str, pulumi.ProviderResource]:
    """One explicit Kubernetes provider per named cluster the stack deploys into; the
    kubeconfig is a secret input (pulumi-kubernetes keeps it secret in state)."""
    out: dict[str, pulumi.ProviderResource] = {}
    for name in plan.clusters:
        if not name:
            continue
        cluster = plan.spec.clusters[name]
        kubeconfig = pulumi.Output.secret(cluster.kubeconfig) if cluster.kubeconfig else None
        out[name] = k8s.Provider(f"{CLUSTER_PROVIDER_PREFIX}{name}", kubeconfig=kubeconfig, context=cluster.context)
    return out


def run() -> FederationComponent:
    plan = load()
    rendered = render(plan)
    for warning in warnings(plan):
        pulumi.log.warn(warning)
    federation = FederationComponent(plan.name, plan, rendered, providers(plan))
    for key, value in stack_outputs(plan).items():
        pulumi.export(key, value)
    if federation.tls is not None and federation.tls.ca_pem is not None and plan.runs_superlink:
        # Public: what sites and `flwr` users outside the cluster trust (root-certificates).
        pulumi.export("caCertificate", federation.tls.ca_pem)
    if plan.node_auth:
        public = federation.public_keys()
        exported: dict[str, Any] = {"publicKeys": public}
        if plan.runs_superlink:
            exported["registerScript"] = public.apply(
                lambda keys: node_auth.register_script(connection_name(plan), registration.trusted_slots(plan, keys))
            )
        if federation.registration is not None:
            exported["registrationJob"] = federation.registration.job_name
        pulumi.export("nodeAuth", exported)
    return federation
