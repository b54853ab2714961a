"""The container runtime's last step, run as root inside a container's namespaces.

The harness starts every container as

    ip netns exec <pod netns> unshare --pid --fork --kill-child --mount-proc --uts \
        <python> podinit.py <spec.json>

so the container has the pod's network namespace (shared by the pod's containers), its
own mount, UTS and PID namespaces, and is PID 1 of the latter: when it exits, the kernel
kills every process it left behind (Flower's SuperExecs and app processes included),
as when a container's init exits. This script then does what runc does before exec:

1. bind-mounts each volume's host directory (or subPath) at its mountPath, read-only
   where the mount or the volume type says so, parents before children (sources are
   opened first and mounted through /proc/self/fd, since a mount at e.g. /tmp would
   hide the host directories the later sources live in);
   then makes the directories the "image" needs reachable (see _expose);
2. remounts `/` read-only for readOnlyRootFilesystem;
3. sets the hostname (the pod's name);
4. gives the container's stdout and stderr (its log file) to runAsUser, as runc's
   fixStdioPermissions does, so the program may open /dev/stdout itself (nginx images
   log there);
5. execs the program through `setpriv`: runAsUser/runAsGroup, supplementary groups
   (fsGroup, supplementalGroups), no_new_privs for allowPrivilegeEscalation=false, an
   empty capability bounding set for `drop: [ALL]`; with the container's environment
   only, in its workingDir.

Only the standard library: it runs under whichever Python starts it.
Spec (JSON): {"mounts": [{"source", "target", "readOnly"}], "overlays": [{"source", "target"}], "hostname",
"readOnlyRoot",
"user": {"uid", "gid", "groups", "noNewPrivs", "dropAllCaps"} or null (stay root),
"expose": [{"mask": "/root", "paths": [...]}], "image": [venv, interpreter prefix],
"setpriv": host path of setpriv, "env": {...}, "argv": [...], "cwd": "..."}.
"""

import ctypes
import json
import os
import socket
import stat
import sys

_libc = ctypes.CDLL(None, use_errno=True)
MS_RDONLY, MS_REMOUNT, MS_BIND = 1, 32, 4096


def _mount(source, target: str, fstype=None, flags: int = 0, data=None) -> None:
    """mount(2) itself: mount(8) would canonicalize a /proc/self/fd source to a path."""
    enc = lambda v: v.encode() if isinstance(v, str) else v  # noqa: E731
    if _libc.mount(enc(source), enc(target), enc(fstype), flags, enc(data)) != 0:
        err = ctypes.get_errno()
        sys.stderr.write(f"podinit: mount {source} -> {target} failed: {os.strerror(err)}\n")
        sys.exit(127)


def _bind(fd: int, target: str, read_only: bool) -> None:
    _mount(f"/proc/self/fd/{fd}", target, None, MS_BIND)
    if read_only:
        _mount(None, target, None, MS_REMOUNT | MS_BIND | MS_RDONLY)


def _same(path: str, st: os.stat_result) -> bool:
    try:
        cur = os.stat(path)
    except OSError:
        return False
    return (cur.st_dev, cur.st_ino) == (st.st_dev, st.st_ino)


def _hold_image(entries: list, image: list) -> tuple[list, list]:
    """Before any mount: the masks' identities and fds of the image's directories (the
    Flower venv and its base interpreter), which volume mounts (an emptyDir at /tmp) or
    masks may hide afterwards."""
    masks = [(e["mask"], os.stat(e["mask"])) for e in entries]
    paths = sorted({p for e in entries for p in e["paths"]} | set(image))
    return masks, [(p, os.open(p, os.O_PATH)) for p in paths]


def _expose(masks: list, paths: list) -> None:
    """Make the image's directories reachable for the container user at their own
    paths: a tmpfs over each first ancestor that user cannot search (e.g. /root, mode
    0700) unless a volume already hides it, then every image directory that is no
    longer the host's is bound back, read-only."""
    for mask, st in masks:
        if _same(mask, st):
            _mount("tmpfs", mask, "tmpfs", 0, "mode=0755,size=64k")
    for path, fd in paths:
        if not _same(path, os.fstat(fd)):
            os.makedirs(path, mode=0o755, exist_ok=True)
            _bind(fd, path, read_only=True)
        os.close(fd)


