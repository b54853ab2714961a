"""A warm start (harness/warm.py, warm_flower.py, warm_shim.py) makes the same container as the cold path (ip netns
exec, unshare, podinit, setpriv, the console script): a SuperNode pod of Flower 1.42.0 as the project renders it,
started once each way, compared as the kernel shows them. PID 1 is the program itself with the container's user,
groups, capabilities, no_new_privs, name and command line; it sees the same mounts (the shims bound over the
scripts Flower starts: the one difference), read-only root, /etc/hosts and hostname; the SuperExec it starts
gets the same command line and environment (what Flower's import set in it included) and, warm, runs as its own
process that joined the container with the same identity; its log starts the same. No SuperLink runs: the
SuperNode serves its Runtime API while it tries to reach one. The comparison can fail: each side is also checked
against what the harness itself has (root, every capability, the host's /etc/hosts and environment)."""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from tests.e2e.harness import Cluster
from tests.e2e.harness.containers import Container
from tests.e2e.harness.exec_probes import run_exec_probe
from tests.e2e.harness.warm import SPAWNED_PROGRAMS, servers
from tests.e2e.rendering import config, render
from tests.support.flower import HTTP_ERA, venv

NICE = 5  # a niceness other than the harness's, so that the comparison below can see it applied
STATUS_FIELDS = ("Uid", "Gid", "Groups", "CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb", "NoNewPrivs", "NSpid")


