"""`diff` shows multi-line text that is not secret line by line (a unified diff, fenced): a hub reviewer sees which
public keys, under which `site/pool/index` labels, come and go, and what changes in an nginx.conf or a script.
Secret values stay hidden. Unit tests of review/fields.py; test_diff_day2.py renders the node-key rotation."""

from __future__ import annotations

from flower_federation.review.fields import ABSENT, FieldChange, changes

KEY_A = "ecdsa-sha2-nistp384 AAAAE2VjZHNhLXNoYTItbmlzdHAzODQAAAAIbmlzdHAzODQAAABhBA== hub/a/0"
KEY_B = "ecdsa-sha2-nistp384 AAAAE2VjZHNhLXNoYTItbmlzdHAzODQAAAAIbmlzdHAzODQAAABhBB== hub/a/1"
KEY_C = "ecdsa-sha2-nistp384 AAAAE2VjZHNhLXNoYTItbmlzdHAzODQAAAAIbmlzdHAzODQAAABhBC== site-b/gpu/0"


def test_a_key_rotation_shows_the_keys_that_leave_and_come_with_their_labels() -> None:
    old = {"data": {"trusted-keys": f"{KEY_A}\n{KEY_B}\n"}}
    new = {"data": {"trusted-keys": f"{KEY_A}\n{KEY_C}\n"}}
    (change,) = changes(old, new)
    assert change.text == "`data.trusted-keys`: (text of 2 lines) → (text of 2 lines)"
    assert change.lines == ["```diff", "@@ -1,2 +1,2 @@", f" {KEY_A}", f"-{KEY_B}", f"+{KEY_C}", "```"]


def test_text_added_from_nothing_and_a_fence_no_line_can_close() -> None:
    conf = "events {}\n```\nhttp { server { listen 8443 ssl; } }\n"
    lines = FieldChange(("data", "nginx.conf"), ABSENT, conf).lines
    assert lines[0] == "````diff" and lines[-1] == "````"
    assert lines[1:-1] == ["@@ -0,0 +1,3 @@", "+events {}", "+```", "+http { server { listen 8443 ssl; } }"]


def test_secret_or_one_line_values_are_not_shown_line_by_line() -> None:
    """Negative control: the same text marked secret shows no line of it."""
    assert FieldChange(("stringData", "tls.key"), "a\nb\n", "a\nc\n", secret=True).lines == []
    assert FieldChange(("spec", "replicas"), 2, 3).lines == []
    assert FieldChange(("data", "x"), "one", "two").lines == []
