"""The canary (`make test-canary`, .github/workflows/canary.yml): what changed in the newest Flower the registry
serves, against the Flower we test, in what a deployment depends on (tests/support/flower_surface.py reads it
inside each venv): each program's flags, the SuperLink's and SuperNode's Fleet, Control and health routes, and the
state's Alembic heads.

    python -m tests.support.canary [--baseline VERSION] CANDIDATE_VENV...

Each candidate is compared with the tested version of its channel (requirements-flwr.txt): a `flwr` release
with the newest tested release, a `flwr-nightly` with the tested nightly (the newest tested version when none is).
Every difference is printed, e.g.

    flwr 1.44.0 (against 1.42.0): flower-supernode lost --foo (we render it)

and called known when the project already accounts for it: a state head in flower/versions.py's
KNOWN_STATE_HEADS, or a flag or route change in KNOWN_CHANGES below (each with where it is handled). The exit
code is 1 when any is unknown, and the last line names the first unknown one; 0 otherwise. A new Flower that
changes nothing here passes; one that does fails until someone has read the change and recorded it."""

from __future__ import annotations

import argparse
import functools
import itertools
import json
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

from flower_federation.flower.versions import KNOWN_STATE_HEADS, FlowerVersion
from tests.support.flower import PROGRAMS, REQUIREMENTS
from tests.support.kube import started_containers
from tests.support.render import plan_objects, plan_of

SURFACE = Path(__file__).with_name("flower_surface.py")
# Flag and route changes someone has read and handled: (what, where, item, "lost"/"new") -> where it is handled.
# Empty while the newest served Flowers change none of them against the tested ones.
KNOWN_CHANGES: dict[tuple[str, str, str, str], str] = {}


@dataclass(frozen=True)
class Change:
    what: str  # flag, route, migration
    where: str  # the program, the app, or "state"
    item: str
    direction: str  # lost / new
    note: str  # what it means for us
    known: str  # where the project handles it; "" when nobody has yet

    def line(self, who: str) -> str:
        verdict = f": known ({self.known})" if self.known else ""
        return f"{who}: {self.where} {self.direction} {self.what} {self.item}{self.note}{verdict}"


def surface(venv: Path) -> dict[str, Any]:
    """What flower_surface.py reads in `venv` (its Python, its Flower)."""
    res = subprocess.run(
        [str(venv / "bin" / "python"), str(SURFACE)], capture_output=True, text=True, timeout=600, check=False
    )
    if res.returncode != 0:
        raise RuntimeError(f"{venv}: flower_surface.py failed ({res.returncode}): {res.stderr.strip()[-2000:]}")
    return dict(json.loads(res.stdout))


@functools.lru_cache(maxsize=4)
def rendered_flags(version: str) -> dict[str, frozenset[str]]:
    """The flags we render for Flower `version`, by program: every container the parser tests' stacks start
    (tests/test_flower_cli.py: each isolation and placement, TLS and insecure)."""
    from tests.test_flower_cli import stack  # the parser tests' own stacks

    out: dict[str, set[str]] = {}
    combos = (("subprocess", "sidecar"), ("process", "sidecar"), ("process", "distributed"))
    for (isolation, placement), insecure in itertools.product(combos, (False, True)):
        objects = plan_objects(plan_of(stack(version, isolation, placement, insecure), "fed"))
        for _, _, c, argv in started_containers(objects):
            program = PROGRAMS[c["name"]]
            out.setdefault(program, set()).update(a.split("=", 1)[0] for a in argv if a.startswith("--"))
    return {program: frozenset(flags) for program, flags in out.items()}


def compare(base: dict[str, Any], cand: dict[str, Any], ours: dict[str, frozenset[str]]) -> list[Change]:
    """Every difference between the baseline's surface and the candidate's: flags, then routes, then migrations,
    each sorted (so the first is always the same one)."""
    changes = []
    for program in sorted(base["flags"].keys() | cand["flags"].keys()):
        had, has = set(base["flags"].get(program, [])), set(cand["flags"].get(program, []))
        for direction, items in (("lost", had - has), ("new", has - had)):
            for flag in sorted(items):
                rendered = flag in ours.get(program, frozenset())
                note = (" (we render it)" if rendered else " (we do not render it)") if direction == "lost" else ""
                known = KNOWN_CHANGES.get(("flag", program, flag, direction), "")
                changes.append(Change("flag", program, flag, direction, note, known))
    for app in sorted(base["routes"].keys() | cand["routes"].keys()):
        had, has = set(base["routes"].get(app, [])), set(cand["routes"].get(app, []))
        for direction, items in (("lost", had - has), ("new", has - had)):
            for route in sorted(items):
                known = KNOWN_CHANGES.get(("route", app, route, direction), "")
                changes.append(Change("route", app, route, direction, "", known))
    revisions = cand["revisions"]["all"]
    for head in sorted(set(cand["revisions"]["heads"]) - set(base["revisions"]["heads"])):
        downs, doc = revisions.get(head, [[], ""])
        note = f' "{doc}" after {", ".join(downs) or "nothing"}'
        known = "flower/versions.py KNOWN_STATE_HEADS" if head in KNOWN_STATE_HEADS.values() else ""
        changes.append(Change("migration", "state", head, "new", note, known))
    for head in sorted(set(base["revisions"]["heads"]) - set(revisions)):
        changes.append(Change("migration", "state", head, "lost", " (a state we migrated to is unknown to it)", ""))
    return changes


def tested() -> dict[str, list[str]]:
    """The tested versions of requirements-flwr.txt by package (flwr, flwr-nightly), in its order."""
    out: dict[str, list[str]] = {"flwr": [], "flwr-nightly": []}
    for line in REQUIREMENTS.read_text(encoding="utf-8").splitlines():
        m = re.fullmatch(r"(flwr|flwr-nightly)==(\S+)", line.strip())
        if m:
            out[m[1]].append(m[2])
    return out


def _newest(versions: list[str]) -> Optional[str]:
    return max(versions, key=lambda v: FlowerVersion.parse(v) or FlowerVersion(0, 0, 0), default=None)


def baseline_for(package: str) -> str:
    """The tested version a candidate of `package` is compared with."""
    ours = tested()
    newest = _newest(ours[package]) or _newest(ours["flwr"] + ours["flwr-nightly"])
    assert newest is not None, f"{REQUIREMENTS} names no Flower"
    return newest


def main(argv: Optional[list[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.support.canary", description=__doc__.split("\n\n")[0])
    parser.add_argument("--baseline", help="compare every candidate with this tested version (its .venv-flwr-*)")
    parser.add_argument("candidates", nargs="+", type=Path, help="venvs holding the newest flwr / flwr-nightly")
    args = parser.parse_args(argv)
    from tests.support.flower import venv

    first_unknown = None
    for candidate in args.candidates:
        try:
            cand = surface(candidate)
        except RuntimeError as exc:  # a Flower that does not even import is the first change
            print(f"canary: FAILED, the newest Flower in {candidate} could not be read: {exc}")
            return 1
        base_version = args.baseline or baseline_for(cand["package"])
        who = f"{cand['package']} {cand['version']} (against {base_version})"
        changes = compare(surface(venv(base_version)), cand, rendered_flags(cand["version"]))
        for change in changes:
            print(change.line(who))
            if not change.known and first_unknown is None:
                first_unknown = change.line(who)
        if not changes:
            print(f"{who}: no flag, route or migration changed")
    if first_unknown is not None:
        print(f"canary: FAILED, the first change nobody has accounted for: {first_unknown}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
