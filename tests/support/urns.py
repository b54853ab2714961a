"""What Pulumi knows each resource by: its URN's type chain and name, for a stack's config run under the mocks.

A URN is `urn:pulumi:STACK::PROJECT::T1$T2$...$TYPE::NAME`, T1... the types of the resource's ancestors
(components). Renaming a resource, or moving it under another parent, changes its URN, and `pulumi up`
then deletes the old resource and creates a new one: for a generated CA or node key, new secrets the
other side of the federation no longer trusts. The renders pin the objects; these identities pin their
names in the state. (The mock monitor writes only the immediate parent's type into a URN, so the chain
is rebuilt here from each resource's parent.)
"""

from __future__ import annotations

from typing import Any, Optional

import pulumi

from flower_federation import program
from flower_federation.cli.offline import run_program


def identities(
    config: dict[str, Any], stack: str, stack_outputs: Optional[dict[str, dict[str, Any]]] = None
) -> list[str]:
    """`T1$...$TYPE::NAME` of every resource the program registers for `config`, sorted (Pulumi does not
    care in which order a program registers them)."""
    seen: list[tuple[pulumi.Resource, str, str, Optional[pulumi.Resource]]] = []

    def entry() -> None:
        def record(args: pulumi.ResourceTransformationArgs) -> None:
            parent = args.opts.parent if args.opts is not None else None
            seen.append((args.resource, args.type_, args.name, parent))
            return None

        pulumi.runtime.register_stack_transformation(record)
        program.run()

    run_program(config, stack, entry=entry, stack_outputs=stack_outputs)
    by_resource = {id(resource): (typ, parent) for resource, typ, _, parent in seen}

    def chain(typ: str, parent: Optional[pulumi.Resource]) -> str:
        types = [typ]
        while parent is not None and id(parent) in by_resource:  # the Stack itself is not in a URN
            typ, parent = by_resource[id(parent)]
            types.append(typ)
        return "$".join(reversed(types))

    return sorted(f"{chain(typ, parent)}::{name}" for _, typ, name, parent in seen)
