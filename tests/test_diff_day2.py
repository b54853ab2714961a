"""`diff` predicts `up` for each day-2 procedure of docs/operations.md: it names exactly the workloads that roll,
and why. What rolls at `up` is emulated as the e2e harness emulates it: the next render under the stack's state
(tests/support/tls_provider.PulumiState: real keys and certificates, kept while their inputs are kept), and the
workloads whose spec changed (tests/e2e/harness/rollout.changed_workloads, which the harness rolls), for the
federation the e2e scenarios deploy (tests/e2e/rendering.config). Renders are cached per config: each is made once.

Negative control: with the offline placeholders `diff` used before (one text per resource, whatever its inputs),
CA rotation step 2 predicts no change at all, and the test's comparison fails."""

from __future__ import annotations

import copy
import functools
import json
from types import SimpleNamespace
from typing import Any

import pytest

from flower_federation.cli import offline
from flower_federation.cli.diff_command import predict, resources
from flower_federation.cli.stack_file import StackFile
from flower_federation.review import markdown
from flower_federation.review.consequences import Consequence
from tests.e2e.harness.rollout import changed_workloads
from tests.e2e.rendering import NAME, NAMESPACE, config
from tests.support.flower import HTTP_ERA, NEXT
from tests.support.tls_provider import PulumiState

STACK = "e2e"
BASE = config(HTTP_ERA, pools=[("a", 2)])  # as rotation.py and upgrade.py make it
SUPERLINK, POOL = f"{NAME}-superlink", f"{NAME}-supernode-a"


def edit(raw: dict[str, Any], **tls_generate: Any) -> dict[str, Any]:
    out = copy.deepcopy(raw)
    if tls_generate:
        out["tls"] = {"generate": tls_generate}
    return out


@functools.cache
def _resources(frozen: str) -> list[Any]:
    return resources(StackFile({"flower-federation:federation": json.loads(frozen)}, STACK), {})


def predicted(old: dict[str, Any], new: dict[str, Any]) -> tuple[Consequence, ...]:
    sides = [(StackFile({"flower-federation:federation": raw}, STACK), raw) for raw in (old, new)]
    (a, raw_a), (b, raw_b) = sides
    _, at_up = predict(
        (a, _resources(json.dumps(raw_a, sort_keys=True)), {}), (b, _resources(json.dumps(raw_b, sort_keys=True)), {})
    )
    return at_up


def rolls(at_up: tuple[Consequence, ...]) -> dict[str, str]:
    """Workload name -> why, for the workloads `diff` says roll (Jobs run anew: the harness rolls no Job)."""
    return {
        c.resource.inputs["metadata"]["name"]: "; ".join(c.reasons)
        for c in at_up
        if c.rolls and c.resource.inputs["kind"] != "Job"
    }


def rolled_at_up(*configs: dict[str, Any]) -> list[set[str]]:
    """The harness's `up`s, one after another on one stack state: the workloads each one rolls."""
    state = PulumiState()
    out: list[set[str]] = []
    before: dict[tuple[str, str], Any] = {}
    for raw in configs:
        manifests = offline.run_program({"federation": raw}, STACK, provider=state).manifests(show_secrets=True)
        if before:
            cluster = SimpleNamespace(objects=before)
            out.append({m["metadata"]["name"] for m in changed_workloads(cluster, manifests)})  # type: ignore[arg-type]
        before = {(m["kind"], m["metadata"]["name"]): m for m in manifests}
    return out


CA0 = BASE
CA1 = edit(BASE, trustedCaGenerations=[0, 1])
CA2 = edit(BASE, caGeneration=1, trustedCaGenerations=[0, 1])
CA3 = edit(BASE, caGeneration=1, trustedCaGenerations=[1])


