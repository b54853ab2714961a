"""Where a render's time goes: cProfile of `python -m flower_federation render`, summarised.

    python bench/profile_render.py STACK_FILE [--top N] [--prof OUT.prof] [--after-imports]

Prints, for the main thread, then for the program's own thread (the offline runner runs the Pulumi program
on a thread of its own, flower_federation/cli/offline.py: the plan, the builders, the registrations; the
main thread only waits for it there), each profiled apart (cProfile sees only the thread it runs in; the
mock monitor's side of each registration runs on executor threads, use py-spy for those):

- phases: cumulative time of imports, config validation, the program's registrations,
  waiting for the mock runtime, unwrapping the inputs, the YAML dump;
- own time by origin: this project (flower_federation/, flower_federation/shell/), Pulumi SDK (pulumi,
  pulumi_kubernetes, pulumi_tls, pulumi_random), yaml, pydantic, jsonschema/kubernetes-validate,
  grpc/protobuf, asyncio, typing, import machinery, other; the time of built-ins
  (isinstance, len, ...) is charged to their callers' origins;
- the top functions by cumulative and by own time, and the callers of isinstance.

`--after-imports` imports what the render imports at start (the CLI, flower_federation.cli.offline,
flower_federation.kube.documents) before profiling, to see the work itself.

Profiled times are inflated by cProfile's own overhead (roughly 2x here): read them as
shares and call counts, and `make bench` for wall time.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import os
import pstats
import runpy
import sys
import threading
from collections import defaultdict
from contextlib import redirect_stdout
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

ORIGINS = (
    ("ours", (str(ROOT / "flower_federation") + os.sep,)),
    (
        "pulumi SDK",
        tuple(f"{os.sep}{p}{os.sep}" for p in ("pulumi", "pulumi_kubernetes", "pulumi_tls", "pulumi_random")),
    ),
    ("yaml", (f"{os.sep}yaml{os.sep}",)),
    (
        "pydantic",
        (
            f"{os.sep}pydantic{os.sep}",
            f"{os.sep}pydantic_core{os.sep}",
            f"{os.sep}annotated_types{os.sep}",
            f"{os.sep}typing_inspection{os.sep}",
        ),
    ),
    (
        "jsonschema / kubernetes-validate",
        tuple(
            f"{os.sep}{p}{os.sep}"
            for p in (
                "jsonschema",
                "referencing",
                "rpds",
                "jsonschema_specifications",
                "kubernetes_validate",
                "attr",
                "attrs",
            )
        ),
    ),
    ("grpc / protobuf", (f"{os.sep}grpc{os.sep}", f"{os.sep}google{os.sep}protobuf{os.sep}")),
    ("asyncio", (f"{os.sep}asyncio{os.sep}",)),
    ("typing", (f"{os.sep}typing.py", f"{os.sep}typing_extensions.py")),
    ("import machinery", ("<frozen importlib", "<frozen zipimport")),
)

# (label, file suffix, function name) whose cumulative time is a phase of the render.
PHASES = (
    (
        "import cli.offline (Pulumi SDK, pulumi-kubernetes, our modules)",
        "cli/offline.py",
        "<module>",
    ),
    (
        "config: load_plan (pydantic, rules, Kubernetes schema checks)",
        "plan/__init__.py",
        "load_plan",
    ),
    ("core: builders/manifests.py render (every object, plain data)", "builders/manifests.py", "render"),
    ("shell: Federation (the Pulumi SDK registers them)", "shell/federation.py", "__init__"),
    (
        "run_program (all of the above under the mock runtime, and the waits)",
        "cli/offline.py",
        "run_program",
    ),
    ("Run.manifests / reveal (unwrap secrets, floats to ints)", "cli/offline.py", "manifests"),
    ("documents.dump_all (YAML)", "kube/documents.py", "dump_all"),
    ("Pulumi _get_stack_trace (per registration)", "pulumi/runtime/resource.py", "_get_stack_trace"),
    ("Pulumi serialize_properties (inputs to the wire)", "pulumi/runtime/rpc.py", "serialize_properties"),
)


def origin(filename: str) -> str:
    for label, needles in ORIGINS:
        if any(n in filename for n in needles):
            return label
    if filename == "~":
        return "built-in"
    if "site-packages" in filename:
        return "other third-party"
    return "other stdlib"


def own_time_by_origin(stats: pstats.Stats) -> dict[str, float]:
    totals: dict[str, float] = defaultdict(float)
    for (filename, _, _), (_, _, tt, _, callers) in stats.stats.items():  # type: ignore[attr-defined]
        where = origin(filename)
        if where != "built-in" or not callers:
            totals[where] += tt
            continue
        # A built-in's own time, split over its callers by their share of its calls.
        calls = sum(c[1] for c in callers.values()) or 1
        for caller, (_, nc, _, _) in callers.items():
            totals[origin(caller[0])] += tt * nc / calls
    return dict(totals)


def phase_times(stats: pstats.Stats) -> list[tuple[str, float, int]]:
    out = []
    for label, suffix, name in PHASES:
        cum, calls = 0.0, 0
        for (filename, _, fn), (_, nc, _, ct, callers) in stats.stats.items():  # type: ignore[attr-defined]
            if not filename.endswith(suffix):
                continue
            if name is None:
                # Module-wide: functions of the file called from outside it.
                if any(not c[0].endswith(suffix) for c in callers):
                    cum += sum(v[3] for c, v in callers.items() if not c[0].endswith(suffix))
                    calls += sum(v[1] for c, v in callers.items() if not c[0].endswith(suffix))
            elif fn == name:
                cum += ct
                calls += nc
        out.append((label, cum, calls))
    return out


def short(func: tuple[str, int, str]) -> str:
    filename, line, name = func
    for marker in ("site-packages" + os.sep, str(ROOT) + os.sep, "lib" + os.sep + "python3"):
        if marker in filename:
            filename = filename.split(marker, 1)[1]
            break
    return f"{filename}:{line}({name})" if filename != "~" else name


def report(stats: pstats.Stats, top: int) -> str:
    lines = []
    total = stats.total_tt  # type: ignore[attr-defined]
    lines.append(f"total (profiled): {total:.2f} s, {stats.total_calls:,} calls")  # type: ignore[attr-defined]
    lines += ["", "Phases (cumulative):"]
    for label, cum, calls in phase_times(stats):
        lines.append(f"  {cum:7.3f} s {cum / total:6.1%}  {label}  [{calls:,} calls]")
    lines += ["", "Own time by origin (built-ins charged to their callers):"]
    for where, tt in sorted(own_time_by_origin(stats).items(), key=lambda kv: -kv[1]):
        lines.append(f"  {tt:7.3f} s {tt / total:6.1%}  {where}")
    rows = stats.stats  # type: ignore[attr-defined]
    for title, key in (("cumulative", 3), ("own", 2)):
        lines += ["", f"Top {top} by {title} time:", "     calls    own s    cum s  function"]
        for func, (_cc, nc, tt, ct, _) in sorted(rows.items(), key=lambda kv: -kv[1][key])[:top]:
            lines.append(f"  {nc:8,} {tt:8.3f} {ct:8.3f}  {short(func)}")
    for func, (_, nc, tt, _, callers) in rows.items():
        if func[2] == "<built-in method builtins.isinstance>":
            lines += ["", f"isinstance: {nc:,} calls, {tt:.3f} s own; top callers:"]
            for caller, (_, cnc, _, _) in sorted(callers.items(), key=lambda kv: -kv[1][1])[:top]:
                lines.append(f"  {cnc:9,}  {short(caller)}  [{origin(caller[0])}]")
    return "\n".join(lines)


def offline_thread_prefix() -> str:
    """The name of the thread the offline runner runs the program on (cli/offline.py, `thread_name_prefix`)."""
    return "offline-pulumi"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("stack_file")
    parser.add_argument("--top", type=int, default=25)
    parser.add_argument("--prof", help="also keep the raw cProfile data here (the program thread's in PROF.program)")
    parser.add_argument("--after-imports", action="store_true", help="import the render's modules before profiling")
    args = parser.parse_args(argv)
    sys.argv = ["federation", "render", "--config-file", args.stack_file]
    sys.path.insert(0, str(ROOT))
    if args.after_imports:
        import flower_federation.cli.main  # noqa: F401
        import flower_federation.cli.offline  # noqa: F401
        import flower_federation.kube.documents  # noqa: F401
    profiler, program = cProfile.Profile(), cProfile.Profile()

    def on_thread_start(*_: object) -> None:
        # Called once in each new thread (threading.setprofile): cProfile profiles the thread that enables it, so
        # the program's thread enables its own profiler; other threads (the mock monitor's executor) go unprofiled.
        if threading.current_thread().name.startswith(offline_thread_prefix()):
            program.enable()
        else:
            sys.setprofile(None)

    threading.setprofile(on_thread_start)
    sink = io.StringIO()
    with redirect_stdout(sink):
        profiler.enable()
        try:
            runpy.run_module("flower_federation", run_name="__main__", alter_sys=True)
        except SystemExit as done:
            if done.code not in (0, None):
                raise
        finally:
            profiler.disable()
            threading.setprofile(None)  # type: ignore[arg-type]
    if args.prof:
        profiler.dump_stats(args.prof)
        program.dump_stats(f"{args.prof}.program")
    print("== main thread (waits for the program's thread in run_program) ==")
    print(report(pstats.Stats(profiler), args.top))
    print("\n== the program's thread (offline._run: plan, builders, registrations) ==")
    print(report(pstats.Stats(program), args.top))
    return 0


if __name__ == "__main__":
    sys.exit(main())
