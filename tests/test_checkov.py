"""checkov (Kubernetes framework, offline) over the dev stack and every security stack.

Each render is written as multi-document YAML into its own subdirectory, next to a
deliberately weakened negative control, and checkov runs ONCE over the lot, from its
own venv (.venv-checkov, made by `make test`; its pins clash with ours). Nothing may
fail except the checks in tests/checkov-skips.yaml, each of which must still fire.

checkov builds one graph for a whole run, and its edge builders ignore namespaces
(a NetworkPolicy selects any Pod with matching labels, wherever it is). Renders share
namespaces, names and labels, so a NetworkPolicy of one render would "cover" the pods
of another and make CKV2_K8S_6 pass vacuously. The scanned copies therefore carry one
extra label per render, on every pod template and in every NetworkPolicy podSelector:
within a render every pod has it, so what each policy selects is unchanged; across
renders nothing matches. (RoleBinding -> Role edges go by name and can only add
connections, so only make the RBAC graph checks stricter.)
"""

from __future__ import annotations

import collections
import copy
import json
import os
import re
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

import pytest
import yaml

from flower_federation.cli.offline import SECRET_PLACEHOLDER, run_program
from flower_federation.kube.documents import dump_all
from tests.support.manifests import WORKLOAD_KINDS, workloads
from tests.support.paths import ROOT
from tests.support.stacks import dev_settings, program_config, security_stacks

CHECKOV = ROOT / ".venv-checkov" / "bin" / "checkov"
SKIPS_FILE = Path(__file__).with_name("checkov-skips.yaml")
PINNED = re.search(r"^checkov==(\S+)", (ROOT / "requirements-checkov.txt").read_text(), re.M).group(1)
HOW_TO_INSTALL = "run `make test` (or `make .venv-checkov/.installed`) to create it from requirements-checkov.txt"

NEGATIVE = "negative-control"
RENDER_LABEL = "checkov.test/render"  # scan-only, see the module docstring
# Checks every workload must have been run through and passed: pod hardening, probes,
# requests and memory limits, namespaces, and (on checkov's Pod entity) NetworkPolicy coverage.
CORE_WORKLOAD_CHECKS = {
    "CKV_K8S_8",
    "CKV_K8S_9",  # liveness, readiness probes
    "CKV_K8S_10",
    "CKV_K8S_12",  # CPU, memory requests
    "CKV_K8S_13",  # memory limits
    "CKV_K8S_14",  # image tag fixed
    "CKV_K8S_16",
    "CKV_K8S_17",
    "CKV_K8S_18",
    "CKV_K8S_19",  # privileged, host PID/IPC/network
    "CKV_K8S_20",  # allowPrivilegeEscalation
    "CKV_K8S_21",  # not the default namespace
    "CKV_K8S_22",  # read-only root filesystem
    "CKV_K8S_23",
    "CKV_K8S_40",  # not root, high UID
    "CKV_K8S_25",
    "CKV_K8S_28",
    "CKV_K8S_37",
    "CKV_K8S_39",  # capabilities
    "CKV_K8S_29",
    "CKV_K8S_30",
    "CKV_K8S_31",  # security contexts, seccomp
}
JOB_SKIPS = {"CKV_K8S_8", "CKV_K8S_9"}
CORE_POD_CHECKS = {"CKV2_K8S_6"}  # every pod selected by some NetworkPolicy
CHECKOV_TIMEOUT = 600


# ---------------------------------------------------------------- renders


def stack_configs() -> dict[str, dict[str, Any]]:
    """Render id -> config for run_program: the dev stack file, then every security stack."""
    configs = {"dev": dev_settings()}
    for stack_id in security_stacks():
        configs[stack_id] = program_config(stack_id)
    return configs


def render(config: dict[str, Any]) -> list[dict[str, Any]]:
    """The manifests as `render` prints them (Secrets' values masked)."""
    return run_program(config, "dev").manifests()


