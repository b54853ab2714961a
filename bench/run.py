"""`make bench`: offline render time against the Pulumi SDK's floor, per stack; node registration's throughput.

    python bench/run.py [--repeat N] [--rows ROW,...] [--out FILE.md]

For each row (bench/stacks.py), untimed first: write the stack file, record the render's
registrations (bench/registrations.py) and check that both floors replay them exactly
(bench/floor.py --check, with and without --by-token); both also warm the bytecode caches. Then N times (default 5),
alternating, each as a fresh subprocess:

- render: `python -m flower_federation render --config-file F > /dev/null` (the CLI as a user
  runs it: config parsing, validation, the real Pulumi program under the mock runtime,
  the YAML written out);
- floor:  `python bench/floor.py REGS.json` (the same registrations through pulumi-kubernetes' typed
  classes, no logic: the typed SDK's floor, issue 36's yardstick);
- token floor: `python bench/floor.py --by-token REGS.json` (the same registrations, Kubernetes objects by type
  token as the render registers them: about what remains of the render's cost beyond it is its own).

Reported: the median wall time (including interpreter start) and median peak RSS of the
child (`os.wait4`), the median CPU time (user+sys, less sensitive to other load on the
machine), the render/floor and render/token-floor ratios of the medians, and the targets of issues 25 and 36.
Prints a markdown table, with machine information and the load average, to stdout; a
row whose wall time exceeds its CPU time by more than 10% is flagged (the machine was
busy: rerun).

The `register-N` rows (bench/registration_rows.py; `register-1000` by default) then time the rendered
registration Job registering N new keys against a live Flower SuperLink, and its no-change re-run: a second
table, flagged the same way. They need the newest Flower's venv, which `make bench` installs.

The `proxy-...` rows (bench/proxy_rows.py; `proxy-100mb` by default) push and pull a model through the
rendered Fleet-only proxy (Debian's nginx) and the same transfer direct: throughput, nginx's CPU-seconds per
GB, the latency the proxy adds to a small Fleet request. A third table; they need nginx and the same venv.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench import proxy_rows, registration_rows, stacks  # noqa: E402

PY = sys.executable
BUILD = ROOT / "build" / "bench"
# Children run as a new user's shell would: with Python's bytecode cache. (With
# PYTHONDONTWRITEBYTECODE set, as in some CI shells, every run would compile this
# project's modules from source again.)
ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}


@dataclass
class Sample:
    wall: float  # seconds, including interpreter start
    cpu: float  # user + sys seconds of the child
    peak_kb: int  # ru_maxrss of the child (KiB on Linux)


@dataclass
class Row:
    id: str
    registrations: int
    render: list[Sample] = field(default_factory=list)
    floor: list[Sample] = field(default_factory=list)
    token: list[Sample] = field(default_factory=list)  # the by-token floor (bench/floor.py --by-token)


def measure(argv: list[str]) -> Sample:
    """Run argv with stdout to /dev/null; wall time, CPU time and peak RSS of the child."""
    with open(os.devnull, "wb") as devnull:
        start = time.perf_counter()
        proc = subprocess.Popen(argv, cwd=ROOT, env=ENV, stdout=devnull, stderr=subprocess.PIPE)
        # wait4, not Popen.wait: its rusage is this child's own (RUSAGE_CHILDREN's maximum
        # would be the largest of every child so far).
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - start
    proc.returncode = os.waitstatus_to_exitcode(status)
    err = proc.stderr.read().decode(errors="replace") if proc.stderr else ""
    if proc.stderr:
        proc.stderr.close()
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} exited {proc.returncode}:\n{err}")
    return Sample(wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss)


def prepare(row: str, stack_file: Path) -> tuple[Path, int]:
    """Registrations of the render (untimed), checked against a floor replay."""
    regs = BUILD / f"{row}.registrations.json"
    subprocess.run(
        [PY, str(ROOT / "bench" / "registrations.py"), str(stack_file), str(regs)], cwd=ROOT, env=ENV, check=True
    )
    count = len(json.loads(regs.read_text())["registrations"])
    for flags in ([], ["--by-token"]):
        subprocess.run(
            [PY, str(ROOT / "bench" / "floor.py"), "--check", *flags, str(regs)],
            cwd=ROOT,
            env=ENV,
            check=True,
            stdout=subprocess.DEVNULL,
        )
    return regs, count


def median(values: list[float]) -> float:
    return statistics.median(values)


def machine() -> str:
    cpus = os.cpu_count()
    usable = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else cpus
    model = ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    from importlib.metadata import version

    import pulumi  # noqa: F401  (versions only; not part of any measurement)

    return (
        f"{datetime.date.today().isoformat()}, nproc {usable} ({cpus} online){' ' + model if model else ''}, "
        f"{platform.system()} {platform.release()}; Python {platform.python_version()}, pulumi {version('pulumi')}, "
        f"pulumi-kubernetes {version('pulumi-kubernetes')}, pulumi-tls {version('pulumi-tls')}, "
        f"pyyaml {version('pyyaml')} (C LibYAML {'available' if _libyaml() else 'absent'}), "
        f"pydantic {version('pydantic')}."
    )


def _libyaml() -> bool:
    import yaml

    return bool(getattr(yaml, "__with_libyaml__", False))


def loadavg() -> str:
    try:
        return " ".join(Path("/proc/loadavg").read_text().split()[:3])
    except OSError:
        return "n/a"


def table(rows: list[Row], repeat: int) -> str:
    out = [
        "| stack | registrations | render wall s | floor wall s | ratio | render CPU s | floor CPU s "
        "| render peak MiB | floor peak MiB | token floor wall s | render / token floor |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        rw, fw = median([s.wall for s in r.render]), median([s.wall for s in r.floor])
        rc, fc = median([s.cpu for s in r.render]), median([s.cpu for s in r.floor])
        rm, fm = median([s.peak_kb for s in r.render]) / 1024, median([s.peak_kb for s in r.floor]) / 1024
        tw = median([s.wall for s in r.token])
        out.append(
            f"| {stacks.describe(r.id)} | {r.registrations} | {rw:.2f} | {fw:.2f} | {rw / fw:.2f} "
            f"| {rc:.2f} | {fc:.2f} | {rm:.0f} | {fm:.0f} | {tw:.2f} | {rw / tw:.2f} |"
        )
    out += [
        "",
        f"Median of {repeat} runs each, render, floor and token floor alternating, every run a fresh process "
        "(wall time includes interpreter start; peak = the child's maximum RSS). render: "
        "`python -m flower_federation render --config-file F > /dev/null`; floor: `bench/floor.py`, "
        "the same registrations (types, names, inputs, parents) replayed under the same mock "
        "runtime through the SDK's typed classes (the render's pulumi / pulumi-kubernetes / pulumi-tls modules "
        "imported, and the Kubernetes classes' modules), no logic. "
        "ratio = render wall / floor wall. token floor: `bench/floor.py --by-token`, the same registrations "
        "with the Kubernetes objects as bare resources of their type tokens, no Kubernetes class imported: about "
        "what registering as the render does (flower_federation/shell/kubernetes.py) costs alone. Bytecode cache "
        "on (untimed warm-up runs first).",
        "All generated stacks: Flower 1.41.0, process isolation (SuperExec sidecars), TLS (pulumi-tls), "
        "NetworkPolicies. The 1 / 100 / 10,000-replica rows have NO node authentication: node keys "
        "are real per-replica resources (one PrivateKey per replica), which would make those rows "
        "grow with replicas on purpose. The hub rows: a hub with no pools of its own (node authentication, "
        "an ingress) admitting sites x keys inline site keys (tests/support/hub_scale.py).",
        "",
    ]
    return "\n".join(out)


def footer(contended: list[str], load_before: str, load_after: str) -> str:
    out = [f"Machine: {machine()}", f"Load average (1/5/15 min) before: {load_before}; after: {load_after}."]
    if contended:
        out.append(
            f"WARNING: wall time exceeds CPU time by more than {CONTENDED - 1:.0%} for {', '.join(contended)}: "
            "other processes competed for the CPUs; rerun on a quiet machine."
        )
    return "\n".join(out)


# Every run is single-threaded in effect (the GIL), so on a quiet machine wall ~= CPU.
CONTENDED = 1.10


def contention(row: Row) -> float:
    return max(
        median([s.wall for s in samples]) / max(median([s.cpu for s in samples]), 1e-9)
        for samples in (row.render, row.floor, row.token)
    )


def targets(rows: list[Row]) -> str:
    by_id = {r.id: r for r in rows}
    wall = {r.id: median([s.wall for s in r.render]) for r in rows}
    floor = {r.id: median([s.wall for s in r.floor]) for r in rows}
    token = {r.id: median([s.wall for s in r.token]) for r in rows}
    peak = {r.id: median([s.peak_kb for s in r.render]) for r in rows}
    lines = ["", "Targets (issues 25 and 36):", ""]

    def line(ok: bool, text: str) -> None:
        lines.append(f"- [{'x' if ok else ' '}] {text}")

    for row, label in (("pools-16", "16 pools"), ("dev", "dev stack")):
        if row in by_id:
            ratio = wall[row] / floor[row]
            line(
                ratio <= RATIO_TARGET,
                f"{label}: render / floor <= {RATIO_TARGET} (now {ratio:.2f}: render {wall[row]:.2f} s, the typed "
                f"SDK's floor {floor[row]:.2f} s; against the by-token floor, {token[row]:.2f} s, the render's way "
                f"of registering without its logic: {wall[row] / token[row]:.2f})",
            )
    if "replicas-1" in by_id and "replicas-10000" in by_id:
        time_growth = wall["replicas-10000"] / wall["replicas-1"] - 1
        peak_growth = peak["replicas-10000"] / peak["replicas-1"] - 1
        line(
            time_growth <= 0.10 and peak_growth <= 0.10,
            f"1 vs 10,000 replicas within 10% in wall time and peak RSS (now {time_growth:+.0%} and "
            f"{peak_growth:+.0%}; tests/test_replica_invariant.py holds the work equal)",
        )
    if "hub-500x20" in by_id:
        line(
            wall["hub-500x20"] <= 2.0,
            f"hub of 500 sites x 20 keys (10,000 trusted keys) <= 2 s wall (issue 25; now {wall['hub-500x20']:.2f} s, "
            f"the typed SDK's floor {floor['hub-500x20']:.2f} s)",
        )
    return "\n".join(lines) if len(lines) > 3 else ""


# Issue 36: a render costs at most 1.2x what the Pulumi SDK alone costs for the same registrations.
RATIO_TARGET = 1.2


RENDER_ROWS = ["dev", *stacks.ROWS, *stacks.HUB_ROWS]
DEFAULT_ROWS = [*RENDER_ROWS, *registration_rows.DEFAULT, *proxy_rows.DEFAULT]
KNOWN = [*RENDER_ROWS, *registration_rows.ROWS, *proxy_rows.ROWS]


def select(text: str) -> tuple[list[str], list[str], list[str]]:
    """--rows: (render rows, registration rows, proxy rows), each in the order given. ValueError naming
    unknown ones."""
    ids = [r for r in text.split(",") if r]
    unknown = [r for r in ids if r not in KNOWN]
    if unknown:
        raise ValueError(f"unknown rows {unknown}; known: {', '.join(KNOWN)}")
    return (
        [r for r in ids if r in RENDER_ROWS],
        [r for r in ids if r in registration_rows.ROWS],
        [r for r in ids if r in proxy_rows.ROWS],
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5, help="timed runs per row and side (median reported)")
    parser.add_argument("--rows", default=",".join(DEFAULT_ROWS), help="comma-separated row ids")
    parser.add_argument("--out", help="also write the report to this file")
    args = parser.parse_args(argv)
    try:
        render_ids, registration_ids, proxy_ids = select(args.rows)
    except ValueError as e:
        parser.error(str(e))
    # Before any row runs: a missing venv found after minutes of render rows would waste them.
    if registration_ids and (missing := registration_rows.missing_flower()):
        parser.error(missing)
    if proxy_ids and (missing := proxy_rows.missing()):
        parser.error(missing)
    files = stacks.write(BUILD / "stacks") if render_ids else {}
    load_before = loadavg()
    rows = []
    for row_id in render_ids:
        regs, count = prepare(row_id, files[row_id])
        row = Row(row_id, count)
        for _ in range(args.repeat):
            row.render.append(measure([PY, "-m", "flower_federation", "render", "--config-file", str(files[row_id])]))
            row.floor.append(measure([PY, str(ROOT / "bench" / "floor.py"), str(regs)]))
            row.token.append(measure([PY, str(ROOT / "bench" / "floor.py"), "--by-token", str(regs)]))
        print(
            f"  {row_id}: render {median([s.wall for s in row.render]):.2f} s, "
            f"floor {median([s.wall for s in row.floor]):.2f} s, "
            f"token floor {median([s.wall for s in row.token]):.2f} s",
            file=sys.stderr,
        )
        rows.append(row)
    registrations = registration_rows.run(registration_ids, args.repeat)
    proxies = proxy_rows.run(proxy_ids, args.repeat)
    contended = [r.id for r in rows if contention(r) > CONTENDED]
    contended += [r.id for r in registrations if r.contention() > CONTENDED]
    parts = [table(rows, args.repeat)] if rows else []
    parts += [registration_rows.table(registrations, args.repeat)] if registrations else []
    parts += [proxy_rows.table(proxies, args.repeat)] if proxies else []
    parts += [footer(contended, load_before, loadavg()), targets(rows)]
    report = "\n".join(parts) + "\n"
    sys.stdout.write(report)
    if args.out:
        Path(args.out).write_text(report)
    return 0


if __name__ == "__main__":
    sys.exit(main())
