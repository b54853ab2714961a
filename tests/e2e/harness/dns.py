"""Cluster DNS, as hosts files: per network namespace, `/etc/netns/<netns>/hosts`
(bind-mounted over /etc/hosts by `ip netns exec`) maps what cluster DNS would answer for
a pod or client in a Kubernetes namespace, and `resolv.conf` points at a closed local
port, so other names fail at once."""

from __future__ import annotations

import shutil
import threading
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Optional

from tests.e2e.harness.host import HarnessError

if TYPE_CHECKING:
    from tests.e2e.harness.pods import Pod

CLUSTER_DOMAIN = "cluster.local"
_ETC_NETNS = Path("/etc/netns")
_ETC_LOCK = threading.Lock()
_ETC_CREATED: list[bool] = []


def backing(service: dict[str, Any], pods: Iterable[Pod]) -> list[Pod]:
    """The pods a Service selects (in its namespace)."""
    selector = service["spec"].get("selector") or {}
    ns = service["metadata"].get("namespace", "default")
    if not selector:
        return []
    return [p for p in pods if p.namespace == ns and all(p.labels.get(k) == v for k, v in selector.items())]


def outdated(objects: dict[tuple[str, str], dict[str, Any]], pod: Pod) -> bool:
    """The pod was made from an older template of its workload than the one now applied."""
    owner = objects.get((pod.kind, pod.workload))
    return owner is not None and owner["spec"]["template"] != pod.template


def check_ports(service: dict[str, Any], pods: list[Pod]) -> None:
    """A Service port must equal its target port: no port translation is emulated."""
    for sp in service["spec"].get("ports", []):
        target = sp.get("targetPort", sp["port"])
        for pod in pods:
            resolved = None
            if isinstance(target, int) or str(target).isdigit():
                resolved = int(target)
            else:
                for c in pod.spec["containers"]:
                    for cp in c.get("ports", []):
                        if cp.get("name") == target:
                            resolved = int(cp["containerPort"])
                if resolved is None:
                    raise HarnessError(
                        f"Service {service['metadata']['name']}: targetPort {target!r} "
                        f"is no container port of pod {pod.name}"
                    )
            if resolved != sp["port"]:
                raise HarnessError(
                    f"Service {service['metadata']['name']}: port {sp['port']} -> {resolved}: "
                    "port translation is not emulated"
                )


def hosts_file(
    objects: dict[tuple[str, str], dict[str, Any]], pods: Iterable[Pod], namespace: str, own: Optional[Pod] = None
) -> str:
    """/etc/hosts for a pod (or client) in `namespace`."""
    pods = list(pods)
    d = CLUSTER_DOMAIN
    lines = ["127.0.0.1\tlocalhost", "::1\tlocalhost ip6-localhost ip6-loopback"]
    if own is not None:
        if own.hostname and own.subdomain:
            lines.append(f"{own.ip}\t{own.hostname}.{own.subdomain}.{own.namespace}.svc.{d}\t{own.hostname}")
        else:
            lines.append(f"{own.ip}\t{own.name}")
    for (kind, _), svc in sorted(objects.items()):
        if kind != "Service":
            continue
        name = svc["metadata"]["name"]
        ns = svc["metadata"].get("namespace", "default")

        def forms(host: str, ns: str = ns) -> list[str]:
            names = [f"{host}.{ns}", f"{host}.{ns}.svc", f"{host}.{ns}.svc.{d}"]
            return ([host] if ns == namespace else []) + names

        selected = backing(svc, pods)
        # A pod of an older template (its workload is being rolled) may lack the port a changed Service names:
        # it is no endpoint of it until it is replaced, as the EndpointSlice controller has it.
        check_ports(svc, [p for p in selected if not outdated(objects, p)])
        if svc["spec"].get("clusterIP") == "None":
            for p in selected:
                lines.append(f"{p.ip}\t{' '.join(forms(name))}")
                if p.hostname and p.subdomain == name:
                    lines.append(f"{p.ip}\t{' '.join(forms(f'{p.hostname}.{name}'))}")
        elif selected:
            if len(selected) > 1:
                raise HarnessError(f"Service {name} selects {len(selected)} pods: load balancing is not emulated")
            lines.append(f"{selected[0].ip}\t{' '.join(forms(name))}")
    return "\n".join(lines) + "\n"


def write_netns_files(netns: str, namespace: str, hosts: str, created: list[Path]) -> None:
    """(Re)write a network namespace's hosts and resolv.conf in place (ip netns exec
    bind-mounts the files, so running processes see the new content); directories made
    are added to `created`."""
    d = _ETC_NETNS / netns
    with _ETC_LOCK:
        if not _ETC_NETNS.exists():
            _ETC_NETNS.mkdir()
            _ETC_CREATED.append(True)
        if not d.exists():
            d.mkdir()
            created.append(d)
    with open(d / "hosts", "w") as f:
        f.write(hosts)
    (d / "resolv.conf").write_text(
        f"# cluster DNS is emulated by the hosts file; other names fail at once\n"
        f"nameserver 127.0.0.1\nsearch {namespace}.svc.{CLUSTER_DOMAIN} svc.{CLUSTER_DOMAIN} {CLUSTER_DOMAIN}\n"
        "options timeout:1 attempts:1\n"
    )


def remove_netns_files(created: list[Path]) -> None:
    """Remove the directories `write_netns_files` made, and /etc/netns if we made it
    and nobody uses it any more."""
    with _ETC_LOCK:
        for d in created:
            shutil.rmtree(d, ignore_errors=True)
        if _ETC_CREATED:  # we made /etc/netns: remove it once nobody uses it
            try:
                _ETC_NETNS.rmdir()
                _ETC_CREATED.clear()
            except OSError:
                pass
