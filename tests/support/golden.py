"""Golden renders: for a few example stacks, the stack settings file and the exact YAML that
`python -m flower_federation render` prints for it, committed under tests/golden/. They pin every rendered object
byte for byte, so a refactor that changes any object shows up as a diff in tests/test_golden.py. Beside
each render, the URN of every resource the program registers (tests/support/urns.py): a refactor that
renames one, which `pulumi up` would carry out as delete-and-create, shows up there.

`make golden` (`python -m tests.support.golden`) rewrites the renders from the current code, after a change
that is meant to alter them; review `git diff tests/golden` before committing.
"""

from __future__ import annotations

import contextlib
import difflib
import io
import json
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

import yaml

from flower_federation.cli.main import main as federation_cli
from tests.support.urns import identities

ROOT = Path(__file__).resolve().parents[2]
GOLDEN_DIR = ROOT / "tests" / "golden"
DIFF_LINES = 80


@dataclass(frozen=True)
class Golden:
    """One example stack: `dev` is the project's own Pulumi.dev.yaml (what `make render` prints); the others
    are tests/golden/Pulumi.<name>.yaml, so the stack name the CLI derives from the file name is `name`."""

    name: str
    # Stacks this one reads with fromStack: {stack name: golden whose outputs it reads}.
    reads: tuple[tuple[str, str], ...] = ()

    @property
    def settings(self) -> Path:
        return ROOT / "Pulumi.dev.yaml" if self.name == "dev" else GOLDEN_DIR / f"Pulumi.{self.name}.yaml"

    @property
    def rendered(self) -> Path:
        return GOLDEN_DIR / f"{self.name}.rendered.yaml"

    @property
    def outputs(self) -> Path:
        """The stack outputs `render --outputs` writes (what another stack's fromStack reads)."""
        return GOLDEN_DIR / f"{self.name}.outputs.json"

    @property
    def urns(self) -> Path:
        return GOLDEN_DIR / f"{self.name}.urns.txt"

    def argv(self, outputs: Path) -> list[str]:
        source = ["--stack", "dev"] if self.name == "dev" else ["--config-file", str(self.settings)]
        reads = [f"--stack-outputs={stack}={GOLDEN_DIR / f'{name}.outputs.json'}" for stack, name in self.reads]
        return ["render", *source, "--outputs", str(outputs), *reads]


# In dependency order: a golden's outputs are committed before a later one reads them.
GOLDENS = (
    Golden("dev"),
    Golden("process-distributed"),
    Golden("daemonset-gpu"),
    Golden("grpc-era"),
    Golden("site-chart"),
    Golden("site-chart-values"),
    Golden("hub", reads=(("acme/flower-federation/site-chart", "site-chart"),)),
    Golden("site-from-hub", reads=(("acme/flower-federation/hub", "hub"),)),
    Golden("multi-cluster"),
)


def render(golden: Golden) -> tuple[str, str]:
    """What `python -m flower_federation render` prints for the stack, and the outputs it writes:
    the CLI's own code path, in-process."""
    out, err = io.StringIO(), io.StringIO()
    with tempfile.TemporaryDirectory() as tmp:
        argv = golden.argv(Path(tmp) / "outputs.json")
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = federation_cli(argv)
        if code != 0:
            raise RuntimeError(f"python -m flower_federation {' '.join(argv)} exited {code}:\n{err.getvalue()}")
        return out.getvalue(), (Path(tmp) / "outputs.json").read_text()


URNS_HEADER = (
    "# The URN (types from the stack down, then the name) of every resource the program registers for\n"
    "# this stack: a line that changes is a resource `pulumi up` deletes and creates anew. Written by\n"
    "# `make golden`; a rename that must not replace gets a pulumi.Alias first.\n"
)


def urns(golden: Golden) -> str:
    """The URNs of the resources the program registers for the stack, as tests/golden/NAME.urns.txt holds them."""
    config = yaml.safe_load(golden.settings.read_text())["config"]
    reads = {stack: json.loads((GOLDEN_DIR / f"{name}.outputs.json").read_text()) for stack, name in golden.reads}
    return URNS_HEADER + "".join(f"{line}\n" for line in identities(config, golden.name, reads))


def _diff(path: Path, actual: str, what: str) -> str:
    expected = path.read_text(encoding="utf-8") if path.exists() else ""
    diff = list(
        difflib.unified_diff(
            expected.splitlines(keepends=True),
            actual.splitlines(keepends=True),
            f"{path.relative_to(ROOT)} (committed)",
            f"{what} (current code)",
        )
    )
    shown = "".join(diff[:DIFF_LINES])
    more = f"... {len(diff) - DIFF_LINES} more diff lines\n" if len(diff) > DIFF_LINES else ""
    return shown + more


def mismatch(golden: Golden, actual: str) -> str:
    """Why the committed render differs from `actual`: the first lines of a unified diff, and the fix."""
    return (
        f"the render of {golden.settings.relative_to(ROOT)} differs from {golden.rendered.relative_to(ROOT)}:\n"
        f"{_diff(golden.rendered, actual, 'render')}"
        "If the change is intended, run `make golden` and review `git diff tests/golden`."
    )


def urns_mismatch(golden: Golden, actual: str) -> str:
    """Why the committed URNs differ from `actual`: the diff, what `pulumi up` would do, and the fixes."""
    return (
        f"the resources registered for {golden.settings.relative_to(ROOT)} differ from "
        f"{golden.urns.relative_to(ROOT)}:\n{_diff(golden.urns, actual, 'URNs')}"
        "`pulumi up` on an existing stack would delete each `-` resource and create each `+` one (generated "
        "keys and certificates anew). If a resource was only renamed or moved, keep its URN with "
        "pulumi.ResourceOptions(aliases=[...]); if the change is intended, run `make golden` and review "
        "`git diff tests/golden`."
    )


def main() -> int:
    for golden in GOLDENS:
        rendered, outputs = render(golden)
        for path, text in ((golden.rendered, rendered.encode()), (golden.outputs, outputs.encode())):
            changed = not path.exists() or path.read_bytes() != text
            if changed:
                path.write_bytes(text)  # bytes: exactly what render wrote, no newline translation
            print(f"{'wrote' if changed else 'up to date:'} {path.relative_to(ROOT)}")
        text = urns(golden).encode()
        changed = not golden.urns.exists() or golden.urns.read_bytes() != text
        if changed:
            golden.urns.write_bytes(text)
        print(f"{'wrote' if changed else 'up to date:'} {golden.urns.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
