"""Node registration at scale against a live SuperLink; not part of `make test` (docs/benchmarks.md).

    .venv/bin/python bench/node_registration.py [--keys 1000,10000] [--concurrency 8,1] [--script PATH]
                                                [--out FILE.md]

For each number of keys (and each `--concurrency`), on a fresh SuperLink:
the `http-nodeauth` test stack rendered (Flower 1.42.0, TLS, node authentication) and its SuperLink started
as its StatefulSet runs it (the rendered args, its state in the `--database` file on the PVC's mount;
tests/support/live_flower.py), then the rendered registration Job's container (tests/support/registration_job.py)
given that many new keys (tests/support/hub_scale.py) in the SHARDS files of a sharded hub. It times:

- **first**: the Job registering every key (wall time, interpreter start and Flower's import included);
- **again**: the same Job once more, nothing to change (one ListNodes);

and reads the SuperLink's resident memory (VmRSS, /proc) after the second run, its peak (VmHWM), the CPU
time the SuperLink and the Job spent on the first run, the state file's size and the Job's peak RSS.
`--script` runs another register_nodes.py in the Job's place
(`git show REV:flower_federation/flower/scripts/register_nodes.py > FILE`)
for a before/after comparison; `--concurrency` sets REGISTRATION_CONCURRENCY for a script that reads it: the
variant of commit 51dd93a, which made up to that many Control calls at a time (the current script makes them
one after the other and ignores it; docs/benchmarks.md says why). Each row starts a SuperLink of its own; the
SuperLink's log must show every call.
"""

from __future__ import annotations

import argparse
import os
import platform
import resource
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from tests.support import hub_scale  # noqa: E402
from tests.support.flower import HTTP_ERA  # noqa: E402
from tests.support.live_flower import live_superlink  # noqa: E402
from tests.support.registration_job import job_pod  # noqa: E402

TICKS = os.sysconf("SC_CLK_TCK")


def status_kib(pid: int, field: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(f"{field}:"):
            return int(line.split()[1])
    raise KeyError(field)


def cpu_seconds(pid: int) -> float:
    """User + system CPU of the process (its threads included)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS


def children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def measure(keys: int, concurrency: int, script: Path | None, workdir: Path) -> dict[str, float]:
    lines = [key for site in hub_scale.site_keys(keys // 10, 10) for key in site]
    assert len(lines) == keys
    with live_superlink(HTTP_ERA, workdir) as live:
        superlink = live.procs.procs[0][1].pid
        job = job_pod(live, "registration-job").sharded(lines)
        if script is not None:
            job.argv[1] = str(script)
        env = {"REGISTRATION_CONCURRENCY": str(concurrency)}
        link_cpu, job_cpu, start = cpu_seconds(superlink), children_cpu(), time.monotonic()
        first = job.run(timeout_seconds=3600, **env)
        first_s = time.monotonic() - start
        link_cpu, job_cpu = cpu_seconds(superlink) - link_cpu, children_cpu() - job_cpu
        assert first.returncode == 0, first.stdout[-2000:] + first.stderr[-2000:]
        assert f"{keys} registered, 0 revoked, 0 unchanged" in first.stdout, first.stdout[-500:]
        start = time.monotonic()
        again = job.run(timeout_seconds=600, **env)
        again_s = time.monotonic() - start
        assert again.returncode == 0 and f"0 registered, 0 revoked, {keys} unchanged" in again.stdout, again.stdout
        log = live.procs.log("superlink")
        served = log.count("ControlServicer.RegisterNode\n")
        assert served == keys, f"the SuperLink logged {served} RegisterNode calls, not {keys}"
        return {
            "first": first_s,
            "again": again_s,
            "link_cpu": link_cpu,
            "job_cpu": job_cpu,
            "rss": status_kib(superlink, "VmRSS") / 1024,
            "hwm": status_kib(superlink, "VmHWM") / 1024,
            "state": live.database.stat().st_size / 2**20,
            # the largest child this process reaped: the Job (the SuperLink is still running)
            "job_peak": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024,
        }


def measure_fresh(keys: int, concurrency: int = 1, script: Path | None = None) -> dict[str, float]:
    """`measure` on a SuperLink of its own, in a temporary directory removed afterwards."""
    with tempfile.TemporaryDirectory(prefix="bench-registration-") as tmp:
        return measure(keys, concurrency, script, Path(tmp))


# The report's table (also `make bench`'s registration table, bench/registration_rows.py, with medians).
HEADER = [
    "| new keys | concurrency | first run s | keys/s | no-change run s | SuperLink CPU s | Job CPU s "
    "| SuperLink RSS after MiB | SuperLink peak MiB | state file MiB | Job peak MiB |",
    "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
]


def table_row(keys: int, concurrency: int, m: dict[str, float]) -> str:
    return (
        f"| {keys:,} | {concurrency} | {m['first']:.1f} | {keys / m['first']:.0f} | {m['again']:.1f} "
        f"| {m['link_cpu']:.1f} | {m['job_cpu']:.1f} | {m['rss']:.0f} | {m['hwm']:.0f} | {m['state']:.1f} "
        f"| {m['job_peak']:.0f} |"
    )


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--keys", default="1000,10000", help="comma-separated numbers of new keys (multiples of 10)")
    parser.add_argument(
        "--concurrency", default="1", help="comma-separated REGISTRATION_CONCURRENCY values (a script that reads it)"
    )
    parser.add_argument("--script", type=Path, help="register_nodes.py to run instead of the current one")
    parser.add_argument("--out", type=Path, help="also write the report (markdown) to this file")
    args = parser.parse_args(argv)
    cpu = next(
        (
            line.split(":", 1)[1].strip()
            for line in Path("/proc/cpuinfo").read_text().splitlines()
            if "model name" in line
        ),
        "?",
    )
    out = [
        f"Flower {HTTP_ERA}, {os.cpu_count()} CPUs ({cpu}), Python {platform.python_version()}, "
        f"load average {os.getloadavg()[0]:.2f} before; script: {args.script or 'current'}",
        "",
        *HEADER,
    ]
    print("\n".join(out), flush=True)
    for keys in (int(k) for k in args.keys.split(",")):
        for concurrency in (int(c) for c in args.concurrency.split(",")):
            row = table_row(keys, concurrency, measure_fresh(keys, concurrency, args.script))
            out.append(row)
            print(row, flush=True)
    out.append(f"\nload average {os.getloadavg()[0]:.2f} after")
    print(out[-1])
    if args.out:
        args.out.write_text("\n".join(out) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
