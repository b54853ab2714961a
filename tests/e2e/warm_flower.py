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
import struct
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
        _relay(conn, pid)
        code = 0
    except BaseException as exc:  # noqa: BLE001 - said to the harness, which fails the container's start
        with contextlib.suppress(OSError):
            conn.send(json.dumps({"error": f"{type(exc).__name__}: {exc}"}).encode())
    os._exit(code)


def _relay(conn: socket.socket, pid: int) -> None:
    """Until G ends: its exit code to the caller; G killed if the caller goes away first (it sends nothing more:
    readable means gone)."""
    pidfd = os.pidfd_open(pid)
    readable = select.select([conn, pidfd], [], [])[0]
    if conn in readable and pidfd not in readable:
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)
    _, status = os.waitpid(pid, 0)
    with contextlib.suppress(OSError):
        conn.send(json.dumps({"rc": os.waitstatus_to_exitcode(status)}).encode())


# -- a program a container's process starts (the shim, warm_shim.py, at the console script's path)
NAMESPACES = ("uts", "ipc", "net", "pid", "mnt")  # the order setns joins them in: the mount namespace last


def _caller(conn: socket.socket) -> dict[str, Any]:
    """Who called, from the host's view of its process: uid, gid, groups, no_new_privs, bounding set, nice."""
    pid, uid, gid = struct.unpack("3i", conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i")))
    status = dict(line.split(":", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines() if ":" in line)
    return {
        "uid": uid,
        "gid": gid,
        "groups": [int(g) for g in status["Groups"].split()],
        "noNewPrivs": status["NoNewPrivs"].strip() == "1",
        "dropAllCaps": int(status["CapBnd"], 16) == 0,
        "nice": os.getpriority(os.PRIO_PROCESS, pid),
    }


def _join_child(conn: socket.socket, req: dict[str, Any], fds: list[int], entries: dict[str, Any]) -> NoReturn:
    """C for a caller inside a container: its namespaces joined (the PID namespace for the fork), G runs the
    program with the caller's identity, descriptors, working dir, environment and argv."""
    code = 1
    try:
        user = _caller(conn)
        std, cwd, spaces = fds[:3], fds[3], fds[4:]
        for name, fd in zip(NAMESPACES, spaces, strict=True):
            _check(_libc.setns(fd, 0), f"setns {name}")
            os.close(fd)
        pid = os.fork()
        if pid == 0:
            conn.close()
            _joined(req, user, std, cwd, entries)
        for fd in (*std, cwd):
            os.close(fd)
        conn.send(json.dumps({"pid": pid}).encode())
        _relay(conn, pid)
        code = 0
    except BaseException as exc:  # noqa: BLE001 - said to the caller, which then runs the program itself
        with contextlib.suppress(OSError):
            conn.send(json.dumps({"refused": f"{type(exc).__name__}: {exc}"}).encode())
    os._exit(code)


def _joined(req: dict[str, Any], user: dict[str, Any], std: list[int], cwd: int, entries: dict[str, Any]) -> NoReturn:
    def become() -> object:
        _check(_libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0), "pdeathsig")
        os.setpriority(os.PRIO_PROCESS, 0, user["nice"])
        os.fchdir(cwd)
        os.close(cwd)
        for target, fd in enumerate(std):
            os.dup2(fd, target)
            os.close(fd)
        _become_user(user)
        return _run(req["script"], req["argv"], req["env"], entries)

    EXIT_AS_PYTHON(become)


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
        return _run(req["script"], [req["script"], *spec["argv"][1:]], spec["env"], entries)

    EXIT_AS_PYTHON(become)


def _run(script: str, argv: list[str], env: dict[str, str], entries: dict[str, Any]) -> object:
    """The console script's part: its name, environment, argv and sys.path, then its entry point."""
    _libc.prctl(PR_SET_NAME, os.path.basename(script).encode()[:15], 0, 0, 0)  # comm, as exec would set it
    os.environ.clear()
    os.environ.update(env)
    os.environ.update(IMPORT_SET)  # what Flower's import set in the environment, as it would have here
    if os.environ.get("PYTHONFAULTHANDLER"):  # python's start enables it so (the streams are new here)
        faulthandler.enable()
    sys.argv = list(argv)
    sys.path[0] = os.path.dirname(script)  # a script's directory comes first, as for the console script
    return entries[script]()


# -- the server
def serve(path: str, keyspec: dict[str, Any], entries: dict[str, Any]) -> None:
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    listener.bind(path)
    os.chmod(path, 0o666)  # the containers' users connect (the shims); who may ask what is checked per call
    listener.listen(64)
    signal.signal(signal.SIGCHLD, lambda *_: _reap())
    print("ready", flush=True)
    while True:
        readable = select.select([listener, sys.stdin], [], [])[0]
        if sys.stdin in readable:  # the harness ended, or closed it: no new containers
            return
        conn, _ = listener.accept()
        msg, fds, _, _ = socket.recv_fds(conn, 1 << 20, 3 + 1 + len(NAMESPACES))
        req = json.loads(msg) if msg else {}
        refusal = _refusal(conn, req, fds, keyspec, entries)
        # One line a call in the server's log: which ran warm, which were refused and why (tests read it).
        sys.stderr.write(f"{req.get('kind')} {req.get('script')}: {'refused: ' + refusal if refusal else 'forked'}\n")
        sys.stderr.flush()
        if refusal:
            with contextlib.suppress(OSError):
                conn.send(json.dumps({"refused": refusal}).encode())
        elif os.fork() == 0:
            listener.close()
            signal.signal(signal.SIGCHLD, signal.SIG_DFL)
            if req["kind"] == "pod":
                _child(conn, req, fds, entries)
            _join_child(conn, req, fds, entries)
        for fd in fds:
            os.close(fd)
        conn.close()


def _refusal(conn: socket.socket, req: dict[str, Any], fds: list[int], keyspec: dict[str, Any], entries: Any) -> str:
    """Why a call is not served ("" if it is): a container start only from root (the harness), a program only
    from another user (a root caller's capabilities would need exec to drop), with the environment Flower was
    imported with, and only a program this server imported."""
    uid = struct.unpack("3i", conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i")))[1]
    kind = req.get("kind")
    if kind == "pod" and uid == 0 and len(fds) == 3:
        return "" if req.get("script") in entries else f"not imported here: {req.get('script')}"
    if kind != "join" or uid == 0 or len(fds) != 3 + 1 + len(NAMESPACES):
        return f"not a call this server takes ({kind}, uid {uid}, {len(fds)} descriptors)"
    if req.get("script") not in entries:
        return f"not imported here: {req.get('script')}"
    names, prefixes = set(keyspec["names"]), tuple(keyspec["prefixes"])

    def key(env: dict[str, str]) -> list[list[str]]:
        return sorted([k, v] for k, v in env.items() if k in names or k.startswith(prefixes))

    imported_with = dict(keyspec["key"])
    # Either what this server imported with, or that as the import left it (Flower sets GRPC_VERBOSITY unless
    # set: a process it started has it, and importing again with it set gives the same state).
    if key(req.get("env", {})) not in (key(imported_with), key({**imported_with, **IMPORT_SET})):
        return f"environment read at import differs: {key(req.get('env', {}))} (imported with {keyspec['key']})"
    return ""


def _reap() -> None:
    with contextlib.suppress(ChildProcessError):
        while os.waitpid(-1, os.WNOHANG)[0]:
            pass


IMPORT_SET: dict[str, str] = {}


def main() -> None:
    path, keyspec, scripts = sys.argv[1], json.loads(sys.argv[2]), sys.argv[3:]
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
    serve(path, keyspec, entries)


if __name__ == "__main__":
    main()
