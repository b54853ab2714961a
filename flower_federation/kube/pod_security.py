"""Kubernetes Pod Security Standards (baseline and restricted, as of Kubernetes 1.34)
checked on pod templates, so a namespace we create enforces the strictest level its pods
meet, and tests can hold every template to `restricted`.

Follows https://kubernetes.io/docs/concepts/security/pod-security-standards/ control by
control; each violation names the control and the field.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any

BASELINE_CAPABILITIES = frozenset(
    {
        "AUDIT_WRITE",
        "CHOWN",
        "DAC_OVERRIDE",
        "FOWNER",
        "FSETID",
        "KILL",
        "MKNOD",
        "NET_BIND_SERVICE",
        "SETFCAP",
        "SETGID",
        "SETPCAP",
        "SETUID",
        "SYS_CHROOT",
    }
)
SELINUX_TYPES = frozenset({"", "container_t", "container_init_t", "container_kvm_t", "container_engine_t"})
SAFE_SYSCTLS = frozenset(
    {
        "kernel.shm_rmid_forced",
        "net.ipv4.ip_local_port_range",
        "net.ipv4.ip_unprivileged_port_start",
        "net.ipv4.tcp_syncookies",
        "net.ipv4.ping_group_range",
        "net.ipv4.ip_local_reserved_ports",
        "net.ipv4.tcp_keepalive_time",
        "net.ipv4.tcp_fin_timeout",
        "net.ipv4.tcp_keepalive_intvl",
        "net.ipv4.tcp_keepalive_probes",
    }
)
RESTRICTED_VOLUME_TYPES = frozenset(
    {
        "configMap",
        "csi",
        "downwardAPI",
        "emptyDir",
        "ephemeral",
        "persistentVolumeClaim",
        "projected",
        "secret",
        "image",
    }
)
LEVELS = ("restricted", "baseline", "privileged")


def _containers(spec: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    for kind in ("initContainers", "containers", "ephemeralContainers"):
        for c in spec.get(kind) or []:
            yield f"{kind}[{c.get('name')}]", c


def baseline_violations(template: Mapping[str, Any]) -> list[str]:
    spec = template.get("spec", {})
    pod_sc = spec.get("securityContext") or {}
    out = []
    for field in ("hostNetwork", "hostPID", "hostIPC"):
        if spec.get(field):
            out.append(f"host namespaces: spec.{field}")
    if (pod_sc.get("windowsOptions") or {}).get("hostProcess"):
        out.append("HostProcess: spec.securityContext.windowsOptions.hostProcess")
    for v in spec.get("volumes") or []:
        if "hostPath" in v:
            out.append(f"hostPath volumes: volumes[{v.get('name')}]")
    for sysctl in pod_sc.get("sysctls") or []:
        if sysctl.get("name") not in SAFE_SYSCTLS:
            out.append(f"sysctls: {sysctl.get('name')}")
    scs = [("spec.securityContext", pod_sc)] + [
        (f"{w}.securityContext", c.get("securityContext") or {}) for w, c in _containers(spec)
    ]
    for where, sc in scs:
        if (sc.get("seccompProfile") or {}).get("type") == "Unconfined":
            out.append(f"seccomp: {where}.seccompProfile Unconfined")
        if (sc.get("appArmorProfile") or {}).get("type") not in (None, "RuntimeDefault", "Localhost"):
            out.append(f"AppArmor: {where}.appArmorProfile")
        se = sc.get("seLinuxOptions") or {}
        if se.get("type", "") not in SELINUX_TYPES or se.get("user") or se.get("role"):
            out.append(f"SELinux: {where}.seLinuxOptions")
    for where, c in _containers(spec):
        sc = c.get("securityContext") or {}
        if sc.get("privileged"):
            out.append(f"privileged: {where}")
        if (sc.get("windowsOptions") or {}).get("hostProcess"):
            out.append(f"HostProcess: {where}")
        extra = set((sc.get("capabilities") or {}).get("add") or []) - BASELINE_CAPABILITIES
        if extra:
            out.append(f"capabilities: {where} adds {sorted(extra)}")
        if sc.get("procMount") not in (None, "Default"):
            out.append(f"/proc mount: {where}")
        for port in c.get("ports") or []:
            if port.get("hostPort"):
                out.append(f"host ports: {where} hostPort {port['hostPort']}")
    return out


def restricted_violations(template: Mapping[str, Any]) -> list[str]:
    spec = template.get("spec", {})
    pod_sc = spec.get("securityContext") or {}
    out = baseline_violations(template)
    for v in spec.get("volumes") or []:
        kinds = set(v) - {"name"}
        if not kinds <= RESTRICTED_VOLUME_TYPES:
            out.append(f"volume types: volumes[{v.get('name')}] is {sorted(kinds)}")
    pod_non_root = pod_sc.get("runAsNonRoot") is True
    pod_seccomp = (pod_sc.get("seccompProfile") or {}).get("type")
    if pod_sc.get("runAsUser") == 0:
        out.append("running as non-root user: spec.securityContext.runAsUser 0")
    if pod_sc.get("runAsNonRoot") is False:
        out.append("running as non-root: spec.securityContext.runAsNonRoot false")
    for where, c in _containers(spec):
        sc = c.get("securityContext") or {}
        if sc.get("allowPrivilegeEscalation") is not False:
            out.append(f"privilege escalation: {where} must set allowPrivilegeEscalation false")
        non_root = sc.get("runAsNonRoot")
        if non_root is False or (non_root is None and not pod_non_root):
            out.append(f"running as non-root: {where}")
        if sc.get("runAsUser") == 0:
            out.append(f"running as non-root user: {where} runAsUser 0")
        seccomp = (sc.get("seccompProfile") or {}).get("type") or pod_seccomp
        if seccomp not in ("RuntimeDefault", "Localhost"):
            out.append(f"seccomp: {where} needs RuntimeDefault or Localhost")
        caps = sc.get("capabilities") or {}
        if "ALL" not in (caps.get("drop") or []):
            out.append(f"capabilities: {where} must drop ALL")
        extra = set(caps.get("add") or []) - {"NET_BIND_SERVICE"}
        if extra:
            out.append(f"capabilities: {where} may add only NET_BIND_SERVICE, adds {sorted(extra)}")
    return out


def level(template: Mapping[str, Any]) -> str:
    if not restricted_violations(template):
        return "restricted"
    if not baseline_violations(template):
        return "baseline"
    return "privileged"


def namespace_level(templates: Sequence[Mapping[str, Any]]) -> str:
    """The strictest level every template meets."""
    return max((level(t) for t in templates), key=LEVELS.index, default="restricted")
