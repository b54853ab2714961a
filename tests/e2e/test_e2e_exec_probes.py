"""The harness kubelet's exec probes (harness/exec_probes.py) against a live container: a SuperNode pod of the
Flower nightly as the project renders it (TLS, node authentication; Flower 1.43 has no gRPC health server, so
its probes are exec probes, plan/probes.py). Its readiness probe, the rendered command run in the container,
makes the pod Ready; a command run the same way sees what the container sees (its user, environment, working
dir, hostname, PID 1, read-only root). Negative controls: the same probe fails on the SuperNode stopped with
SIGSTOP and passes again after SIGCONT; a command that outlives timeoutSeconds fails and is killed. No SuperLink
runs: the SuperNode serves its Runtime API while it tries to reach one."""

from __future__ import annotations

import json
import os
import secrets
import signal
import time
from pathlib import Path

from tests.e2e.harness import Cluster, Pod
from tests.e2e.harness.exec_probes import run_exec_probe
from tests.e2e.rendering import config, render
from tests.support.flower import NEXT, venv

# What the container sees, one line: uid gid groups, HOME, cwd, hostname, PID 1's program (its script: the venv's
# python runs it), whether it can write to /.
WHOAMI = (
    "import os,socket\n"
    "try:\n"
    "    open('/probe-was-here','w'); root='writable'\n"
    "except OSError as e:\n"
    "    root=type(e).__name__\n"
    "print(os.getuid(),os.getgid(),sorted(os.getgroups()),os.environ['HOME'],os.getcwd(),socket.gethostname(),"
    "[os.path.basename(a) for a in open('/proc/1/cmdline').read().split(chr(0)) if 'flower-' in a][0],root)"
)


def _launch(pod: Pod) -> tuple[int, dict]:
    c = pod.container("supernode")
    assert c.pid1 is not None and c.launch_file is not None
    return c.pid1, json.loads(c.launch_file.read_text())


def test_exec_probes_run_in_the_container_and_fail_when_it_hangs() -> None:
    raw = config(NEXT, pools=[("a", 1)])
    raw["supernodes"]["probes"] = {"livenessProbe": {"timeoutSeconds": 2}}  # the SIGSTOP control waits this long
    manifests = render(raw).manifests
    cluster = Cluster(NEXT, venv(NEXT), "exec-probes")
    try:
        cluster.apply(manifests)
        cluster.create_pods()
        pod = next(p for p in cluster.pods.values() if "supernode" in [c["name"] for c in p.spec["containers"]])
        spec = next(c for c in pod.spec["containers"] if c["name"] == "supernode")
        liveness = spec["livenessProbe"]
        assert "exec" in liveness and "exec" in spec["readinessProbe"]  # 1.43: no gRPC health server
        cluster.start_pods([pod])
        cluster.wait_pods_ready([pod], timeout=120)  # readiness: the rendered exec probe, run by the harness
        container = pod.container("supernode")
        assert container.readiness.last == "exit 0"

        pid1, launch = _launch(pod)
        timeout = liveness["timeoutSeconds"]
        assert run_exec_probe(pid1, launch, liveness["exec"]["command"], timeout) == (True, "exit 0")

        sc = {**pod.spec["securityContext"], **spec.get("securityContext", {})}
        # A passing probe's output is not in its detail (the kubelet keeps it only for failures): exit 3 to read it.
        ok, seen = run_exec_probe(pid1, launch, ["python", "-c", WHOAMI + "\nraise SystemExit(3)"], timeout)
        assert not ok and seen.startswith("exit 3: ")
        uid, gid, rest = seen.removeprefix("exit 3: ").split(" ", 2)
        groups, rest = rest.split("] ", 1)
        home, cwd, hostname, program, root = rest.split(" ")
        assert (int(uid), int(gid)) == (sc["runAsUser"], sc["runAsGroup"])
        assert str(sc["fsGroup"]) in groups
        assert (home, cwd, hostname, program) == ("/app", spec.get("workingDir", "/app"), pod.name, "flower-supernode")
        assert root in ("OSError", "PermissionError")  # readOnlyRootFilesystem (EROFS) as the container has it

        # Negative control: the same probe on the SuperNode stopped with SIGSTOP fails, and passes after SIGCONT.
        os.kill(pid1, signal.SIGSTOP)
        try:
            ok, detail = run_exec_probe(pid1, launch, liveness["exec"]["command"], timeout)
            assert not ok, detail
        finally:
            os.kill(pid1, signal.SIGCONT)
        assert run_exec_probe(pid1, launch, liveness["exec"]["command"], timeout) == (True, "exit 0")

        # A hung command fails at timeoutSeconds and is killed: nothing of it is left in the container.
        marker = f"hung-{secrets.token_hex(4)}"
        started = time.monotonic()
        ok, detail = run_exec_probe(pid1, launch, ["python", "-c", f"import time  # {marker}\ntime.sleep(300)"], 1)
        assert (ok, detail) == (False, "command timed out after 1s, killed")
        assert time.monotonic() - started < 300  # a hang guard, not a timing claim: the sleep would take 300 s
        assert not [p for p in Path("/proc").iterdir() if p.name.isdigit() and _cmdline_has(p, marker)]
    finally:
        cluster.close()


def _cmdline_has(proc: Path, marker: str) -> bool:
    try:
        return marker in (proc / "cmdline").read_text(errors="replace")
    except OSError:
        return False