def _own_stdio(uid: int) -> None:
    """runc's fixStdioPermissions: stdin, stdout and stderr, created outside the container,
    become the container user's (their uid only; /dev/null is left alone, as is whatever
    cannot be changed)."""
    null = os.stat("/dev/null").st_rdev
    for fd in (0, 1, 2):
        try:
            st = os.fstat(fd)
            if st.st_uid == uid or (stat.S_ISCHR(st.st_mode) and st.st_rdev == null):
                continue
            os.fchown(fd, uid, -1)
        except OSError:
            pass


def main() -> None:
    with open(sys.argv[1], encoding="utf-8") as f:
        spec = json.load(f)
    setup(spec)
    argv = list(spec["argv"])
    user = spec.get("user")
    if user is not None:
        argv = [*privileges(user, "setpriv"), *argv]
    env = spec["env"]
    sys.stdout.flush()
    sys.stderr.flush()
    try:
        # setpriv comes from the host; the program it runs is looked up on the
        # container's PATH, as the image's entrypoint would be.
        os.execve(spec["setpriv"] if user is not None else which(argv[0], env), argv, env)
    except OSError as exc:
        sys.stderr.write(f"podinit: exec {argv[0]}: {exc}\n")
        sys.exit(127)


def setup(spec: dict) -> None:
    """Steps 1-4 and the working dir, as root in the container's namespaces: all but the exec. The e2e's warm
    Flower (warm_flower.py) runs them too, in the forked process that becomes the container's program."""
    masks, image = _hold_image(spec.get("expose") or [], spec.get("image") or [])
    mounts = sorted(spec["mounts"], key=lambda m: m["target"].rstrip("/").count("/"))
    # Hold every source before mounting anything: a mount (e.g. an emptyDir at /tmp) may
    # hide where later sources live on the host.
    sources = [os.open(m["source"], os.O_PATH) for m in mounts]
    for m, fd in zip(mounts, sources, strict=False):
        _bind(fd, m["target"], bool(m.get("readOnly")))
    for fd in sources:
        os.close(fd)
    _expose(masks, image)
    # A warm cluster's console scripts (harness/warm.py): each bound over the image's script of its name.
    for overlay in spec.get("overlays") or []:
        fd = os.open(overlay["source"], os.O_PATH)
        _bind(fd, overlay["target"], read_only=True)
        os.close(fd)
    if spec.get("user") is not None:
        _own_stdio(int(spec["user"]["uid"]))
    if spec.get("readOnlyRoot"):
        _mount(None, "/", None, MS_REMOUNT | MS_BIND | MS_RDONLY)
    if spec.get("hostname"):
        socket.sethostname(spec["hostname"])
    try:
        os.chdir(spec.get("cwd") or "/")
    except OSError as exc:
        sys.stderr.write(f"podinit: workingDir {spec.get('cwd')}: {exc}\n")
        sys.exit(127)


def privileges(user: dict, setpriv: str) -> list:
    """The `setpriv` prefix that runs a program as the container's user: runAsUser/runAsGroup, supplementary
    groups, no_new_privs, an empty capability bounding set. The container's exec probes (harness/probes.py)
    take on the same identity, as runc exec does."""
    wrap = [setpriv, f"--reuid={user['uid']}", f"--regid={user['gid']}"]
    groups = user.get("groups") or []
    wrap.append(f"--groups={','.join(str(g) for g in groups)}" if groups else "--clear-groups")
    if user.get("noNewPrivs"):
        wrap.append("--no-new-privs")
    if user.get("dropAllCaps"):
        wrap += ["--inh-caps=-all", "--bounding-set=-all"]
    return [*wrap, "--"]


def which(program: str, env: dict) -> str:
    if "/" in program:
        return program
    for d in env.get("PATH", "").split(":"):
        candidate = os.path.join(d, program)
        if os.access(candidate, os.X_OK):
            return candidate
    return program


if __name__ == "__main__":
    main()
