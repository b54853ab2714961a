"""Warm Flower for the e2e's containers: a Flower venv's python, run as root on the host, imports the entry points
of Flower's daemons and of what they start once (the console scripts' targets), then runs each such program as a
fork of itself instead of a new interpreter importing Flower anew (1.3-1.7 CPU-s a start, the e2e's largest cost:
CONTRIBUTING.md, CI time). Two kinds of call:

- **pod** (the harness, root): a container whose program is a Flower daemon. What the cold path does
  (harness/host.py `ns_exec`: `ip netns exec NETNS unshare --pid --fork --kill-child --mount-proc --uts python
  podinit.py SPEC`, then setpriv and the console script), in the same order: a child C takes its own session, the
  pod's network namespace and `ip netns exec`'s view (a mount namespace where /etc/netns/NETNS/* are bound over
  /etc and /sys is the namespace's), new mount, UTS and PID namespaces (propagation private) and forks G, PID 1
  of that PID namespace: /proc mounted for it, killed when C dies (`--kill-child`), podinit's own steps
  (podinit.setup: volumes, the image's paths, the read-only root, hostname, working dir).
- **join** (warm_shim.py, bound over a console script in a warm container, run by whoever starts the program
  there: Flower's SuperNode its SuperExec, a SuperExec its ClientApps): C joins the caller's namespaces (the PID
  namespace for its fork) and forks G, in the caller's session's place (a session of its own, the caller's
  autogroup niceness), working dir and descriptors.

Then G becomes the caller's or the container's user as setpriv does (bounding set, groups, gid, uid,
no_new_privs; dumpable again, as exec would leave it; nothing effective, permitted or inheritable left, checked),
takes its environment (with what Flower's import set in it, e.g. GRPC_VERBOSITY), argv and name, and runs the
entry point, ending as python ends (tests/support/flwr_forkserver.py `exit_as_python`). G waits for C's "go"
before any of that: C first tells its caller G's PID (in the container's PID namespace too, for the shim to pass
signals on), and if C cannot, G is killed before it ran anything, so a refused call never runs twice.

C answers {"pid", "nspid"}, then {"rc"} when G ended; a caller that goes away (its connection closes) has G
killed. The server refuses (and logs why, one line a call) a pod call not from root, a join call from root (a root
caller's capabilities would need exec to drop), a program it did not import, and a caller whose environment
differs in what Flower or Python read at import (the harness keys servers by it: harness/warm.py); the shim then
runs the program itself. Each version's `process` federation runs cold throughout, so the console scripts and the
exec stay proven. The kernel's /proc/PID/cmdline of a warm program is this server's (changing it needs
CAP_SYS_RESOURCE); the harness reports a warm PID 1's intended command line (cluster_processes.py).

Standard library only. `python warm_flower.py SOCKET KEYSPEC SCRIPT...` (no -I: Python's start reads the
environment the harness gives it, the container's); "ready" on stdout once it listens; it exits when its stdin
closes (the harness ended).
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
CLONE_NEWNS, CLONE_NEWUTS, CLONE_NEWIPC = 0x00020000, 0x04000000, 0x08000000
CLONE_NEWPID, CLONE_NEWNET = 0x20000000, 0x40000000
MS_NOSUID, MS_NODEV, MS_NOEXEC, MS_BIND, MS_REC, MS_PRIVATE, MS_SLAVE = 2, 4, 8, 4096, 16384, 1 << 18, 1 << 19
MNT_DETACH = 2
PR_SET_PDEATHSIG, PR_SET_DUMPABLE, PR_SET_NAME, PR_CAPBSET_DROP, PR_SET_NO_NEW_PRIVS = 1, 4, 15, 24, 38
SO_PEERGROUPS = 59
# The caller's namespaces, in the order C joins them (the mount namespace last: its root becomes C's), each with
# the type setns must find.
NAMESPACES = (("uts", CLONE_NEWUTS), ("ipc", CLONE_NEWIPC), ("net", CLONE_NEWNET), ("pid", CLONE_NEWPID))
NAMESPACES += (("mnt", CLONE_NEWNS),)
# Bounds on a caller that stalls (stopped between its connect and its request): the server serves others meanwhile.
REQUEST_SECONDS = 10.0

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
        raise ValueError(f"{script} is not a console script")
    return f"{found[1]}:{found[2]}"


def _entry(target: str) -> Any:
    module, _, attr = target.partition(":")
    return getattr(importlib.import_module(module), attr)


def peer(conn: socket.socket) -> tuple[int, int, int]:
    """(pid, uid, gid) of the process at the other end, as the kernel recorded it at connect."""
    pid, uid, gid = struct.unpack("3i", conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i")))
    return pid, uid, gid


# -- C, a pod: the pod's network namespace, then the container's new namespaces
def _netns_exec(netns: str) -> None:
    """What `ip netns exec NETNS` does before it runs its command (iproute2's netns_switch and bind_etc): as there,
    /sys not unmounted (none was mounted) and an /etc entry not bound are no failure; a new /sys is."""
    fd = os.open(f"/run/netns/{netns}", os.O_RDONLY | os.O_CLOEXEC)
    _check(_libc.setns(fd, CLONE_NEWNET), f"setns {netns}")
    os.close(fd)
    _check(_libc.unshare(CLONE_NEWNS), "unshare mount")
    _check(_libc.mount(b"", b"/", b"none", MS_SLAVE | MS_REC, None), "mount --make-rslave /")
    _libc.umount2(b"/sys", MNT_DETACH)
    _check(_libc.mount(netns.encode(), b"/sys", b"sysfs", 0, None), "mount /sys")
    etc = Path("/etc/netns") / netns
    if etc.is_dir():
        for entry in sorted(etc.iterdir()):
            if _libc.mount(str(entry).encode(), f"/etc/{entry.name}".encode(), b"none", MS_BIND, None) != 0:
                sys.stderr.write(f"warm_flower: bind {entry} failed: {os.strerror(ctypes.get_errno())}\n")


def _pod_child(conn: socket.socket, req: dict[str, Any], fds: list[int], entries: dict[str, Any]) -> NoReturn:
    def prepare() -> None:
        os.setsid()  # the container's session (the cold path: Popen's start_new_session)
        nice = int(req.get("nice") or 0)
        if nice:
            # The processes' own niceness; the session's autogroup niceness is written by the harness
            # (containers.Container._yield_cpu), for cold and warm containers alike.
            os.nice(nice)
        _netns_exec(req["netns"])
        _check(_libc.unshare(CLONE_NEWNS | CLONE_NEWUTS | CLONE_NEWPID), "unshare")
        _check(_libc.mount(b"none", b"/", None, MS_REC | MS_PRIVATE, None), "mount --make-rprivate /")

    def become(ready: Any) -> object:
        _check(_libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0), "pdeathsig")  # unshare --kill-child
        for target, fd in enumerate(fds):
            os.dup2(fd, target)
            os.close(fd)
        _check(_libc.mount(b"none", b"/proc", None, MS_REC | MS_PRIVATE, None), "mount --make-rprivate /proc")
        _check(_libc.mount(b"proc", b"/proc", b"proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, None), "mount /proc")
        spec = json.loads(Path(req["spec"]).read_text())
        PODINIT.setup(spec)  # exits 127 as podinit does when the container cannot be made
        ready()  # the mounts are done: the harness may join them (its probes) from here on
        _become_user(spec["user"])
        return _run(req["script"], [req["script"], *spec["argv"][1:]], spec["env"], entries)

    _fork_and_relay(conn, fds, prepare, become)


# -- C, a join: the caller's namespaces
def _caller(conn: socket.socket) -> dict[str, Any]:
    """Who called: uid, gid and groups as the kernel recorded them at connect; no_new_privs, the bounding set and
    the autogroup's niceness from its process, read while a pidfd proves it is still the caller (not a process
    that took its PID since)."""
    pid, uid, gid = peer(conn)
    raw = conn.getsockopt(socket.SOL_SOCKET, SO_PEERGROUPS, 4 * 256)
    groups = list(struct.unpack(f"{len(raw) // 4}I", raw))
    pidfd = os.pidfd_open(pid)
    status = _proc_status(pid)
    autogroup = Path(f"/proc/{pid}/autogroup").read_text().split()
    nice = os.getpriority(os.PRIO_PROCESS, pid)
    if select.select([pidfd], [], [], 0)[0]:  # readable: it has ended, so what was read may be another's
        raise OSError(f"caller {pid} ended while it was read")
    os.close(pidfd)
    return {
        "uid": uid,
        "gid": gid,
        "groups": groups,
        "noNewPrivs": status["NoNewPrivs"] == "1",
        "dropAllCaps": int(status["CapBnd"], 16) == 0,
        "nice": nice,
        "autogroupNice": int(autogroup[-1]) if autogroup[-2:-1] == ["nice"] else 0,
    }


def _proc_status(pid: int | str) -> dict[str, str]:
    """/proc/PID/status as {field: value}, e.g. {"NoNewPrivs": "1", "CapBnd": "000001ffffffffff"}."""
    lines = Path(f"/proc/{pid}/status").read_text().splitlines()
    return {key: value.strip() for key, _, value in (line.partition(":") for line in lines)}


def _join_child(conn: socket.socket, req: dict[str, Any], fds: list[int], entries: dict[str, Any]) -> NoReturn:
    std, cwd, spaces = fds[:3], fds[3], fds[4:]
    user = _caller_or_refuse(conn)

    def prepare() -> None:
        os.setsid()  # not the server's session (the harness's terminal): one of its own, as nice as the caller's
        _autogroup(user["autogroupNice"])
        for (name, kind), fd in zip(NAMESPACES, spaces, strict=True):
            _check(_libc.setns(fd, kind), f"setns {name}")  # closed after the fork, with the rest (not before:
            # a descriptor number closed here would be the next pipe's, which the loop there would close)

    def become(ready: Any) -> object:
        _check(_libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0), "pdeathsig")
        for fd in spaces:
            os.close(fd)
        ready()
        os.setpriority(os.PRIO_PROCESS, 0, user["nice"])
        os.fchdir(cwd)
        os.close(cwd)
        for target, fd in enumerate(std):
            os.dup2(fd, target)
            os.close(fd)
        _become_user(user)
        return _run(req["script"], req["argv"], req["env"], entries)

    _fork_and_relay(conn, fds, prepare, become)


def _caller_or_refuse(conn: socket.socket) -> dict[str, Any]:
    try:
        return _caller(conn)
    except Exception as exc:  # noqa: BLE001 - nothing ran yet: the caller runs the program itself
        with contextlib.suppress(OSError):
            conn.send(json.dumps({"refused": f"{type(exc).__name__}: {exc}"}).encode())
        os._exit(1)


def _autogroup(nice: int) -> None:
    with contextlib.suppress(OSError), open("/proc/self/autogroup", "w") as f:
        f.write(str(nice))


# -- C's part common to both: fork G, tell the caller, let G go, relay its end
def _fork_and_relay(conn: socket.socket, fds: list[int], prepare: Any, become: Any) -> NoReturn:
    """C: `prepare` (its namespaces), then G forked, which runs `become(ready)` but waits for C's go first. C
    answers {"pid", "nspid"} once G called ready() (or ended), lets G go, then answers {"rc"}. Until the go, any
    failure kills G before it ran anything and refuses the call; after it, a failure or a caller gone kills G."""
    pid = 0
    went = False
    try:
        prepare()
        ready_r, ready_w = os.pipe()
        go_r, go_w = os.pipe()
        pid = os.fork()
        if pid == 0:
            conn.close()
            os.close(ready_r)
            os.close(go_w)

            def ready() -> None:
                os.write(ready_w, str(os.getpid()).encode())  # its PID in the caller's PID namespace
                os.close(ready_w)
                if os.read(go_r, 1) != b"1":  # C is gone, or refused: run nothing
                    os._exit(1)
                os.close(go_r)

            EXIT_AS_PYTHON(lambda: become(ready))
        os.close(ready_w)
        os.close(go_r)
        for fd in fds:
            os.close(fd)
        nspid = os.read(ready_r, 32)  # EOF: G ended first (podinit could not make the container)
        os.close(ready_r)
        conn.send(json.dumps({"pid": pid, "nspid": int(nspid) if nspid else 0}).encode())
        if nspid:  # else G has ended already: its exit code follows
            os.write(go_w, b"1")
            went = True
        os.close(go_w)
        _relay(conn, pid)
        os._exit(0)
    except BaseException as exc:  # noqa: BLE001 - said to the caller; G never outlives C's failure
        sys.stderr.write(f"  call failed {'after' if went else 'before'} the go: {type(exc).__name__}: {exc}\n")
        if pid:
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
            with contextlib.suppress(ChildProcessError):
                os.waitpid(pid, 0)
        with contextlib.suppress(OSError):
            conn.send(json.dumps({"error" if went else "refused": f"{type(exc).__name__}: {exc}"}).encode())
        os._exit(1)


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


# -- G: the program
def _become_user(user: dict[str, Any]) -> None:
    """setpriv's steps (podinit.privileges), in this process: the bounding set first (it needs CAP_SETPCAP), then
    groups, gid, uid (from root to another uid the kernel clears the permitted and effective sets), then
    no_new_privs; dumpable again (a uid change without exec clears it: /proc/self would be root's); PDEATHSIG
    again (the uid change cleared it too). Checked: no capability left in any set."""
    if user.get("dropAllCaps"):
        last = int(Path("/proc/sys/kernel/cap_last_cap").read_text())
        for cap in range(last + 1):
            _check(_libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0), f"drop capability {cap}")
    parent = os.getppid()
    os.setgroups([int(g) for g in user.get("groups") or []])
    os.setresgid(int(user["gid"]), int(user["gid"]), int(user["gid"]))
    os.setresuid(int(user["uid"]), int(user["uid"]), int(user["uid"]))
    if user.get("noNewPrivs"):
        _check(_libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "no_new_privs")
    _check(_libc.prctl(PR_SET_DUMPABLE, 1, 0, 0, 0), "dumpable")
    _check(_libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0), "pdeathsig")
    if os.getppid() != parent:  # C died before PDEATHSIG was set again
        os._exit(1)
    status = _proc_status("self")
    left = {k: status[k] for k in ("CapInh", "CapPrm", "CapEff", "CapAmb") if int(status[k], 16)}
    if left:
        raise SystemExit(f"warm_flower: capabilities left after the user change: {left}")


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
        if sys.stdin in readable:  # the harness ended, or closed it: no new calls
            return
        conn, _ = listener.accept()
        fds: list[int] = []
        try:
            conn.settimeout(REQUEST_SECONDS)
            msg, fds, _, _ = socket.recv_fds(conn, 1 << 20, 3 + 1 + len(NAMESPACES))
            conn.settimeout(None)
            if not msg and not fds:  # the caller went away before its request (its container ended): nothing to do
                sys.stderr.write(f"a caller (uid {peer(conn)[1]}) went away before its request\n")
                conn.close()
                continue
            req = json.loads(msg)
            refusal = _refusal(conn, req, fds, keyspec, entries)
        except (OSError, ValueError, TypeError, AttributeError) as exc:  # a caller that stalled or sent garbage
            req, refusal = {}, f"bad request: {type(exc).__name__}: {exc}"
        # One line a call in the server's log: which ran warm, which were refused and why (the e2e reads it).
        sys.stderr.write(f"{req.get('kind')} {req.get('script')}: {'refused: ' + refusal if refusal else 'forked'}\n")
        sys.stderr.flush()
        if refusal:
            with contextlib.suppress(OSError):
                conn.send(json.dumps({"refused": refusal}).encode())
        elif os.fork() == 0:
            listener.close()
            signal.signal(signal.SIGCHLD, signal.SIG_DFL)
            if req["kind"] == "pod":
                _pod_child(conn, req, fds, entries)
            _join_child(conn, req, fds, entries)
        for fd in fds:
            os.close(fd)
        conn.close()


def _refusal(conn: socket.socket, req: Any, fds: list[int], keyspec: dict[str, Any], entries: Any) -> str:
    """Why a call is not served ("" if it is): a container start only from root (the harness), a program only
    from another user (a root caller's capabilities would need exec to drop), with the environment Flower was
    imported with, and only a program this server imported."""
    uid = peer(conn)[1]
    if not isinstance(req, dict) or not isinstance(req.get("env", {}), dict):
        return "not a request"
    kind = req.get("kind")
    if kind == "pod" and uid == 0 and len(fds) == 3:
        return "" if req.get("script") in entries else f"not imported here: {req.get('script')}"
    if kind != "join" or uid == 0 or len(fds) != 3 + 1 + len(NAMESPACES):
        return f"not a call this server takes ({kind}, uid {uid}, {len(fds)} descriptors)"
    if req.get("script") not in entries or not isinstance(req.get("argv"), list):
        return f"not imported here: {req.get('script')}"
    names, prefixes = set(keyspec["names"]), tuple(keyspec["prefixes"])

    def key(env: dict[str, str]) -> list[list[str]]:
        return sorted([k, v] for k, v in env.items() if k in names or k.startswith(prefixes))

    imported_with = dict(keyspec["key"])
    # Either what this server imported with, or that as the import left it (Flower sets GRPC_VERBOSITY unless
    # set: a process it started has it, and importing again with it set gives the same state).
    if key(req["env"]) not in (key(imported_with), key({**imported_with, **IMPORT_SET})):
        return f"environment read at import differs: {key(req['env'])} (imported with {keyspec['key']})"
    return ""


def _reap() -> None:
    with contextlib.suppress(ChildProcessError):
        while os.waitpid(-1, os.WNOHANG)[0]:
            pass


IMPORT_SET: dict[str, str] = {}


def main() -> None:
    path, keyspec, scripts = sys.argv[1], json.loads(sys.argv[2]), sys.argv[3:]
    # As the console scripts have it: their directory first on sys.path (not this file's: tests/e2e holds an
    # `app` package of its own).
    sys.path[0] = os.path.dirname(scripts[0])
    # Before Flower's import: OpenBLAS would start a worker thread per core, which a fork copies without their
    # state. Unless the container's environment says how many (it is part of the key), the programs run with one.
    before = dict(os.environ)
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    entries = {script: _entry(console_target(Path(script))) for script in scripts}
    if "OPENBLAS_NUM_THREADS" not in before:
        del os.environ["OPENBLAS_NUM_THREADS"]
    IMPORT_SET.update({k: v for k, v in os.environ.items() if before.get(k) != v})
    tasks = os.listdir("/proc/self/task")
    if threading.active_count() != 1 or len(tasks) != 1:
        raise SystemExit(f"warm_flower: importing {scripts} started threads ({len(tasks)} tasks): forks copy them")
    serve(path, keyspec, entries)


if __name__ == "__main__":
    main()
