"""Warm Flower for the e2e's containers: a Flower venv's python, run as root on the host, imports the entry points
of Flower's daemons once (the console scripts' targets, `flower-supernode` and `flower-superexec`), then starts
each container whose program is one of them as a fork of itself instead of a new interpreter importing Flower
anew (1.3-1.7 CPU-s a start, the e2e's largest cost: CONTRIBUTING.md, CI time).

What the cold path does (harness/host.py `ns_exec`: `ip netns exec NETNS unshare --pid --fork --kill-child
--mount-proc --uts python podinit.py SPEC`, then setpriv and the console script), a call does in the same order:

- a child C: its own session (the container's), the pod's network namespace and `ip netns exec`'s view (a mount
  namespace where /etc/netns/NETNS/* are bound over /etc and /sys is the namespace's), then new mount, UTS and
  PID namespaces (propagation private, as unshare's) and a fork;
- the grandchild G, PID 1 of that PID namespace: /proc mounted for it, killed when C dies (`--kill-child`),
  podinit's steps (podinit.setup: volumes, the image's paths, the read-only root, hostname, working dir), then
  setpriv's (supplementary groups, gid, uid, no_new_privs, an empty capability bounding set), the container's
  environment (with what Flower's import set in it, e.g. GRPC_VERBOSITY), its argv as the console script sees
  it, and the entry point, ending as python ends (tests/support/flwr_forkserver.py `exit_as_python`).

C answers the harness {"pid": G} once G's mounts are done (the harness's probes may join them from then on),
then {"rc"} when G ended; a harness that goes away (its connection closes) has G killed. Only non-root
containers are started warm (a root container's capabilities would need exec to drop) and only when the
variables Flower's modules read at import are what this server imported Flower with (the harness keys servers
by them: harness/warm.py); the rest run cold. Each version's `process` federation runs cold throughout, so the
console scripts and the exec stay proven.

Standard library only. `python -I warm_flower.py ADDRESS PROGRAM...`; "ready" on stdout once it listens; it
exits when its stdin closes (the harness ended).
"""

from __future__ import annotations

import contextlib
import ctypes
import faulthandler
import importlib
import importlib.util
import json
import os
import re
import select
import signal
import socket
import sys
import threading
from pathlib import Path
from typing import Any, NoReturn

HERE = Path(__file__).resolve().parent
CLONE_NEWNS, CLONE_NEWUTS, CLONE_NEWPID, CLONE_NEWNET = 0x00020000, 0x04000000, 0x20000000, 0x40000000
MS_NOSUID, MS_NODEV, MS_NOEXEC, MS_BIND, MS_REC, MS_PRIVATE, MS_SLAVE = 2, 4, 8, 4096, 16384, 1 << 18, 1 << 19
MNT_DETACH = 2
PR_SET_PDEATHSIG, PR_SET_NAME, PR_CAPBSET_DROP, PR_SET_NO_NEW_PRIVS = 1, 15, 24, 38

_libc = ctypes.CDLL(None, use_errno=True)


def _check(rc: int, what: str) -> None:
    if rc != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")


def _load(name: str, path: Path) -> Any:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# Loaded by path (this directory is not on sys.path): the cold path's own steps and ending, not copies.
PODINIT = _load("podinit", HERE / "podinit.py")
EXIT_AS_PYTHON = _load("flwr_forkserver", HERE.parent / "support" / "flwr_forkserver.py").exit_as_python


def console_target(script: Path) -> str:
    """`module:attr` of a console script (`from flwr.supernode.cli import flower_supernode` ...)."""
    found = re.search(r"^from (\S+) import (\w+)$", script.read_text(), re.MULTILINE)
    if not found:
        raise SystemExit(f"warm_flower: {script} is not a console script")
    return f"{found[1]}:{found[2]}"


def _entry(target: str) -> Any:
    module, _, attr = target.partition(":")
    return getattr(importlib.import_module(module), attr)


# -- the child C: the pod's network namespace, then the container's new namespaces
def _netns_exec(netns: str) -> None:
    """What `ip netns exec NETNS` does before it runs its command (iproute2's netns_switch and bind_etc)."""
    fd = os.open(f"/run/netns/{netns}", os.O_RDONLY | os.O_CLOEXEC)
    _check(_libc.setns(fd, CLONE_NEWNET), f"setns {netns}")
    os.close(fd)
    _check(_libc.unshare(CLONE_NEWNS), "unshare mount")
    _check(_libc.mount(b"", b"/", b"none", MS_SLAVE | MS_REC, None), "mount --make-rslave /")
    _check(_libc.umount2(b"/sys", MNT_DETACH), "umount /sys")
    _check(_libc.mount(netns.encode(), b"/sys", b"sysfs", 0, None), "mount /sys")
    etc = Path("/etc/netns") / netns
    if etc.is_dir():
        for entry in sorted(etc.iterdir()):
            target = f"/etc/{entry.name}".encode()
            _check(_libc.mount(str(entry).encode(), target, b"none", MS_BIND, None), f"bind {entry}")


