"""`make bench`'s registration rows: node registration against a live Flower SuperLink.

Row `register-N` (ROWS): bench/node_registration.py's measurement, N new keys: on a fresh SuperLink
(the `http-nodeauth` test stack's, Flower HTTP_ERA), the rendered registration Job registers every key
(**first**), then runs again with nothing to change (**no-change**, the pair each run makes); the SuperLink's
RSS after both, its peak, the CPU of the SuperLink and of the Job on the first run. `--repeat` runs of each
row, the rows taking turns (one run of each per round, so a burst of other load falls on every row alike), the
median of each figure reported.

Each run is a fresh process (spawned: a clean interpreter, as `python bench/node_registration.py` runs):
`node_registration.measure` reads the Job's peak RSS as the largest child its process has reaped, which in
bench/run.py's own process would be a render's or an earlier run's SuperLink.
"""

from __future__ import annotations

import multiprocessing
import statistics
import sys
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from typing import Optional

from tests.support.flower import HTTP_ERA, venv_python

# row id -> new keys (node_registration.measure: a multiple of 10, ten keys a site); in table order.
ROWS: dict[str, int] = {"register-1000": 1_000, "register-10000": 10_000}
# In `make bench` by default; register-10000, ten times the keys and the wait, on request (docs/benchmarks.md).
DEFAULT = ("register-1000",)


@dataclass
class RegistrationRow:
    id: str
    keys: int
    runs: list[dict[str, float]] = field(default_factory=list)  # node_registration.measure's figures

    def medians(self) -> dict[str, float]:
        return {name: statistics.median(run[name] for run in self.runs) for name in self.runs[0]}

    def contention(self) -> float:
        """The first run's wall time over the CPU the SuperLink and the Job spent on it. The Job makes one
        call at a time and waits for each answer, so on a quiet machine the two take turns and the wall time
        is about their CPU summed; more means they waited for a core."""
        m = self.medians()
        return m["first"] / max(m["link_cpu"] + m["job_cpu"], 1e-9)


def missing_flower() -> Optional[str]:
    """Why the rows cannot run here, or None."""
    python = venv_python(HTTP_ERA)
    if python.exists():
        return None
    return f"{python} missing: `make bench` installs it (the Makefile target .venv-flwr-{HTTP_ERA}/.installed)"


def _measure_in_child(keys: int) -> dict[str, float]:
    # Imported here: 1.5 s of imports (the live-Flower test support, pulumi) a render-only bench skips.
    from bench import node_registration

    with ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn")) as pool:
        return pool.submit(node_registration.measure_fresh, keys).result()


def run(ids: list[str], repeat: int) -> list[RegistrationRow]:
    rows = [RegistrationRow(row_id, ROWS[row_id]) for row_id in ids]
    for _ in range(repeat):
        for row in rows:
            m = _measure_in_child(row.keys)
            row.runs.append(m)
            print(
                f"  {row.id}: first {m['first']:.1f} s ({row.keys / m['first']:.0f} keys/s), "
                f"no-change {m['again']:.1f} s, SuperLink RSS {m['rss']:.0f} MiB",
                file=sys.stderr,
            )
    return rows


def table(rows: list[RegistrationRow], repeat: int) -> str:
    from bench import node_registration

    out = [*node_registration.HEADER]
    out += [node_registration.table_row(r.keys, 1, r.medians()) for r in rows]
    out += [
        "",
        f"Median of {repeat} runs each (keys/s: new keys / the median first run), the rows taking turns, every "
        f"run on a fresh SuperLink (Flower {HTTP_ERA}, the `http-nodeauth` test stack's: TLS, node "
        "authentication, its state in a SQLite file) started with its rendered args, and the rendered "
        "registration Job's container given that many new keys in a hub's shard files (bench/node_registration.py). "
        "first run: the Job registering every key, one call at a time (wall time, interpreter start and "
        "Flower's import included); no-change run: the same Job again (one ListNodes); CPU: of the first run; "
        "RSS after: the SuperLink's VmRSS after both, peak its VmHWM; Job peak: the Job's maximum RSS.",
        "",
    ]
    return "\n".join(out)
