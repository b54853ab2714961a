"""Other stacks' outputs, read before planning: a site's hub (`supernodes.superlink.
certificate.fromStack`) and a hub's sites (`sites[].fromStack`).

Each named stack is a `pulumi.StackReference`. The plan needs plain values (the address
goes into command lines, the port into NetworkPolicies), so the outputs are awaited
here, once, before anything else is registered: the Pulumi SDK's own synchronous
`invoke` waits the same way. A StackReference is a read; nothing is created if the
outputs then make the config invalid. Offline, `render --stack-outputs` supplies them.
"""

from __future__ import annotations

from typing import Any

import pulumi
from pulumi.runtime.sync_await import _sync_await


def read(stacks: list[str]) -> dict[str, dict[str, Any]]:
    """{stack: {output: value}} of every stack, secrets unwrapped (the plan keeps only
    what is public: addresses, CA certificates, public keys)."""
    found: dict[str, dict[str, Any]] = {}
    for stack in stacks:
        try:
            reference = pulumi.StackReference(stack)
            outputs = _sync_await(reference.outputs.future())
        except Exception as err:  # the engine's error for a missing or unreadable stack
            raise pulumi.RunError(
                f"could not read the outputs of stack '{stack}' (named by fromStack): {err}. A StackReference reads "
                "stacks of the same backend that this stack's credentials may read."
            ) from None
        found[stack] = dict(outputs or {})
    return found