def _child(conn: socket.socket, req: dict[str, Any], fds: list[int], entries: dict[str, Any]) -> NoReturn:
    code = 1
    try:
        os.setsid()  # the container's session (the cold path: Popen's start_new_session)
        nice = int(req.get("nice") or 0)
        if nice:
            os.nice(nice)
            with contextlib.suppress(OSError), open("/proc/self/autogroup", "w") as f:
                f.write(str(nice))  # as containers.Container._yield_cpu does for the cold path's session
        _netns_exec(req["netns"])
        _check(_libc.unshare(CLONE_NEWNS | CLONE_NEWUTS | CLONE_NEWPID), "unshare")
        _check(_libc.mount(b"none", b"/", None, MS_REC | MS_PRIVATE, None), "mount --make-rprivate /")
        ready_r, ready_w = os.pipe()
        pid = os.fork()
        if pid == 0:
            conn.close()
            os.close(ready_r)
            _grandchild(req, fds, entries, ready_w)
        os.close(ready_w)
        for fd in fds:
            os.close(fd)
        os.read(ready_r, 1)  # "1" when G's mounts are done; EOF when it failed first (its exit code follows)
        os.close(ready_r)
        conn.send(json.dumps({"pid": pid}).encode())
        pidfd = os.pidfd_open(pid)
        while True:
            readable = select.select([conn, pidfd], [], [])[0]
            if conn in readable and pidfd not in readable:  # the harness sends nothing more: it went away
                with contextlib.suppress(OSError):
                    os.kill(pid, signal.SIGKILL)
                select.select([pidfd], [], [])
            _, status = os.waitpid(pid, 0)
            with contextlib.suppress(OSError):
                conn.send(json.dumps({"rc": os.waitstatus_to_exitcode(status)}).encode())
            code = 0
            break
    except BaseException as exc:  # noqa: BLE001 - said to the harness, which fails the container's start
        with contextlib.suppress(OSError):
            conn.send(json.dumps({"error": f"{type(exc).__name__}: {exc}"}).encode())
    os._exit(code)


# -- the grandchild G: PID 1 of the container, becoming its program
def _become_user(user: dict[str, Any]) -> None:
    """setpriv's steps (podinit.privileges), in this process: the bounding set first (it needs CAP_SETPCAP), then
    groups, gid, uid (from root to another uid the kernel clears the permitted and effective sets), then
    no_new_privs."""
    if user.get("dropAllCaps"):
        last = int(Path("/proc/sys/kernel/cap_last_cap").read_text())
        for cap in range(last + 1):
            _check(_libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0), f"drop capability {cap}")
    os.setgroups([int(g) for g in user.get("groups") or []])
    os.setresgid(int(user["gid"]), int(user["gid"]), int(user["gid"]))
    os.setresuid(int(user["uid"]), int(user["uid"]), int(user["uid"]))
    if user.get("noNewPrivs"):
        _check(_libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "no_new_privs")


def _grandchild(req: dict[str, Any], fds: list[int], entries: dict[str, Any], ready_w: int) -> NoReturn:
    def become() -> object:
        _check(_libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0), "pdeathsig")  # unshare --kill-child
        for target, fd in enumerate(fds):
            os.dup2(fd, target)
            os.close(fd)
        _check(_libc.mount(b"none", b"/proc", None, MS_REC | MS_PRIVATE, None), "mount --make-rprivate /proc")
        _check(_libc.mount(b"proc", b"/proc", b"proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, None), "mount /proc")
        spec = json.loads(Path(req["spec"]).read_text())
        PODINIT.setup(spec)
        os.write(ready_w, b"1")
        os.close(ready_w)
        _become_user(spec["user"])
        script = req["script"]
        _libc.prctl(PR_SET_NAME, os.path.basename(script).encode()[:15], 0, 0, 0)  # comm, as exec would set it
        os.environ.clear()
        os.environ.update(spec["env"])
        os.environ.update(IMPORT_SET)  # what Flower's import set in the environment, as it would have here
        if os.environ.get("PYTHONFAULTHANDLER"):  # python's start enables it so (the streams are new here)
            faulthandler.enable()
        sys.argv = [script, *spec["argv"][1:]]
        sys.path[0] = os.path.dirname(script)  # a script's directory comes first, as for the console script
        return entries[script]()

    EXIT_AS_PYTHON(become)


# -- the server
def serve(address: bytes, entries: dict[str, Any]) -> None:
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    listener.bind(address)
    listener.listen(64)
    signal.signal(signal.SIGCHLD, lambda *_: _reap())
    print("ready", flush=True)
    while True:
        readable = select.select([listener, sys.stdin], [], [])[0]
        if sys.stdin in readable:  # the harness ended, or closed it: no new containers
            return
        conn, _ = listener.accept()
        msg, fds, _, _ = socket.recv_fds(conn, 1 << 16, 3)
        if len(fds) != 3 or not msg:
            for fd in fds:
                os.close(fd)
            conn.close()
            continue
        req = json.loads(msg)
        if os.fork() == 0:
            listener.close()
            signal.signal(signal.SIGCHLD, signal.SIG_DFL)
            _child(conn, req, fds, entries)
        for fd in fds:
            os.close(fd)
        conn.close()


def _reap() -> None:
    with contextlib.suppress(ChildProcessError):
        while os.waitpid(-1, os.WNOHANG)[0]:
            pass


IMPORT_SET: dict[str, str] = {}


def main() -> None:
    address, scripts = sys.argv[1], sys.argv[2:]
    # Before Flower's import: OpenBLAS would start worker threads, which a fork copies without their state. The
    # containers' programs run with their own environment (OPENBLAS_NUM_THREADS included if they set it).
    before = dict(os.environ)
    os.environ["OPENBLAS_NUM_THREADS"] = "1"
    entries = {script: _entry(console_target(Path(script))) for script in scripts}
    del os.environ["OPENBLAS_NUM_THREADS"]
    IMPORT_SET.update({k: v for k, v in os.environ.items() if before.get(k) != v})
    tasks = os.listdir("/proc/self/task")
    if threading.active_count() != 1 or len(tasks) != 1:
        raise SystemExit(
            f"warm_flower: importing {scripts} started threads ({len(tasks)} tasks): forks would copy them"
        )
    serve(b"\0" + address.encode(), entries)


if __name__ == "__main__":
    main()