def test_each_ca_rotation_step_names_exactly_what_rolls_and_why() -> None:
    """rotation.py scenario 18, `step(...)`: step 1 rolls the SuperLink and the pool, step 2 the SuperLink only,
    step 3 both again."""
    emulated = rolled_at_up(CA0, CA1, CA2, CA3)
    assert emulated == [{SUPERLINK, POOL}, {SUPERLINK}, {SUPERLINK, POOL}]  # scenario 18's `rolls` lists
    steps = [predicted(CA0, CA1), predicted(CA1, CA2), predicted(CA2, CA3)]
    assert [set(rolls(s)) for s in steps] == emulated
    step1, step2, step3 = (rolls(s) for s in steps)
    secret_tls, secret_ca = f"Secret {NAMESPACE}/{NAME}-superlink-tls", f"Secret {NAMESPACE}/{NAME}-ca"
    assert step1[POOL] == f"new CA certificate `{NAME}-tls-ca-g1` → {secret_ca} → `flower.flwr.ai/tls-checksum`"
    assert step2 == {
        SUPERLINK: f"re-issued certificate `{NAME}-tls-server-cert` → {secret_tls} → `flower.flwr.ai/tls-checksum`"
    }
    assert step3[SUPERLINK] == f"{secret_tls} → `flower.flwr.ai/tls-checksum`"  # CA 0 left: nothing new issued
    # The objects that change besides the workloads: the Secrets the new issues reach.
    changes = {c.resource.title: c.reasons for c in steps[1] if not c.rolls}
    assert changes == {secret_tls: (f"re-issued certificate `{NAME}-tls-server-cert`",)}


def test_the_summary_counts_are_the_lists_lengths() -> None:
    """Step 2 of the CA rotation as the reviewer reads it: every number in the summary is a list's length."""
    sides = [StackFile({"flower-federation:federation": raw}, STACK) for raw in (CA1, CA2)]
    review, at_up = predict(
        *((s, _resources(json.dumps(r, sort_keys=True)), {}) for s, r in zip(sides, (CA1, CA2), strict=True))
    )
    text = markdown.render(review, STACK, "", at_up)
    assert (
        "0 objects to create, 0 to delete, 2 to update (1 of them replaced), 2 changes at `up` (1 of them roll "
        "pods); other Pulumi resources: 0 created, 0 deleted, 1 changed (1 of them replaced)." in text
    )
    sections: dict[str, list[str]] = {}  # "### Title (N...)" -> the section's lines
    for line in text.splitlines():
        if line.startswith("### "):
            sections[line[4:]] = []
        elif sections:
            sections[list(sections)[-1]].append(line)
    counted = {}
    for head, lines in sections.items():
        title, _, count = head.partition(" (")
        # An item: an updated object's heading, elsewhere a top-level bullet.
        item = "#### " if title == "Updated" else "- "
        counted[title] = (int(count.split(")")[0].split(":")[0]), len([x for x in lines if x.startswith(item)]))
    assert counted == {
        "Changes at `up`": (2, 2),
        "Replaced": (2, 2),
        "Updated": (2, 2),
        "Other Pulumi resources": (1, 1),
    }


def test_a_dns_name_added_rolls_the_superlink_only() -> None:
    """docs/exposure.md: a `tls.dnsNames` entry re-issues the server certificate (no harness scenario: the
    emulated `up` alone)."""
    new = copy.deepcopy(BASE)
    new["tls"] = {"dnsNames": ["flower.example.org"]}
    (emulated,) = rolled_at_up(BASE, new)
    assert emulated == {SUPERLINK}
    assert rolls(predicted(BASE, new)) == {
        SUPERLINK: f"re-issued certificate `{NAME}-tls-server-cert` → Secret {NAMESPACE}/{NAME}-superlink-tls → "
        "`flower.flwr.ai/tls-checksum`"
    }


def test_a_node_key_rotation_rolls_that_pool_only() -> None:
    """rotation.py scenario 16: `nodeKeyGeneration: 1` (with_generation) replaces exactly pool a's pods."""
    new = copy.deepcopy(BASE)
    new["supernodes"]["pools"][0]["nodeKeyGeneration"] = 1
    (emulated,) = rolled_at_up(BASE, new)
    assert emulated == {POOL}
    predicted_rolls = rolls(predicted(BASE, new))
    assert set(predicted_rolls) == emulated
    assert predicted_rolls[POOL].endswith(
        f"→ Secret {NAMESPACE}/{NAME}-supernode-a-node-keys → `flower.flwr.ai/node-keys-checksum`"
    )
    assert f"new key `{NAME}-pool-a-node-keys-0-g1`" in predicted_rolls[POOL]


