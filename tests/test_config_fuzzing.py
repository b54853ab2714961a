"""Bad input, at scale: hypothesis draws whole stack configs (tests/support/fuzz_configs.py)
and runs each through the real Pulumi program under the Pulumi mocks
(`flower_federation.cli.offline.run_program`), as `pulumi preview` or `pulumi up` would. Every example must end in
one of two ways (tests/support/fuzz_checks.py):

- refused: one validation report, each problem by its config path, no traceback, nothing
  created and nothing exported;
- rendered: per cluster, every object valid against the strict Kubernetes 1.34 schema and
  the API server's pod and Service rules, the render invariants holding over what was
  registered, every pod within its namespace's Pod Security level.

Anything else (an exception, a traceback, an invariant error) is a bug in flower-federation.

Covered: both Flower eras and unsupported versions; roles federation, hub and site with
`sites`, `clusters`, `supernodes.superlink`, `fromStack` (other stacks' outputs supplied,
missing or wrong) and pools in other clusters; StatefulSet and DaemonSet; subprocess and
process isolation, sidecar and distributed SuperExecs, the Kubernetes executor; every TLS
source and trust source, `insecure`; node auth with generated and supplied keys (the
secret `nodeAuthKeys`, right and wrong); podTemplate patches (metadata, scheduling
fields, security contexts, volumes, init containers, patches of our containers and new
ones, with env, resources, mounts, ports and managed fields); volumes, mounts, claims, env
and resources per component; security contexts, default resources and resource presets;
the Helm chart's settings (tests/support/fuzz_settings.py: labels, annotations, scheduling
and affinity presets, images in parts with digests, pull secrets, ServiceAccounts and
tokens, update strategies, lifecycle, the ClientAppIo Service and ports, SuperExec
settings and replicas); probes;
NetworkPolicy knobs; PDBs; GPUs; nodeConfig; names (pools colliding with each other and
with ours), ports, exposure (Service types, ingress, external addresses, exposeControlApi).

Not covered here: what real Flower makes of the command lines (tests/test_flower_*.py),
what the real Kubernetes API server admits beyond the rules in `fuzz_checks.api_problems`,
real pulumi-tls outputs (a placeholder provider), large federations (examples stay small
for speed), values the strategy does not list (it draws from lists of plausible and
plausibly wrong values, not arbitrary text), and whether each message quotes the value.

CI runs 2,000 examples (about 3 minutes of one core), derandomized: every run tests the same examples, and a failure
prints the falsifying config and a `@reproduce_failure` blob. FUZZ_EXAMPLES=N runs N
examples instead; FUZZ_RANDOM=1 draws new ones (local exploration).
"""

from __future__ import annotations

import copy
import logging
import os
from typing import Any

import kubernetes_validate
import pulumi
import pytest
from hypothesis import HealthCheck, Phase, event, given, note, settings

from flower_federation.cli.offline import Run, run_program
from flower_federation.config.errors import ConfigError, Problem
from flower_federation.plan import load_plan
from flower_federation.plan.sites import referenced_stacks
from tests.support.fuzz_checks import api_problems, render_problems, report_problems, schema_problems, security_problems
from tests.support.fuzz_configs import Case, cases
from tests.support.schema import validate