def _status(pid: int) -> dict[str, str]:
    fields = dict(line.split(":", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines() if ":" in line)
    return {k: fields[k].split()[-1] if k == "NSpid" else " ".join(fields[k].split()) for k in STATUS_FIELDS}


def _scheduling(pid: int) -> dict[str, str]:
    """Its niceness, and its session's autogroup's (the kernel shares the CPUs between autogroups by that one)."""
    return {"nice": str(os.getpriority(os.PRIO_PROCESS, pid)), "autogroup": _autogroup_nice(pid)}


def _autogroup_nice(pid: int) -> str:
    """The niceness of its session's autogroup, or "none": the kernel prints nothing for the root task group (the boot
    session: PID 1's, and that of a CI runner's harness that never left it) and has no file without
    CONFIG_SCHED_AUTOGROUP."""
    path = Path(f"/proc/{pid}/autogroup")
    words = path.read_text().split() if path.exists() else []
    return words[-1] if words[-2:-1] == ["nice"] else "none"


def _mounts(pid: int) -> list[tuple[str, str]]:
    """(mount point, per-mount options) of the container's mount namespace."""
    out = []
    for line in Path(f"/proc/{pid}/mountinfo").read_text().splitlines():
        parts = line.split()
        point = re.sub(r"fe2e[0-9a-f]{4}", "ID", parts[4])  # a cluster's id in its namespaces' names
        out.append((point, ",".join(sorted(o for o in parts[5].split(",") if o != "relatime"))))
    return sorted(out)


def _status_field(pid: int, field: str) -> str:
    """A field of the process' status as seen from inside its container (its PID namespace's numbers)."""
    ns_pid = _status(pid)["NSpid"]
    out = subprocess.run(
        ["nsenter", "-t", str(pid), "-p", "-m", "cat", f"/proc/{ns_pid}/status"], capture_output=True, text=True
    ).stdout
    return dict(line.split(":\t", 1) for line in out.splitlines() if ":\t" in line)[field].strip()


def _terminate(pid: int) -> str:
    """SIGTERM to `pid`, then its end as its parent would reap it (it stays a zombie: the SuperNode never waits
    for its SuperExec): its state and exit status, from /proc/PID/stat."""
    os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + 60  # a hang bound: Flower's SuperExec ends on SIGTERM at once
    while time.monotonic() < deadline:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        if fields[0] == "Z":
            return f"exit status {int(fields[49])}"  # field 52, exit_code: waitpid's status word
        time.sleep(0.1)
    return "still running"


def _catches(pid: int, sig: int) -> bool:
    """The process has a handler for `sig` (/proc/PID/status SigCgt: bit sig-1)."""
    caught = next(line for line in Path(f"/proc/{pid}/status").read_text().splitlines() if line.startswith("SigCgt:"))
    return bool(int(caught.split()[1], 16) >> (sig - 1) & 1)


def _children(pid: int) -> list[int]:
    return [int(p) for p in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]


def _environ(pid: int) -> dict[str, str]:
    entries = Path(f"/proc/{pid}/environ").read_bytes().decode().split("\0")
    return dict(e.split("=", 1) for e in entries if "=" in e)


@contextlib.contextmanager
def _supernode(warm: bool, label: str) -> Iterator[tuple[Cluster, Container]]:
    """A cluster running only the SuperNode pod of a 1.42.0 stack with one pool; its container once started."""
    cluster = Cluster(HTTP_ERA, venv(HTTP_ERA), label, nice=NICE, warm=warm)
    try:
        cluster.apply(render(config(HTTP_ERA, pools=[("a", 1)])).manifests)
        cluster.create_pods()
        pod = next(p for p in cluster.pods.values() if "supernode" in [c["name"] for c in p.spec["containers"]])
        cluster.start_pods([pod])
        yield cluster, pod.container("supernode")
    finally:
        cluster.close()


def _seen(warm: bool) -> dict[str, Any]:
    with _supernode(warm, "warm" if warm else "cold") as (cluster, container):
        deadline = time.monotonic() + 120  # a hang bound: the SuperExec follows the SuperNode's start in seconds
        while not (container.pid1 and _children(container.pid1)) and time.monotonic() < deadline:
            time.sleep(0.2)
        pid1 = container.pid1
        assert pid1 and _children(pid1), container.log()
        superexec = _children(pid1)[0]  # warm: the shim at the script's path, waiting for its warm SuperExec
        deadline = time.monotonic() + 60  # a hang bound: the shim's call is answered in milliseconds
        while warm and time.monotonic() < deadline:
            joined = [
                pid
                for _, _, pid, _ in cluster.processes()
                if pid not in (pid1, superexec) and Path(f"/proc/{pid}/comm").read_text().strip() == "flower-superexe"
            ]
            if joined:
                break
            time.sleep(0.2)
        itself = joined[0] if warm else superexec
        # Its start done, cold and warm alike: it catches SIGTERM (run_superexec's register_signal_handlers, well
        # after "Starting Flower SuperExec" is logged: a SIGTERM between the two ends it by the signal). The kernel
        # says which signals a process catches.
        while not _catches(itself, signal.SIGTERM) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert _catches(itself, signal.SIGTERM), container.log(tail=40)
        # Owned by the process' user unless it is not dumpable: a process that changed its uid without an exec is
        # not (its /proc files become root's) unless it says so again; Flower's SuperExec makes itself so.
        owners = {
            "pid 1": os.stat(f"/proc/{pid1}/environ").st_uid,
            "superexec": os.stat(f"/proc/{itself}/environ").st_uid,
        }
        log = re.sub(r"\d\d:\d\d:\d\d|\d+(\.\d+)?s", "T", container.log(tail=400))
        # PID 1's command line is not compared: a warm one's /proc/PID/cmdline is the server's (changing it needs
        # CAP_SYS_RESOURCE), and what the harness reports for it (cluster_processes.py) is what it started.
        seen: dict[str, Any] = {
            "status": _status(pid1),
            "comm": Path(f"/proc/{pid1}/comm").read_text().strip(),
            "mounts": _mounts(pid1),
            "hosts": re.sub(r"\d+\.\d+\.\d+\.\d+", "IP", Path(f"/proc/{pid1}/root/etc/hosts").read_text()),
            "hostname": subprocess.run(
                ["nsenter", "-t", str(pid1), "-u", "hostname"], capture_output=True, text=True, check=True
            ).stdout.strip(),
            "superexec argv": Path(f"/proc/{superexec}/cmdline").read_bytes().split(b"\0"),
            "superexec env": _environ(superexec),
            "superexec status": {k: v for k, v in _status(superexec).items() if k != "NSpid"},
            "log start": [line for line in log.splitlines() if not line.startswith("===")][:3],
            # The SuperExec's own process: the cold path's is the child itself; a warm one's joined the container.
            "superexec itself": {k: v for k, v in _status(itself).items() if k != "NSpid"},
            "superexec's parent in the container": int(_status_field(itself, "PPid") != "0"),
            "/proc owners": owners,
            "scheduling": {"pid 1": _scheduling(pid1), "superexec": _scheduling(itself)},
        }
        # SIGTERM to the process the SuperNode started (cold the SuperExec; warm its shim, which passes it on).
        seen["superexec terminated"] = _terminate(superexec)
        log = re.sub(r"\d\d:\d\d:\d\d|\d+(\.\d+)?s", "T", container.log(tail=400))
        seen["superexec's last log line"] = [line for line in log.splitlines() if "SuperExec" in line][-1:]
        return seen


def test_a_warm_start_makes_the_same_container_as_the_cold_path() -> None:
    cold, warm = _seen(False), _seen(True)
    mine = _status(os.getpid())
    for seen in (cold, warm):
        assert seen["status"]["Uid"] != mine["Uid"] and seen["status"]["CapBnd"] != mine["CapBnd"], seen["status"]
        assert seen["status"]["NSpid"] == "1" and seen["comm"] == "flower-supernod"
        assert seen["hosts"] != re.sub(r"\d+\.\d+\.\d+\.\d+", "IP", Path("/etc/hosts").read_text())
        assert seen["superexec env"] != dict(os.environ)
        assert seen["/proc owners"] == {"pid 1": int(seen["status"]["Uid"].split()[0]), "superexec": 0}
        assert seen["superexec terminated"].startswith("exit status"), seen["superexec terminated"]
        # Its own session (start_new_session) is an autogroup wherever the kernel has them, whatever the harness's.
        autogroup = str(NICE) if Path("/proc/self/autogroup").exists() else "none"
        assert seen["scheduling"]["pid 1"] == {"nice": str(NICE), "autogroup": autogroup}
        assert seen["scheduling"]["pid 1"] != _scheduling(os.getpid())  # the harness's own differs
    cold_env, warm_env = cold.pop("superexec env"), warm.pop("superexec env")
    for env in (cold_env, warm_env):
        env.pop("HOSTNAME")  # the pod's name: another pod each time
        assert env.get("GRPC_VERBOSITY", "").upper() == "ERROR"  # what Flower's import sets, in both
    assert warm_env == cold_env
    assert cold["hostname"] == "e2e-supernode-a-0" and "e2e-superlink" in cold["hosts"]
    # The one difference, on purpose: the console scripts Flower starts are the shims, bound over the image's.
    overlays = [(re.sub(r"fe2e[0-9a-f]{4}", "ID", str(venv(HTTP_ERA) / "bin" / p)), "ro") for p in SPAWNED_PROGRAMS]
    assert sorted(set(warm["mounts"]) - set(cold["mounts"])) == sorted(overlays)
    assert set(cold["mounts"]) <= set(warm["mounts"])
    cold.pop("mounts"), warm.pop("mounts")
    # The SuperExec's parent: the SuperNode (cold); a warm one's is outside the container (0 inside it), as a
    # process that joined it with nsenter: Flower's SuperExec watches the SuperNode by its --parent-pid instead.
    assert (cold.pop("superexec's parent in the container"), warm.pop("superexec's parent in the container")) == (1, 0)
    assert warm == cold


# One line (a probe's detail keeps the end of its output): the exit code, whether the help names the runtime-api-address
# flag, and a digest of the whole help.
HELP = (
    "out=$({}flower-superexec --help 2>&1); rc=$?; "
    'echo "$out" | grep -q -- --runtime-api-address && f=runtime-api-address; '
    'echo "rc=$rc $f $(echo "$out" | md5sum)"'
)


def test_a_shim_runs_the_program_warm_and_itself_when_refused() -> None:
    """In a warm container, `flower-superexec --help` is the shim: run as the container's user it is served warm;
    with FLWR_TELEMETRY_LOGGING set (to its default: a variable Flower reads at import, which the server's import
    did not have) the server refuses and the shim runs the program itself. Both print the same help and exit 0; the
    server's log says which call it forked and which it refused."""
    with _supernode(True, "shim") as (cluster, container):
        deadline = time.monotonic() + 120  # a hang bound, as above
        while not (container.pid1 and container.launch_file) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert container.pid1 and container.launch_file, container.log()
        launch = json.loads(container.launch_file.read_text())
        server = next(s for s in servers() if str(s.dir) in json.dumps(launch["overlays"]))
        calls = server.log.read_text().count("\n")
        # A caller that goes away before its request (its container ended): no refusal, and the server serves on.
        gone = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        gone.connect(server.address)
        gone.close()
        outputs = []
        for prefix in ("", "FLWR_TELEMETRY_LOGGING=0 "):
            ok, detail = run_exec_probe(container.pid1, launch, ["sh", "-c", HELP.format(prefix) + "; exit 3"], 60)
            assert not ok and detail.startswith("exit 3: "), detail
            outputs.append(detail)
        assert outputs[0] == outputs[1] and "rc=0 runtime-api-address" in outputs[0], outputs
        new = server.log.read_text().splitlines()[calls:]
        superexec = str(venv(HTTP_ERA) / "bin" / "flower-superexec")
        assert f"join {superexec}: forked" in new, new
        assert "a caller (uid 0) went away before its request" in new, new
        assert len([line for line in new if "refused" in line]) == 1, new
        assert any(line.startswith(f"join {superexec}: refused: environment read at import differs") for line in new), (
            new
        )
        # What a failing scenario prints of the cluster shows the refusal too (the shim's fallback hides it).
        assert f"join {superexec}: refused: environment read at import differs" in cluster.logs(), cluster.logs()
