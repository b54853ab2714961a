"""The committed JSON schema of the config (for editors and CI linting of stack files)
is the one the pydantic model generates."""

import json
from pathlib import Path

from federation.config import json_schema

SCHEMA = Path(__file__).resolve().parents[1] / "federation" / "config.schema.json"


def test_committed_schema_is_current():
    assert json.loads(SCHEMA.read_text()) == json_schema(), "regenerate: make schema > federation/config.schema.json"


def test_schema_forbids_unknown_keys_everywhere():
    schema = json_schema()
    models = [schema] + list(schema["$defs"].values())
    assert len(models) > 5
    assert all(m.get("additionalProperties") is False for m in models if m.get("type") == "object" and "properties" in m)
