"""The committed JSON schema of the config (for editors and CI linting of stack files)
is the one the pydantic model generates, byte for byte."""

import contextlib
import io

from flower_federation.cli.main import main
from flower_federation.config import json_schema
from flower_federation.config.reference import SCHEMA_FILE, schema_text


def test_committed_schema_is_current() -> None:
    assert SCHEMA_FILE.read_bytes() == schema_text().encode(), (
        "flower_federation/config/config.schema.json is stale: run `make schema`"
    )


def test_schema_command_prints_the_committed_bytes() -> None:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(["schema"]) == 0
    assert out.getvalue() == schema_text()


def test_schema_forbids_unknown_keys_everywhere() -> None:
    schema = json_schema()
    models = [schema] + list(schema["$defs"].values())
    assert len(models) > 5
    objects = [m for m in models if m.get("type") == "object" and "properties" in m]
    assert all(m.get("additionalProperties") is False for m in objects)
