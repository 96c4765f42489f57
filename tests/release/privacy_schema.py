"""docs/privacy-json.schema.json, as every test of a written privacy.json checks it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jsonschema

SCHEMA = Path(__file__).resolve().parents[2] / "docs" / "privacy-json.schema.json"


def check_privacy_json(written: dict[str, Any]) -> None:
    """Raise unless ``written`` follows the schema, with its summary first."""
    jsonschema.validate(written, json.loads(SCHEMA.read_text()))
    assert list(written)[0] == "summary" and list(written)[-1] == "details"
    assert json.dumps(written).count('"accountant"') <= 1, "the accountant is named once"
