"""The Pulumi program: stack config in, federation out. `__main__.py` and the offline
renderer both run exactly this; it is one consumer of the public `Federation` component
(shell/federation.py), reading its args from stack config."""

from __future__ import annotations

import json
from typing import Any, NoReturn

import pulumi
from pulumi.runtime import config as runtime_config

from flower_federation.builders import node_auth, registration
from flower_federation.config.derived import federation_name
from flower_federation.config.errors import ConfigError, Problem, problem
from flower_federation.flower import public_keys
from flower_federation.plan import load_plan
from flower_federation.plan.outputs import connection_name, stack_outputs
from flower_federation.shell.federation import CLUSTER_PROVIDER_PREFIX, Federation, kubeconfig_provider

PROJECT = "flower-federation"
CONFIG_KEY = "federation"
NODE_KEYS_KEY = public_keys.CONFIG_KEY
__all__ = ["CLUSTER_PROVIDER_PREFIX", "CONFIG_KEY", "NODE_KEYS_KEY", "PROJECT", "run"]


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


def _refuse(raw: Any, keys: Any, problems: list[Problem]) -> NoReturn:
    """Every problem at once, before anything is registered: the secret config's with the config's own (what the
    component's plan would have said), so one `pulumi up` names them all."""
    try:
        load_plan(raw, pulumi.get_stack(), keys)
    except ConfigError as err:
        problems = problems + err.problems
    raise pulumi.RunError(str(ConfigError(problems)))


class _StackFederation(Federation):
    """The stack's Federation: each named cluster's Kubernetes provider is `cluster-<name>` at the stack's root
    (the URN existing stacks hold), not the component's child `<federation>-cluster-<name>` a user's program gets.

    The component makes them from its own plan, once that has passed: the stack is planned once a render (a hub's
    thousands of keys validated once) and nothing is registered for a config the plan refuses. The program used to
    plan first to make them and pass them in. A cheaper read of `clusters` before the component would register
    providers for a config the plan then refuses; handing the program's plan to the component would need it to be
    the component's own (planned under the stack's name, not the federation's, before `fromStack` outputs are
    read), a second path to keep equal to the first."""

    def _kubeconfig_provider(self, name: str, cluster: str) -> pulumi.ProviderResource:
        return kubeconfig_provider(self.plan, cluster, f"{CLUSTER_PROVIDER_PREFIX}{cluster}")


def _federation_config() -> Any:
    """The config's federation value, checked by the plan (None included). A value that is not JSON (a plain string
    in the stack file) stays that string, so the plan says `federation: must be a mapping, not str`, as `validate`
    does, where `get_object` would raise Pulumi's own ConfigTypeError."""
    text = pulumi.Config(PROJECT).get(CONFIG_KEY)
    if text is None:
        return None
    try:
        return json.loads(text)
    except ValueError:
        return text


def run() -> Federation:
    """Stack config in, one Federation registered (it reads `fromStack` stacks and renders before registering
    anything), stack outputs exported. Each named cluster's provider is `cluster-<name>`, at the stack's root.

    The program plans the config itself only to say the problems of its secret config with the config's own (all
    at once); otherwise the Federation's own plan is the only one (a hub's thousands of keys are validated once a
    render), named clusters included."""
    raw = _federation_config()
    keys, problems = _node_auth_keys()
    problems += _kubeconfig_problems(raw)
    if problems:
        _refuse(raw, keys, problems)
    # What load_plan names it (`name`, else the stack's): the component's plan reports a bad one.
    name = federation_name(raw.get("name") if isinstance(raw, dict) else None, pulumi.get_stack())
    component = _StackFederation(name, raw, node_auth_keys=keys)
    plan = component.plan
    for key, value in stack_outputs(plan).items():
        pulumi.export(key, value)
    if component.tls is not None and component.tls.ca_pem is not None and plan.runs_superlink:
        # Public: what sites and `flwr` users outside the cluster trust (root-certificates).
        pulumi.export("caCertificate", component.tls.ca_pem)
    if plan.node_auth:
        public = component.public_keys()
        exported: dict[str, Any] = {"publicKeys": public}
        if plan.runs_superlink:
            exported["registerScript"] = public.apply(
                lambda keys: node_auth.register_script(connection_name(plan), registration.trusted_slots(plan, keys))
            )
        if component.registration is not None:
            exported["registrationJob"] = component.registration.job_name
        pulumi.export("nodeAuth", exported)
    return component
