"""Golden renders (tests/support/golden.py): each example stack renders, through `python -m federation render`,
to exactly the bytes committed in tests/golden/. A refactor that changes any object fails here with a diff;
`make golden` rewrites the renders when the change is intended."""

from __future__ import annotations

import pytest

from tests.support.golden import DIFF_LINES, GOLDEN_DIR, GOLDENS, Golden, mismatch, render


@pytest.mark.parametrize("golden", GOLDENS, ids=lambda g: g.name)
def test_render_matches_golden(golden: Golden) -> None:
    actual, outputs = render(golden)
    if not golden.rendered.exists() or golden.rendered.read_bytes() != actual.encode():
        pytest.fail(mismatch(golden, actual), pytrace=False)
    # The outputs too: another golden stack reads them with fromStack.
    assert golden.outputs.exists() and golden.outputs.read_text() == outputs, "stale outputs: run `make golden`"


def test_golden_directory_holds_exactly_the_golden_stacks() -> None:
    # A stack file dropped into tests/golden without an entry in GOLDENS would never be checked.
    expected = {g.rendered.name for g in GOLDENS} | {g.settings.name for g in GOLDENS if g.name != "dev"}
    expected |= {g.outputs.name for g in GOLDENS}
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
