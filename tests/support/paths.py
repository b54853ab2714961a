"""Where things are: the checkout the tests run from."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
