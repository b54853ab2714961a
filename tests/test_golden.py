"""Golden renders (tests/support/golden.py): each example stack renders, through `python -m flower_federation render`,
to exactly the bytes committed in tests/golden/, and registers resources under exactly the committed URNs.
A refactor that changes any object, or renames any resource, fails here with a diff; `make golden` rewrites
the goldens when the change is intended."""

from __future__ import annotations

import pytest

from tests.support.golden import DIFF_LINES, GOLDEN_DIR, GOLDENS, Golden, mismatch, render, urns, urns_mismatch


@pytest.mark.parametrize("golden", GOLDENS, ids=lambda g: g.name)
def test_render_matches_golden(golden: Golden) -> None:
    actual, outputs = render(golden)
    if not golden.rendered.exists() or golden.rendered.read_bytes() != actual.encode():
        pytest.fail(mismatch(golden, actual), pytrace=False)
    # The outputs too: another golden stack reads them with fromStack.
    assert golden.outputs.exists() and golden.outputs.read_text() == outputs, "stale outputs: run `make golden`"


@pytest.mark.parametrize("golden", GOLDENS, ids=lambda g: g.name)
def test_resources_keep_their_urns(golden: Golden) -> None:
    # What a no-op `pulumi preview` after a refactor rests on: every resource keeps its URN.
    actual = urns(golden)
    if not golden.urns.exists() or golden.urns.read_text(encoding="utf-8") != actual:
        pytest.fail(urns_mismatch(golden, actual), pytrace=False)


def test_a_renamed_resource_is_reported_as_a_replacement_with_the_alias_fix() -> None:
    # Negative control for the message: the CA key renamed, as a careless refactor of shell/tls.py would.
    golden = next(g for g in GOLDENS if g.name == "dev")
    committed = golden.urns.read_text(encoding="utf-8")
    assert "$tls:index/privateKey:PrivateKey::demo-tls-ca-key\n" in committed
    message = urns_mismatch(golden, committed.replace("::demo-tls-ca-key", "::demo-ca-key"))
    assert "-flower-federation:index:Federation$flower-federation:index:TlsTrust$tls:index/privateKey" in message
    assert "+flower-federation:index:Federation$flower-federation:index:TlsTrust$tls:index/privateKey" in message
    assert "would delete each `-` resource and create each `+` one" in message
    assert "aliases=[...]" in message


def test_golden_directory_holds_exactly_the_golden_stacks() -> None:
    # A stack file dropped into tests/golden without an entry in GOLDENS would never be checked.
    expected = {g.rendered.name for g in GOLDENS} | {g.settings.name for g in GOLDENS if g.name != "dev"}
    expected |= {g.outputs.name for g in GOLDENS} | {g.urns.name for g in GOLDENS}
    assert {p.name for p in GOLDEN_DIR.iterdir()} == expected


def test_a_changed_render_is_reported_with_a_short_diff_and_the_fix() -> None:
    # Negative control for the message: every object of the dev stack moved to another namespace.
    golden = next(g for g in GOLDENS if g.name == "dev")
    changed = golden.rendered.read_text(encoding="utf-8").replace("flower-dev", "flower-prod")
    message = mismatch(golden, changed)
    assert "-  namespace: flower-dev\n+  namespace: flower-prod\n" in message
    assert "more diff lines" in message
    assert message.count("\n") < DIFF_LINES + 10
    assert message.endswith("run `make golden` and review `git diff tests/golden`.")
