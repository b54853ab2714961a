"""Volumes and mounts, as the kubelet makes them: Secrets and ConfigMaps written out
with their `items` and modes, emptyDirs fresh per pod, PVCs as directories that outlive
pods, all owned as fsGroup says; each container's mounts at their mountPaths, whose
mountpoints missing on the host are created (and removed again at the end, exactly
those); and the host directories a non-root container user needs to run the Flower
venv's Python, as an image would provide them."""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any, Optional

from tests.e2e.harness.host import HarnessError

# A Secret's / ConfigMap's data as text, or None: lookup(kind, name).
DataLookup = Callable[[str, str], Optional[dict[str, str]]]


def mounted_anywhere() -> set[str]:
    """Every mount point of every mount namespace on the host (/proc/*/mountinfo, field 5), as the namespace's
    processes see it: a container's mounts show at their mountPaths."""
    seen_ns: set[str] = set()
    out: set[str] = set()
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            ns = os.readlink(f"/proc/{entry}/ns/mnt")
            if ns in seen_ns:
                continue
            seen_ns.add(ns)
            with open(f"/proc/{entry}/mountinfo", encoding="utf-8", errors="replace") as f:
                lines = f.read().splitlines()
        except OSError:  # the process ended meanwhile
            continue
        for line in lines:
            fields = line.split(" ")
            if len(fields) > 4:  # spaces in a path are octal-escaped (\040)
                out.add(fields[4].encode().decode("unicode_escape"))
    return out


class _Mountpoints:
    """Directories (and files) created on the host as mount targets; removed when the
    last cluster closes. Only what we created, deepest first, only if still empty, and
    never one that a mount namespace still mounts over: another test process on the
    host (several share a machine) may have its containers' mounts there, since such a
    target is the same path for everyone, and removing it detaches those mounts (Linux
    >= 3.18): a SuperNode's FLWR_HOME (/app/.flwr) vanished in mid-run, the ClientApp
    failing with "Read-only file system: '/app'" (scenario 6s, 2026-11-28). That
    process removes the target once its own last cluster closed."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.created: list[Path] = []
        self.users = 0

    def ensure(self, path: str, is_file: bool = False) -> None:
        with self.lock:
            p = Path(path)
            missing = []
            parent = p if not is_file else p.parent
            while not parent.exists():
                missing.append(parent)
                parent = parent.parent
            for d in reversed(missing):
                d.mkdir(mode=0o755, exist_ok=True)  # another process may have made it meanwhile
                self.created.append(d)
            if is_file and not p.exists():
                p.touch(mode=0o644)
                self.created.append(p)

    def acquire(self) -> None:
        with self.lock:
            self.users += 1

    def release(self) -> None:
        with self.lock:
            self.users -= 1
            if self.users > 0:
                return
            in_use = mounted_anywhere()
            for p in sorted(self.created, key=lambda x: len(x.parts), reverse=True):
                if str(p) in in_use:
                    continue
                with contextlib.suppress(OSError):
                    p.rmdir() if p.is_dir() else p.unlink()
            self.created = [p for p in self.created if p.exists()]

    def leftovers(self) -> list[Path]:
        """What we created that still exists, other than what another process's containers mount over."""
        with self.lock:
            left = [p for p in self.created if p.exists()]
        in_use = mounted_anywhere() if left else set()
        return [p for p in left if str(p) not in in_use and not any(u.startswith(f"{p}/") for u in in_use)]


MOUNTPOINTS = _Mountpoints()
# Private host directories masked in containers (see image_exposures), for the report.
EXPOSED: set[str] = set()


def _unsearchable(path: Path) -> Optional[Path]:
    """The first ancestor of `path` (or itself) that a non-root user outside its group
    cannot search, or None."""
    for p in [*reversed(path.parents), path]:
        if p.exists() and not p.stat().st_mode & 0o001:
            return p
    return None


def image_exposures(venv: Path) -> list[dict[str, Any]]:
    """What podinit must expose so a non-root container user can run `venv`'s Python,
    as an image would provide it: the venv and its base interpreter's prefix. Where one
    lives under a directory that user cannot search (a checkout in a 0700 `mktemp -d`,
    pyenv under /root), a tmpfs goes over the first such directory with only the needed
    paths bound back."""
    prefix = Path(os.path.realpath(venv / "bin" / "python")).parent.parent
    by_mask: dict[str, set[str]] = {}
    for path in (venv, prefix):
        mask = _unsearchable(path)
        if mask is None:
            continue
        if mask == path:
            raise HarnessError(f"{path} itself is not searchable by a non-root user")
        by_mask.setdefault(str(mask), set()).add(str(path))
    return [{"mask": mask, "paths": sorted(paths)} for mask, paths in sorted(by_mask.items())]


