"""The real Pulumi program (`flower_federation.program.run`) under the Pulumi mock runtime, for
the security tests: runs of the security stacks, what they registered (Secrets and their
files, manifests, workloads), what pods mount from Secrets, checksum annotations, and an
entry point that records every resource's parent and dependencies."""

from __future__ import annotations

import base64
import re
from collections.abc import Callable
from typing import Any, Optional

import pulumi
import pytest
from cryptography import x509

from flower_federation import program
from flower_federation.builders import trust
from flower_federation.cli.offline import SECRET_TYPE, Registration, Run, reveal, run_program
from flower_federation.plan import FederationPlan
from tests.support.manifests import workloads
from tests.support.render import plan_of
from tests.support.stacks import program_config, security_stacks

STACKS = security_stacks()
NS = "flower-sec"
CERTIFICATE_TYPE = "kubernetes:cert-manager.io/v1:Certificate"
PREVIEW = pytest.mark.parametrize("preview", [True, False], ids=["preview", "up"])
HEX64 = re.compile(r"^[0-9a-f]{64}$")


_RUNS: dict[str, tuple[dict[str, Any], Run]] = {}


def default_run(stack: str) -> tuple[dict[str, Any], Run]:
    """(config, run) of a security stack with the placeholder provider; deterministic, so
    shared by the tests that only read the render."""
    if stack not in _RUNS:
        cfg = program_config(stack)
        _RUNS[stack] = cfg, run_program(cfg, stack)
    return _RUNS[stack]


def plan_for(cfg: dict[str, Any], stack: str) -> FederationPlan:
    """The plan of a `run_program` config (its `federation` and `nodeAuthKeys`)."""
    return plan_of(cfg["federation"], stack, cfg.get("nodeAuthKeys"))


def b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def created_secrets(run: Run) -> dict[str, Registration]:
    return {r.name: r for r in run.kubernetes if r.type == SECRET_TYPE}


def secret_files(reg: Registration) -> dict[str, str]:
    """A registered Secret's files, decoded: stringData as is, data from base64."""
    shown = reveal(reg.inputs, True)
    files = dict(shown.get("stringData") or {})
    for key, value in (shown.get("data") or {}).items():
        files[key] = base64.b64decode(value).decode()
    return files


def manifest(run: Run, kind: str, name: str, show_secrets: bool = True) -> dict[str, Any]:
    found = [m for m in run.manifests(show_secrets) if m["kind"] == kind and m["metadata"]["name"] == name]
    assert len(found) == 1, f"{kind}/{name}: {len(found)} found"
    return found[0]


def workloads_of(run: Run) -> list[dict[str, Any]]:
    return workloads(run.manifests(True))


def secret_volumes(pod_spec: dict[str, Any]) -> dict[str, list[tuple[str, Optional[list[str]]]]]:
    """volume name -> [(Secret name, keys projected or None for all)], projected volumes included."""
    out: dict[str, list[tuple[str, Optional[list[str]]]]] = {}
    for vol in pod_spec.get("volumes", []):
        refs = []
        if "secret" in vol:
            items = vol["secret"].get("items")
            refs.append((vol["secret"]["secretName"], [i["key"] for i in items] if items else None))
        for source in vol.get("projected", {}).get("sources", []):
            if "secret" in source:
                items = source["secret"].get("items")
                refs.append((source["secret"]["name"], [i["key"] for i in items] if items else None))
        if refs:
            out[vol["name"]] = refs
    return out


def mounted_secret_names(pod_spec: dict[str, Any]) -> set[str]:
    return {name for refs in secret_volumes(pod_spec).values() for name, _ in refs}


def checksum_of(workload: dict[str, Any]) -> Optional[str]:
    return workload["spec"]["template"]["metadata"].get("annotations", {}).get(trust.CHECKSUM_ANNOTATION)


def is_superlink(workload: dict[str, Any], plan: FederationPlan) -> bool:
    return workload["kind"] == "StatefulSet" and workload["metadata"]["name"] == plan.names.superlink


def supernode_workloads(run: Run, plan: FederationPlan) -> dict[str, dict[str, Any]]:
    return {p.name: manifest(run, plan.spec.mode, plan.names.pool(p.name)) for p in plan.spec.supernodes.pools}


def load_cert(pem: str) -> x509.Certificate:
    assert pem.startswith("-----BEGIN CERTIFICATE-----"), pem[:60]
    return x509.load_pem_x509_certificate(pem.encode())


def ec_public_numbers(key: Any) -> tuple[str, int, int]:
    """What identifies an EC public key: (curve, x, y)."""
    numbers = key.public_numbers()
    return numbers.curve.name, numbers.x, numbers.y


def recording_entry() -> Callable[[], None]:
    """program.run, plus a stack transformation that records every resource's parent and
    depends_on (exported as `_tree`: name@type -> urns)."""

    def entry() -> None:
        seen: list[pulumi.ResourceTransformationArgs] = []

        def transformation(args: pulumi.ResourceTransformationArgs) -> None:
            seen.append(args)
            return None

        pulumi.runtime.register_stack_transformation(transformation)
        program.run()

        def urn_of(resource: Optional[pulumi.Resource]) -> pulumi.Output[str]:
            return resource.urn if resource is not None else pulumi.Output.from_input("")

        def deps(opts: Optional[pulumi.ResourceOptions]) -> list:
            d = getattr(opts, "depends_on", None) if opts is not None else None
            if d is None:
                return []
            return list(d) if isinstance(d, (list, tuple)) else [d]

        pulumi.export(
            "_tree",
            pulumi.Output.all(
                **{
                    f"{a.name}@{a.type_}": pulumi.Output.all(
                        urn=a.resource.urn,
                        parent=urn_of(a.opts.parent if a.opts is not None else None),
                        depends_on=pulumi.Output.all(*[r.urn for r in deps(a.opts)]),
                    )
                    for a in seen
                }
            ),
        )

    return entry


def tree(run: Run) -> dict[str, dict[str, Any]]:
    return run.outputs["_tree"]