FUZZ = settings(
    max_examples=int(os.environ.get("FUZZ_EXAMPLES", "2000")),
    derandomize=os.environ.get("FUZZ_RANDOM") != "1",
    deadline=None,
    print_blob=True,
    database=None,
    # No explain phase: it traces every line of a run, which makes a failing example take seconds.
    phases=[Phase.explicit, Phase.generate, Phase.shrink],
    # Drawing a whole stack takes a few hundred choices; running it is what takes time.
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


def _stack_outputs(case: Case) -> Any:
    """What the program reads through StackReferences: the named stacks' outputs."""
    stacks = referenced_stacks(case.federation)
    return {s: case.stack_outputs.get(s, {}) for s in stacks} if stacks else None


def _refused(case: Case, run: Run, err: pulumi.RunError) -> None:
    message = str(err)
    problems = report_problems(message)
    created = [f"{r.type} {r.name}" for r in run.registrations if r.read_id is None]
    if created:
        problems.append(f"registered on error: {created}")
    if run.outputs:
        problems.append(f"exported on error: {sorted(run.outputs)}")
    assert not problems, "\n".join(problems) + f"\n--- the error:\n{message}"
    event(f"refused, {len(message.splitlines()) - 1} problem(s)" if len(message.splitlines()) < 3 else "refused, 2+")


def _rendered(case: Case, run: Run) -> None:
    plan = load_plan(case.federation, case.stack, case.node_auth_keys, _stack_outputs(case))
    problems: list[str] = []
    for cluster in run.clusters:
        problems += render_problems(plan, run.manifests(show_secrets=True, cluster=cluster))
    assert run.kubernetes, "a rendered config registers Kubernetes objects"
    assert not problems, "\n".join(problems)
    event(f"rendered, role {plan.role}")


@FUZZ
@given(case=cases())
def test_every_config_renders_valid_manifests_or_is_refused_with_one_report(case: Case) -> None:
    note(f"program config: {case.program_config()!r}")
    run = Run()
    logging.disable(logging.WARNING)  # the program's warnings (pulumi.log.warn), thousands of them
    try:
        run_program(
            case.program_config(),
            case.stack,
            preview=case.preview,
            into=run,
            stack_outputs=case.stack_outputs,
            secret_config=case.secret_config,
        )
    except pulumi.RunError as err:
        _refused(case, run, err)
        return
    finally:
        logging.disable(logging.NOTSET)
    _rendered(case, run)


# --- negative controls: the checks refuse what they must --------------------------------------

REPORT = "invalid flower-federation config (2 problems):\n  - federation.mode: x\n  - nodeAuthKeys.a.0: y"


def test_the_report_check_accepts_a_report_and_nothing_else() -> None:
    assert report_problems(REPORT) == []
    assert report_problems(str(ConfigError([Problem('federation.supernodes.pools[0].nodeConfig["a b"]', "m")]))) == []
    assert report_problems(REPORT.replace("2 problems", "3 problems"))
    assert report_problems(REPORT + "\n  - federation.x: Traceback (most recent call last):")
    assert report_problems(REPORT + "\nTraceback (most recent call last):")
    assert report_problems("flower-federation rendered an inconsistent set of objects (please report this):\n  - x")
    assert report_problems("KeyError: 'name'")


def _statefulset() -> dict[str, Any]:
    restricted = {"allowPrivilegeEscalation": False, "runAsNonRoot": True, "capabilities": {"drop": ["ALL"]}}
    container = {
        "name": "app",
        "image": "busybox:1.36",
        "securityContext": {**restricted, "seccompProfile": {"type": "RuntimeDefault"}},
        "volumeMounts": [{"name": "data", "mountPath": "/data"}],
        "resources": {"requests": {"cpu": "100m"}, "limits": {"cpu": "1"}},
    }
    return {
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "metadata": {"name": "s", "namespace": "ns"},
        "spec": {
            "serviceName": "s",
            "selector": {"matchLabels": {"app": "s"}},
            "template": {
                "metadata": {"labels": {"app": "s"}},
                "spec": {"containers": [container], "volumes": [{"name": "data", "emptyDir": {}}]},
            },
        },
    }


def test_the_schema_check_is_kubernetes_validate_strict() -> None:
    good = _statefulset()
    bad = copy.deepcopy(good)
    bad["spec"]["template"]["spec"]["nodeSelectr"] = {}
    bad["spec"]["replicas"] = "2"
    validate(good)
    with pytest.raises(kubernetes_validate.ValidationError):
        validate(bad)
    assert schema_problems(good) == []
    assert len(schema_problems(bad)) == 2 and schema_problems(bad) == schema_problems(copy.deepcopy(bad))


@pytest.mark.parametrize(
    "breakage, found",
    [
        (lambda s: s["volumes"].append({"name": "data", "emptyDir": {}}), "volume 'data' is declared 2 times"),
        (lambda s: s["containers"].append({"name": "app", "image": "x"}), "container 'app' is declared 2 times"),
        (lambda s: s["containers"][0].pop("image"), "container 'app' has no image"),
        (lambda s: s["volumes"].pop(), "container 'app' mounts volume 'data', which the pod does not have"),
        (
            lambda s: s["containers"][0]["volumeMounts"].append({"name": "data", "mountPath": "/data"}),
            "mounts '/data' 2",
        ),
        (lambda s: s["containers"][0]["securityContext"].update(privileged=True), "privileged with allowPrivilegeEsc"),
        (lambda s: s["containers"][0]["resources"]["requests"].update(cpu="2"), "request cpu exceeds its limit"),
        (lambda s: s["containers"][0]["resources"]["limits"].update(memory="-1Gi"), "limits.memory '-1Gi' is not"),
        (lambda s: s["containers"][0].update(ports=[{"containerPort": 1, "name": "p"}] * 2), "names port 'p' 2 times"),
    ],
)
def test_the_api_check_refuses_what_the_api_server_refuses(breakage: Any, found: str) -> None:
    good = _statefulset()
    assert api_problems(good) == []
    breakage(good["spec"]["template"]["spec"])
    assert any(found in p for p in api_problems(good)), api_problems(good)


def test_the_api_check_refuses_bad_cidrs_and_the_security_check_a_weaker_pod() -> None:
    policy = {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": {"name": "p", "namespace": "ns"},
        "spec": {"podSelector": {}, "ingress": [{"from": [{"ipBlock": {"cidr": "10.0.0.1"}}]}]},
    }
    service = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": "s"},
        "spec": {"loadBalancerSourceRanges": ["x"]},
    }
    assert len(api_problems(policy)) == len(api_problems(service)) == 1
    namespace = {"kind": "Namespace", "metadata": {"labels": {"pod-security.kubernetes.io/enforce": "restricted"}}}
    workload = _statefulset()
    assert security_problems([namespace, workload]) == []
    workload["spec"]["template"]["spec"]["containers"][0]["securityContext"]["allowPrivilegeEscalation"] = True
    assert security_problems([namespace, workload]) == [
        "StatefulSet ns/s: its pods are baseline; the namespace enforces restricted"
    ]