def weakened(objects: list[dict[str, Any]]) -> dict[str, Any]:
    """The negative control: a copy of a StatefulSet of `objects` (same namespace and
    labels, so only render isolation keeps its NetworkPolicies away), privileged, root,
    allowed to escalate, without a pod securityContext or memory limits, mounting a token
    it has no use for."""
    sts = copy.deepcopy(next(o for o in objects if o["kind"] == "StatefulSet"))
    sts["metadata"]["name"] = "weakened"
    pod = sts["spec"]["template"]["spec"]
    pod.pop("securityContext", None)
    pod["automountServiceAccountToken"] = True
    for c in pod["containers"] + pod.get("initContainers", []):
        c["securityContext"] = {"privileged": True, "allowPrivilegeEscalation": True, "runAsUser": 0}
        c["resources"].pop("limits", None)
    return sts


def isolated(objects: list[dict[str, Any]], render_id: str) -> list[dict[str, Any]]:
    """Scan copy of one render whose pods only its own NetworkPolicies select."""
    out = copy.deepcopy(objects)
    for o in out:
        if o["kind"] in WORKLOAD_KINDS:
            o["spec"]["template"].setdefault("metadata", {}).setdefault("labels", {})[RENDER_LABEL] = render_id
        elif o["kind"] == "NetworkPolicy":
            o["spec"].setdefault("podSelector", {}).setdefault("matchLabels", {})[RENDER_LABEL] = render_id
    return out


# ---------------------------------------------------------------- checkov


@dataclass(frozen=True)
class Finding:
    render: str
    resource: str  # checkov's id: Kind.namespace.name (Pod entities: ...name.labels)
    check_id: str
    check_name: str


@dataclass
class Scan:
    renders: dict[str, list[dict[str, Any]]]
    summary: dict[str, Any]
    parsing_errors: list[str]
    passed: list[Finding]
    failed: list[Finding]
    seconds: float
    by_render: dict[str, list[Finding]] = field(default_factory=dict)


