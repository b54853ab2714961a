"""Where a test run's CPU went, by program: the kernel's process accounting (BSD acct v3) summed per command name.

pytest's per-file table (tests/support/cpu_by_file.py) cannot see the e2e's containers: they run in PID namespaces
and are never reaped through pytest. Process accounting sees every process that exits, in any namespace, with its
CPU time; a cgroup (cpuacct.usage) gives the total to check it against. As root, with Debian's `acct`:

    pacct=$(mktemp) && accton "$pacct"
    make e2e            # or .ci/run, or any target
    accton off
    .venv/bin/python bench/ci_cpu.py "$pacct"

Prints the CPU-seconds per command name (Flower's programs by their console script, 15 characters at most), each
split into root's processes (the harness, pytest, `flwr` calls: a warm call's child counts as `python`, being
forked) and a container user's, the number of processes and the mean per process.
Figures: CONTRIBUTING.md, "CI time".
"""

from __future__ import annotations

import struct
import sys
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path

# struct acct_v3 (linux/acct.h): flag, version, tty, exitcode, uid, gid, pid, ppid, btime, etime (float),
# utime, stime, mem, io, rw, minflt, majflt, swaps (comp_t: 13-bit mantissa, 3-bit base-8 exponent), comm[16].
RECORD = struct.Struct("<BBHIIIIIIfHHHHHHHH16s")
AHZ = 100  # acct's clock ticks per second (AHZ in linux/acct.h)


def _comp(value: int) -> int:
    return (value & 0x1FFF) << (3 * (value >> 13))


def records(path: Path) -> Iterator[tuple[str, int, float]]:
    """(command name, uid, CPU-seconds) of every process the file recorded."""
    data = path.read_bytes()
    for offset in range(0, len(data) - RECORD.size + 1, RECORD.size):
        f = RECORD.unpack_from(data, offset)
        if f[1] != 3:
            raise SystemExit(f"{path}: not an acct v3 record at byte {offset} (version {f[1]})")
        comm = f[18].split(b"\0")[0].decode(errors="replace")
        yield comm, f[4], (_comp(f[10]) + _comp(f[11])) / AHZ


def main(path: Path, shown: int = 20) -> None:
    totals: dict[str, list[float]] = defaultdict(lambda: [0, 0.0])
    for comm, uid, cpu in records(path):
        key = f"{comm} ({'root' if uid == 0 else 'a container user'})"
        totals[key][0] += 1
        totals[key][1] += cpu
    whole = sum(cpu for _, cpu in totals.values())
    print(f"{whole:9.0f} CPU-s in {sum(int(n) for n, _ in totals.values())} processes")
    for key, (n, cpu) in sorted(totals.items(), key=lambda kv: -kv[1][1])[:shown]:
        print(f"{cpu:9.1f} {int(n):7d} {cpu / n:6.2f}/process  {key}")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        raise SystemExit(__doc__)
    main(Path(sys.argv[1]))
