"""What Pulumi knows each resource by: its URN's type chain and name, for a stack's config run under the mocks.

A URN is `urn:pulumi:STACK::PROJECT::T1$T2$...$TYPE::NAME`, T1... the types of the resource's ancestors
(components). Renaming a resource, or moving it under another parent, changes its URN, and `pulumi up`
then deletes the old resource and creates a new one: for a generated CA or node key, new secrets the
other side of the federation no longer trusts. The renders pin the objects; these identities pin their
names in the state. The chain is rebuilt by the CLI's own code path (`cli/offline.run_with_urns`, which
`diff` compares), so the goldens pin what `diff` reports.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Optional

from flower_federation.cli.offline import run_with_urns


def identities(
    config: dict[str, Any],
    stack: str,
    stack_outputs: Optional[dict[str, dict[str, Any]]] = None,
    entry: Optional[Callable[[], Any]] = None,
) -> list[str]:
    """`T1$...$TYPE::NAME` of every resource the program (or `entry`, another program) registers for `config`,
    sorted (Pulumi does not care in which order a program registers them)."""
    more = {"program_entry": entry} if entry is not None else {}
    _, urns = run_with_urns(config, stack, stack_outputs=stack_outputs, **more)
    return sorted(urn for _, _, urn in urns)
