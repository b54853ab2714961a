"""The component provider: `Federation` for every Pulumi language (TypeScript, Go, C#, Java,
YAML), hosted by plugin/ (PulumiPlugin.yaml, runtime python) and added to a program with
`pulumi package add` (docs/pulumi-package.md).

Written by hand rather than with `pulumi.provider.experimental.component_provider_host`:
that host infers a schema from TypedDict annotations, and the config is a pydantic model
(camelCase aliases, Literal choices, unions, validators across fields) that its inference
cannot express. Here the schema is generated from the model itself (schema.py, committed as
schema.json by `make schema`), and `construct` hands the engine's inputs, which have the
config's own camelCase keys, to the same `Federation` a Python program uses: the same
plan, the same objects, the same URNs as the stack-config program.
"""

from __future__ import annotations

import sys
from typing import Any, Optional

import pulumi
import pulumi.provider as pulumi_provider

from flower_federation import __version__
from flower_federation.provider.schema import SCHEMA_FILE
from flower_federation.shell.federation import (
    CLUSTER_PROVIDERS_ROOT,
    NODE_KEYS_ROOT,
    OUTPUT_ATTRIBUTES,
    TYPE,
    Federation,
)
from flower_federation.shell.inputs import plain_value


class FederationProvider(pulumi_provider.Provider):
    """Serves the package schema and constructs `flower-federation:index:Federation`."""

    def __init__(self, schema: Optional[str] = None) -> None:
        super().__init__(__version__, schema if schema is not None else SCHEMA_FILE.read_text(encoding="utf-8"))

    def construct(
        self,
        name: str,
        resource_type: str,
        inputs: pulumi.Inputs,
        options: Optional[pulumi.ResourceOptions] = None,
    ) -> pulumi_provider.ConstructResult:
        if resource_type != TYPE:
            raise ValueError(f"unknown resource type {resource_type}: this package has one component, {TYPE}")
        config = {key: value for key, value in inputs.items() if key not in (CLUSTER_PROVIDERS_ROOT, NODE_KEYS_ROOT)}
        federation = Federation(
            name,
            config,
            options,
            cluster_providers=_providers(inputs.get(CLUSTER_PROVIDERS_ROOT)),
            node_auth_keys=inputs.get(NODE_KEYS_ROOT),
        )
        state = {output: getattr(federation, attribute) for output, attribute in OUTPUT_ATTRIBUTES.items()}
        return pulumi_provider.ConstructResult(urn=federation.urn, state=state)


def _providers(value: Any) -> dict[str, pulumi.ProviderResource]:
    """`clusterProviders` as the engine hands it: provider references, possibly inside an Output
    (a map that depends on the providers it holds)."""
    resolved = plain_value(value, CLUSTER_PROVIDERS_ROOT)
    if resolved.problems:
        raise pulumi.RunError("\n".join(str(p) for p in resolved.problems))
    found = resolved.value
    out: dict[str, pulumi.ProviderResource] = {}
    for cluster, provider in (found or {}).items():
        if not isinstance(provider, pulumi.ProviderResource):
            kind = type(provider).__name__
            raise pulumi.RunError(f"{CLUSTER_PROVIDERS_ROOT}.{cluster}: must be a Kubernetes provider, not {kind}")
        out[cluster] = provider
    return out


def main() -> None:
    """The plugin's entry point (plugin/__main__.py): a gRPC provider server for the engine."""
    pulumi_provider.main(FederationProvider(), sys.argv[1:])