def test_an_upgrade_rolls_the_superlink_and_the_pool_for_their_images() -> None:
    """upgrade.py scenario 13: `version: <the next Flower>` (with_version) replaces the SuperLink's pod and every
    pool pod."""
    old = config(HTTP_ERA, pools=[("a", 2)])
    new = config(NEXT, pools=[("a", 2)])
    (emulated,) = rolled_at_up(old, new)
    assert emulated == {SUPERLINK, POOL}
    predicted_rolls = rolls(predicted(old, new))
    assert set(predicted_rolls) == emulated
    assert all("its pod template changes: " in why for why in predicted_rolls.values())
    # The SuperNode's template changes more on the nightly (its exec probes): its image is among the "N more".
    assert "`spec.containers[superlink].image`" in predicted_rolls[SUPERLINK], predicted_rolls[SUPERLINK]


def test_negative_control_the_placeholders_before_the_fix_predict_nothing_for_ca_step_2(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Rendered as `diff` rendered before (placeholders that ignore the inputs), step 2 shows no Secret and no
    workload changing: the comparison with the emulated `up` above would fail."""
    monkeypatch.setattr(offline, "issued_outputs", offline.placeholder_outputs)
    sides = [(StackFile({"flower-federation:federation": raw}, STACK), raw) for raw in (CA1, CA2)]
    review, at_up = predict(*((s, resources(s, {}), {}) for s, _ in sides))
    assert (review.changed, at_up) == ((), ())
    assert set(rolls(at_up)) != {SUPERLINK}


CHECKSUM_ANNOTATIONS = (
    "flower.flwr.ai/tls-checksum",
    "flower.flwr.ai/node-keys-checksum",
    "flower.flwr.ai/runtime-tls-checksum",
)


def _annotated(golden: Any, drop: str = "") -> list[tuple[str, set[str], set[str]]]:
    """(workload, the checksum annotations the committed render carries, those checksums.of_plan explains)."""
    import yaml

    from flower_federation.builders import checksums
    from flower_federation.plan import load_plan
    from tests.support.golden import GOLDEN_DIR

    config = yaml.safe_load(golden.settings.read_text())["config"]
    reads = {stack: json.loads((GOLDEN_DIR / f"{name}.outputs.json").read_text()) for stack, name in golden.reads}
    plan = load_plan(
        config["flower-federation:federation"], golden.name, config.get("flower-federation:nodeAuthKeys"), reads
    )
    candidates = [c for c in checksums.of_plan(plan) if c.annotation != drop]
    out = []
    for m in yaml.load_all(golden.rendered.read_text(), Loader=yaml.CSafeLoader):
        template = (
            (m.get("spec") or {}).get("template")
            if m and m["kind"] in ("StatefulSet", "Deployment", "DaemonSet", "Job")
            else None
        )
        if template is not None:
            carried = set(template["metadata"].get("annotations") or {}) & set(CHECKSUM_ANNOTATIONS)
            out.append((m["metadata"]["name"], carried, set(checksums.covering(template, candidates))))
    return out


def test_the_review_reads_the_checksums_the_shell_puts_on() -> None:
    """Every golden stack's committed render: each pod template's checksum annotations are exactly those
    builders/checksums.py (the one table) explains for the Secrets it mounts, so `diff` can name each one's Secret.
    Negative control: without the node-keys entries, the table explains less than the dev render carries."""
    from tests.support.golden import GOLDENS

    for golden in GOLDENS:
        for name, carried, explained in _annotated(golden):
            assert carried == explained, (golden.name, name, carried, explained)
    dev = next(g for g in GOLDENS if g.name == "dev")
    assert any(carried != explained for _, carried, explained in _annotated(dev, "flower.flwr.ai/node-keys-checksum"))