def own(path: Path, fs_group: Optional[int], mode: int, read_only: bool) -> None:
    """The kubelet's SetVolumeOwnership: group fsGroup, group read (+write unless read
    only) bits, setgid and group x on directories."""
    if fs_group is None:
        path.chmod(mode)
        return
    mask = 0o440 if read_only else 0o660
    if path.is_dir():
        mask |= 0o2110
    os.chown(path, -1, fs_group)
    path.chmod(mode | mask)


def make_volumes(
    pod_name: str,
    owner: dict[str, Any],
    spec: dict[str, Any],
    root: Path,
    data: DataLookup,
    pvc_dir: Callable[[str], Path],
    volume_dirs: dict[str, Path],
    read_only_volumes: set[str],
) -> None:
    """Every volume of a pod (and the claims of its StatefulSet's volumeClaimTemplates)
    as a host directory under `root` (PVCs: `pvc_dir(claim)`), into `volume_dirs`; the
    names of those mounted read-only whatever the mount says into `read_only_volumes`."""
    fs_group = spec.get("securityContext", {}).get("fsGroup")
    claims = {t["metadata"]["name"] for t in owner["spec"].get("volumeClaimTemplates", [])}
    volumes = {v["name"]: v for v in spec.get("volumes", [])}
    for claim in claims:
        volumes.setdefault(claim, {"name": claim, "persistentVolumeClaim": {"claimName": f"{claim}-{pod_name}"}})
    for name, vol in volumes.items():
        target = root / name
        if "emptyDir" in vol:
            target.mkdir(parents=True)
            own(target, fs_group, 0o777, read_only=False)
        elif "secret" in vol or "configMap" in vol:
            kind = "Secret" if "secret" in vol else "ConfigMap"
            src = vol["secret"] if kind == "Secret" else vol["configMap"]
            obj_name = src["secretName"] if kind == "Secret" else src["name"]
            files = data(kind, obj_name)
            if files is None:
                if src.get("optional"):
                    files = {}
                else:
                    raise HarnessError(f"pod {pod_name}: volume {name}: {kind} {obj_name} not found")
            target.mkdir(parents=True)
            default = src.get("defaultMode", 0o644)
            items = src.get("items") or [{"key": k, "path": k} for k in files]
            for item in items:
                if item["key"] not in files:
                    raise HarnessError(f"pod {pod_name}: volume {name}: {kind} {obj_name} has no key {item['key']}")
                f = target / item["path"]
                f.parent.mkdir(parents=True, exist_ok=True)
                f.write_text(files[item["key"]])
                own(f, fs_group, item.get("mode", default), read_only=True)
            own(target, fs_group, 0o755, read_only=True)
            read_only_volumes.add(name)
        elif "persistentVolumeClaim" in vol:
            claim = vol["persistentVolumeClaim"]["claimName"]
            target = pvc_dir(claim)
            own(target, fs_group, 0o755, read_only=False)
            if vol["persistentVolumeClaim"].get("readOnly"):
                read_only_volumes.add(name)
        else:
            raise HarnessError(f"pod {pod_name}: volume {name}: type {sorted(set(vol) - {'name'})} is not emulated")
        volume_dirs[name] = target


def container_mounts(
    where: str, container: dict[str, Any], volume_dirs: dict[str, Path], read_only_volumes: set[str]
) -> list[dict[str, Any]]:
    """podinit's mounts for a container ({source, target, readOnly}); subPath
    directories are created like the kubelet does, mountpoints ensured on the host."""
    mounts = []
    for m in container.get("volumeMounts", []):
        if m["name"] not in volume_dirs:
            raise HarnessError(f"{where}: mount of unknown volume {m['name']}")
        source = volume_dirs[m["name"]]
        if m.get("subPath"):
            source = source / m["subPath"]
            if not source.exists():  # the kubelet creates it with the volume's mode
                source.mkdir(parents=True)
                st = volume_dirs[m["name"]].stat()
                os.chown(source, -1, st.st_gid)
                source.chmod(st.st_mode & 0o7777)
        MOUNTPOINTS.ensure(m["mountPath"], is_file=source.is_file())
        mounts.append(
            {
                "source": str(source),
                "target": m["mountPath"],
                "readOnly": bool(m.get("readOnly")) or m["name"] in read_only_volumes,
            }
        )
    return mounts