def checkov_env(cache: Path) -> dict[str, str]:
    """No Prisma/Bridgecrew platform: no API key, no mapping or guideline downloads, no
    update check, a private cache."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("BC_", "PRISMA_", "CKV_", "CHECKOV_", "LOG_LEVEL"))}
    env.update(
        BC_SKIP_MAPPING="TRUE",
        CKV_SKIP_PACKAGE_UPDATE_CHECK="TRUE",
        CKV_CACHE_DIR=str(cache),
        LOG_LEVEL="ERROR",
        PYTHONWARNINGS="ignore",
    )
    return env


def run_checkov(directory: Path, work: Path) -> tuple[dict[str, Any], float]:
    # No --quiet: the passed checks are what prove the scan was not vacuous.
    cmd = [
        str(CHECKOV),
        "--framework",
        "kubernetes",
        "-d",
        str(directory),
        "--output",
        "json",
        "--compact",
        "--skip-download",
    ]
    started = time.monotonic()
    proc = subprocess.run(
        cmd,
        cwd=work,
        env=checkov_env(work / "cache"),
        capture_output=True,
        text=True,
        timeout=CHECKOV_TIMEOUT,
        stdin=subprocess.DEVNULL,
    )
    seconds = time.monotonic() - started
    # 0: all passed, 1: some failed (we judge which); anything else is a crash.
    assert proc.returncode in (0, 1), f"checkov exited {proc.returncode}:\n{proc.stderr[-4000:]}"
    try:
        report = json.loads(proc.stdout)
    except json.JSONDecodeError:
        pytest.fail(f"checkov printed no JSON report:\n{proc.stdout[:2000]}\n{proc.stderr[-4000:]}")
    reports = report if isinstance(report, list) else [report]
    kube = [r for r in reports if r.get("check_type") == "kubernetes"]
    assert len(kube) == 1 and "results" in kube[0], f"no kubernetes report from checkov: {str(report)[:2000]}"
    return kube[0], seconds


def findings(records: list[dict[str, Any]]) -> list[Finding]:
    return [
        Finding(PurePosixPath(r["file_path"]).parts[1], r["resource"], r["check_id"], r["check_name"]) for r in records
    ]


def installed_or_fail() -> None:
    if not CHECKOV.exists():
        pytest.fail(f"{CHECKOV.relative_to(ROOT)} missing: {HOW_TO_INSTALL}", pytrace=False)


@pytest.fixture(scope="session")
def rendered() -> tuple[dict[str, list[dict[str, Any]]], dict[str, str]]:
    """(render id -> objects, render id -> error) for the dev and security stacks."""
    renders: dict[str, list[dict[str, Any]]] = {}
    errors: dict[str, str] = {}
    for render_id, config in stack_configs().items():
        try:
            renders[render_id] = render(config)
        except Exception as err:  # reported by test_every_stack_renders
            errors[render_id] = f"{type(err).__name__}: {err}"
    return renders, errors


@pytest.fixture(scope="session")
def scan(rendered, tmp_path_factory) -> Scan:
    installed_or_fail()
    work = tmp_path_factory.mktemp("checkov")
    scanned = work / "renders"
    renders = dict(rendered[0])
    assert "dev" in renders, rendered[1].get("dev")
    renders[NEGATIVE] = [weakened(renders["dev"])]
    for render_id, objects in renders.items():
        (scanned / render_id).mkdir(parents=True)
        (scanned / render_id / "manifests.yaml").write_text(dump_all(isolated(objects, render_id)))
    report, seconds = run_checkov(scanned, work)
    print(
        f"\ncheckov {report['summary'].get('checkov_version')}: {len(renders)} renders, "
        f"{report['summary']['resource_count']} resources in {seconds:.1f}s"
    )
    results = report["results"]
    result = Scan(
        renders,
        report["summary"],
        results.get("parsing_errors", []),
        findings(results.get("passed_checks", [])),
        findings(results.get("failed_checks", [])),
        seconds,
    )
    for f in result.failed:
        result.by_render.setdefault(f.render, []).append(f)
    return result


@pytest.fixture(scope="session")
def skips() -> dict[str, str]:
    return yaml.safe_load(SKIPS_FILE.read_text())


# ---------------------------------------------------------------- helpers


def resource_id(obj: dict[str, Any]) -> str:
    return f"{obj['kind']}.{obj['metadata']['namespace']}.{obj['metadata']['name']}"


def pod_prefix(obj: dict[str, Any]) -> str:
    """checkov's Pod entity for a workload's template: Pod.<namespace>.<name>.<labels>."""
    return f"Pod.{obj['metadata']['namespace']}.{obj['metadata']['name']}."


def token_needed(objects: list[dict[str, Any]], resource: str) -> bool:
    """CKV_K8S_38's scope: the workload's ServiceAccount is bound to a Role in its render."""
    workload = next((o for o in workloads(objects) if resource_id(o) == resource), None)
    if workload is None:
        return False
    ns = workload["metadata"]["namespace"]
    account = workload["spec"]["template"]["spec"].get("serviceAccountName")
    return any(
        s.get("kind") == "ServiceAccount" and s.get("name") == account and s.get("namespace", ns) == ns
        for o in objects
        if o["kind"] in ("RoleBinding", "ClusterRoleBinding")
        for s in o.get("subjects", [])
    )


# A skipped check that should only fire in a narrow place: where else it fires counts.
SCOPED = {"CKV_K8S_38": token_needed}


def unexpected(scan: Scan, skips: dict[str, str], render_id: str) -> list[Finding]:
    objects = scan.renders[render_id]
    return [
        f
        for f in scan.by_render.get(render_id, [])
        if f.check_id not in skips or (f.check_id in SCOPED and not SCOPED[f.check_id](objects, f.resource))
    ]


def product_renders(scan: Scan) -> list[str]:
    return [r for r in scan.renders if r != NEGATIVE]


# ---------------------------------------------------------------- tests


def test_checkov_is_installed():
    installed_or_fail()


def test_skip_file_is_a_short_mapping_of_ids_to_one_line_reasons(skips):
    assert isinstance(skips, dict) and skips
    for check_id, reason in skips.items():
        assert re.fullmatch(r"CKV2?_K8S_\d+", check_id), check_id
        assert isinstance(reason, str) and reason.strip() and "\n" not in reason.strip(), check_id
    assert set(SCOPED) <= set(skips)


def test_every_stack_renders(rendered):
    errors = rendered[1]
    assert not errors, "stacks that do not render (so checkov never saw them):\n" + "\n".join(
        f"  {k}: {v.strip().splitlines()[-1].strip()}" for k, v in errors.items()
    )


def test_checkov_is_the_pinned_version_and_parsed_every_object(scan):
    assert scan.summary["checkov_version"] == PINNED, f"stale .venv-checkov: {HOW_TO_INSTALL}"
    assert scan.parsing_errors == [], scan.parsing_errors
    assert scan.summary["parsing_errors"] == 0
    objects = [o for objs in scan.renders.values() for o in objs]
    # One resource per object (Certificate, NetworkPolicy, ... included), plus one Pod
    # entity per workload's pod template.
    assert all("template" not in o.get("spec", {}) or o["kind"] in WORKLOAD_KINDS for o in objects)
    assert scan.summary["resource_count"] == len(objects) + len(workloads(objects))
    assert {"StatefulSet", "Deployment", "DaemonSet", "Certificate", "NetworkPolicy", "Role", "RoleBinding"} <= {
        o["kind"] for o in objects
    }


def test_checkov_sees_real_specs_not_secret_placeholders(rendered):
    """Only Secrets' values are masked: a secret-tainted input (once, a checksum of a
    read TLS Secret) would mask a whole workload spec, from checkov and from diffs."""
    for render_id, objects in rendered[0].items():
        for o in objects:
            if o["kind"] != "Secret":
                assert SECRET_PLACEHOLDER not in json.dumps(o), (render_id, resource_id(o))


def test_checkov_ran_and_passed_the_core_checks_on_every_workload(scan):
    passed = collections.defaultdict(set)
    for f in scan.passed:
        passed[(f.render, f.resource)].add(f.check_id)
    pods = collections.defaultdict(set)
    for (render_id, resource), ids in passed.items():
        if resource.startswith("Pod."):
            pods[render_id].add((resource, frozenset(ids)))
    missing = {}
    count = 0
    for render_id in product_renders(scan):
        for w in workloads(scan.renders[render_id]):
            count += 1
            # The registration Job skips the probe checks in its own annotations.
            expected = CORE_WORKLOAD_CHECKS - (JOB_SKIPS if w["kind"] == "Job" else set())
            lacking = expected - passed[(render_id, resource_id(w))]
            pod_ids = set().union(*(ids for res, ids in pods[render_id] if res.startswith(pod_prefix(w))))
            lacking |= CORE_POD_CHECKS - pod_ids
            if lacking:
                missing[f"{render_id}: {resource_id(w)}"] = sorted(lacking)
    assert not missing, f"core checks not passed: {missing}"
    assert count >= 70
    # Roughly 90 checks pass per workload; far fewer means checkov skipped most of them.
    assert scan.summary["passed"] > 50 * count


def test_no_failed_check_beyond_the_skip_list(scan, skips):
    bad = {
        r: sorted({(f.check_id, f.check_name, f.resource) for f in unexpected(scan, skips, r)})
        for r in product_renders(scan)
    }
    bad = {r: v for r, v in bad.items() if v}
    assert not bad, (
        "checkov failures not in tests/checkov-skips.yaml (fix the product, or skip with a reason):\n"
        + "\n".join(f"  {r}: {cid} {name} on {res}" for r, v in bad.items() for cid, name, res in v)
    )


def test_every_skipped_check_still_fires(scan, skips):
    fired = {f.check_id for r in product_renders(scan) for f in scan.by_render.get(r, [])}
    stale = sorted(set(skips) - fired)
    assert not stale, f"skipped checks that no longer fire anywhere: remove them from {SKIPS_FILE.name}: {stale}"


def test_negative_control_fails_through_the_same_filter(scan, skips):
    """The weakened StatefulSet fails hardening checks (memory limits too), and the filter that judges the
    product flags them: CKV_K8S_38 too, skipped only where a Role is bound. Its pod is
    not covered by the dev render's NetworkPolicies, which proves renders are isolated."""
    failed = {f.check_id for f in unexpected(scan, skips, NEGATIVE)}
    assert {
        "CKV_K8S_13",
        "CKV_K8S_16",
        "CKV_K8S_20",
        "CKV_K8S_23",
        "CKV_K8S_29",
        "CKV_K8S_38",
        "CKV2_K8S_6",
    } <= failed, sorted(failed)
    assert not {"CKV_K8S_13", "CKV_K8S_16", "CKV_K8S_20"} & set(skips)
