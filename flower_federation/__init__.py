"""flower-federation: a Flower federation on Kubernetes from Pulumi stack config.

The package reads top-down; each layer imports only the layers listed before it
(tests/test_layers.py keeps it so). "The core" is kube/ to builders/: config in, plain
Kubernetes objects out, no Pulumi; the shell and the program register what it made.

- `kube/`      Kubernetes vocabulary: object types, names and labels, quantities, Pod Security,
               the OpenAPI schema checks, YAML read as Go reads it, deterministic YAML out.
- `flower/`    Flower itself: versions and their dialects (flags, ports, routes), where things
               live in our pods, node config, public keys, the SuperLink's state start-up, and
               the registration script that runs in the SuperLink's image.
- `config/`    the stack config model (pydantic): every setting and its default, stated once;
               config problems by config path; the generated reference.
- `rules/`     checks that span fields, over the raw config, all reported at once.
- `plan/`      config -> one resolved plan (version, dialect, names, trust, sites, probes),
               and the stack outputs derived from it.
- `builders/`  plan -> plain Kubernetes objects: one builder per component, the network links
               and the NetworkPolicies made of them, the whole render (`manifests.py`).
- `checks/`    the federation's promises (TLS, node auth, NetworkPolicies, Pod Security, ...)
               checked on any Kubernetes objects: `check`, and the policy pack (policy/).
- `review/`    what a config change does, offline: the objects added, removed, changed and
               replaced between two renders, and the federation's topology (Mermaid).
- `shell/`     Pulumi ComponentResources that register the built objects (Outputs, secrets,
               providers, StackReferences).
- `program.py` the Pulumi program: stack config in, components registered, outputs exported.
- `provider/`  the Pulumi component provider (plugin/PulumiPlugin.yaml at the repository root
               hosts it) and its package schema, generated from the config model.
- `importers/` Flower's SuperNode Helm chart values and flower-operator CRs -> stack config.
- `cli/`       `python -m flower_federation`: validate, render offline (the program under
               Pulumi's mocks), check, diff, schema, docs, import.

The public API, for a Pulumi program of your own (docs/pulumi-package.md):

    from flower_federation import Federation, FederationArgs
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"
__all__ = ["Federation", "FederationArgs", "__version__"]

if TYPE_CHECKING:
    from flower_federation.config import Federation as FederationArgs
    from flower_federation.shell.federation import Federation


def __getattr__(name: str) -> Any:
    """The public names, imported when first used: `python -m flower_federation` and the core
    load no Pulumi SDK until they need it (the CLI reports a missing one in plain words)."""
    if name == "Federation":
        from flower_federation.shell.federation import Federation

        return Federation
    if name == "FederationArgs":
        from flower_federation.config import Federation as FederationArgs

        return FederationArgs
    raise AttributeError(f"module 'flower_federation' has no attribute {name!r}")
