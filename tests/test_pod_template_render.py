"""`podTemplate` through the `render` command (the real program, and so `pulumi up`), not only the pure core.

Regression: with TLS on (the default) a podTemplate used to crash the render with a traceback, because the
pod template already held the certificate checksum (a Pulumi Output) when `pods.apply_pod_template`
deep-copied it. The core now works on plain data only and the shell adds the checksum at registration."""

from __future__ import annotations

import contextlib
import io
from pathlib import Path
from typing import Any

import pytest
import yaml

from federation.__main__ import main

POD_TEMPLATE = {"spec": {"nodeSelector": {"disk": "ssd"}}}


def render(tmp_path: Path, federation: dict[str, Any]) -> tuple[int, str]:
    stack = tmp_path / "Pulumi.pt.yaml"
    stack.write_text(yaml.safe_dump({"config": {"flower-federation:federation": federation}}))
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main(["render", "--config-file", str(stack)])
        except Exception as exc:  # the bug surfaces as an exception, not an exit code
            return 1, repr(exc)
    return code, err.getvalue()


def federation(insecure: bool, where: str) -> dict[str, Any]:
    pool: dict[str, Any] = {"name": "a", "replicas": 1}
    raw: dict[str, Any] = {"name": "pt", "insecure": insecure, "supernodes": {"pools": [pool]}}
    if where == "pool":
        pool["podTemplate"] = POD_TEMPLATE
    else:
        raw["superlink"] = {"podTemplate": POD_TEMPLATE}
    return raw


@pytest.mark.parametrize("where", ["pool", "superlink"])
def test_pod_template_renders_with_tls(tmp_path: Path, where: str) -> None:
    code, err = render(tmp_path, federation(False, where))
    assert code == 0, err


@pytest.mark.parametrize("where", ["pool", "superlink"])
def test_pod_template_renders_without_tls(tmp_path: Path, where: str) -> None:
    # Control: without TLS there is no Output on the template, and the same podTemplate renders.
    code, err = render(tmp_path, federation(True, where))
    assert code == 0, err
