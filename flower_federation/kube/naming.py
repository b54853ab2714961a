"""Object names and labels: one place decides them, so two federations never collide
and selectors never change when config changes."""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass

MANAGED_BY = "pulumi"
PART_OF = "flower-federation"
POOL_LABEL = "flower.flwr.ai/pool"
# The operator's own labels, kept so `kubectl ... -l flower.flwr.ai/component=supernode`
# from its README keeps working for teams that migrate.
OPERATOR_COMPONENT_LABEL = "flower.flwr.ai/component"
OPERATOR_FEDERATION_LABEL = "flower.flwr.ai/federation"
# Which of a pool's SuperExec StatefulSets a pod belongs to, when there are several (`superexec.replicas`).
SUPEREXEC_REPLICA_LABEL = "flower.flwr.ai/superexec-replica"
# Which SuperExec (`serverapp` or a pool) a Kubernetes executor's task pod serves.
TASK_ROLE_LABEL = "flower.flwr.ai/task-role"

SUPERLINK = "superlink"
SUPERNODE = "supernode"
SUPEREXEC_SERVERAPP = "superexec-serverapp"
SUPEREXEC_CLIENTAPP = "superexec-clientapp"
# The Job that registers the trusted SuperNode keys with the SuperLink, named
# `N-node-registration-<digest of the keys>` (a Job's name becomes a label value: 63 at most).
NODE_REGISTRATION = "node-registration"
# The federation exporter's own objects (its Service, ConfigMap, ServiceMonitor, PrometheusRule); the exporter
# itself is a container of the SuperLink's pod.
FEDERATION_EXPORTER = "federation-exporter"
# A site's own alerts (its PrometheusRule): a site runs no exporter.
SITE_ALERTS = "site-alerts"
# The second Job of a key-set change: it revokes what is no longer trusted, once the pools rolled.
NODE_REVOCATION = "node-revocation"
REGISTRATION_DIGEST_LENGTH = 10
# Pods the Kubernetes executor creates for each ServerApp/ClientApp.
TASK_EXECUTOR = "taskexecutor"
# What the ServerApp side is called where a pool name would otherwise stand (the executor
# role of its task pods; `<federation>-superexec-<role>`).
SERVERAPP_ROLE = "serverapp"

# Kubernetes limits: names of Services, and of anything that becomes a DNS label, are
# RFC 1035 labels (63). A StatefulSet name is further limited because the controller
# adds `controller-revision-hash=<name>-<10 char hash>` (a label value, 63) to its pods.
DNS_LABEL_MAX = 63
# Kubernetes' name shapes: a DNS-1123 label (most names), a DNS-1035 label (a Service's; our `N`, which prefixes them).
DNS1123_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
DNS1035_LABEL = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
# A label value, and a qualified name (a label or annotation key: an optional DNS subdomain prefix and '/', then
# its name part), as the API server checks them; rules/ (config) and kube/limits.py (the render) both hold these.
NAME_PART = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
DNS1123_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
NAME_PART_MAX = 63  # a label value, a qualified name's name part
PREFIX_MAX = 253
DNS_SUBDOMAIN_MAX = 253  # a DNS-1123 subdomain (an object name, a domain)


def is_label_value(value: str) -> bool:
    return value == "" or (len(value) <= NAME_PART_MAX and bool(NAME_PART.fullmatch(value)))


def is_dns_label(value: str) -> bool:
    return len(value) <= DNS_LABEL_MAX and bool(DNS1123_LABEL.fullmatch(value))


def is_dns_subdomain(value: str) -> bool:
    return len(value) <= DNS_SUBDOMAIN_MAX and bool(DNS1123_SUBDOMAIN.fullmatch(value))


STATEFULSET_NAME_MAX = 52


@dataclass(frozen=True)
class Names:
    """Every object name of one federation, derived from its `name`."""

    federation: str

    @property
    def superlink(self) -> str:
        return f"{self.federation}-superlink"

    @property
    def superlink_control(self) -> str:
        """The SuperLink's own API port in the cluster, behind the Fleet-only proxy."""
        return f"{self.federation}-superlink-control"

    @property
    def fleet_proxy_config(self) -> str:
        return f"{self.federation}-superlink-fleet-proxy"

    @property
    def federation_exporter(self) -> str:
        return f"{self.federation}-federation-exporter"

    @property
    def federation_alerts(self) -> str:
        return f"{self.federation}-federation-alerts"

    @property
    def site_alerts(self) -> str:
        return f"{self.federation}-site-alerts"

    @property
    def federation_dashboard(self) -> str:
        return f"{self.federation}-federation-dashboard"

    @property
    def ca_bundle(self) -> str:
        """The federation's CA certificate as a ConfigMap (a BackendTLSPolicy's caCertificateRefs)."""
        return f"{self.federation}-ca-bundle"

    @property
    def superlink_appio_service(self) -> str:
        return f"{self.federation}-superlink-serverappio"

    @property
    def superexec_serverapp(self) -> str:
        return self.pool_superexec(SERVERAPP_ROLE)

    def pool(self, pool: str) -> str:
        return f"{self.federation}-supernode-{pool}"

    def pool_appio_service(self, pool: str) -> str:
        """A pool's ClientAppIo API exposed by a NodePort or LoadBalancer Service."""
        return f"{self.pool(pool)}-clientappio"

    def pool_superexec(self, pool: str) -> str:
        return f"{self.federation}-superexec-{pool}"

    def pool_superexec_replica(self, pool: str, replica: int) -> str:
        """StatefulSet of a pool's SuperExec replica `replica` (0 keeps the one-replica name)."""
        return self.pool_superexec(pool) if replica == 0 else f"{self.pool_superexec(pool)}-{replica}"

    @property
    def server_tls_secret(self) -> str:
        return f"{self.federation}-superlink-tls"

    @property
    def gateway_tls_secret(self) -> str:
        """The Gateway listener's certificate (public hostname only) and its cert-manager Certificate's Secret."""
        return f"{self.federation}-gateway-tls"

    @property
    def gateway_certificate(self) -> str:
        return f"{self.federation}-gateway"

    @property
    def ca_secret(self) -> str:
        return f"{self.federation}-ca"

    @property
    def certificate(self) -> str:
        return f"{self.federation}-superlink"

    def runtime_tls_secret(self, pool: str) -> str:
        """A pool's Runtime API certificate (and its cert-manager Certificate)."""
        return f"{self.pool(pool)}-runtime-tls"

    def runtime_ca_secret(self, pool: str) -> str:
        """The CA certificate (public) a site's pool verifies its Runtime API with: the site-local CA's."""
        return f"{self.pool(pool)}-runtime-ca"

    def superexec_auth_secret(self, owner: str) -> str:
        """The SuperExec auth secret of a pool's workload or of the SuperLink."""
        return f"{owner}-superexec-auth"

    def node_keys_secret(self, pool: str) -> str:
        return f"{self.pool(pool)}-node-keys"

    def executor_config(self, superexec_workload: str) -> str:
        return f"{superexec_workload}-executor"

    @property
    def task_executor(self) -> str:
        return f"{self.federation}-taskexecutor"

    def task_policy(self, role: str) -> str:
        """NetworkPolicy of the pods the Kubernetes executor starts for `role`
        (`serverapp` or a pool name)."""
        return f"{self.task_executor}-{role}"

    @property
    def node_registration(self) -> str:
        """ServiceAccount, ConfigMap and NetworkPolicy of the registration Job; the Job
        itself adds a digest of the key set (a new set is a new Job)."""
        return f"{self.federation}-{NODE_REGISTRATION}"

    @property
    def node_revocation(self) -> str:
        """The revocation Job, before its digest (it shares the registration's ServiceAccount,
        ConfigMap and NetworkPolicy; the name is shorter, so the length rule covers it)."""
        return f"{self.federation}-{NODE_REVOCATION}"

    @property
    def executor_role(self) -> str:
        return f"{self.federation}-executor"

    @property
    def viewer_role(self) -> str:
        return f"{self.federation}-viewer"


def selector_labels(federation: str, component: str, pool: str | None = None) -> dict[str, str]:
    """Labels a workload selects its pods by. Only identity goes here: never the image,
    version or anything else config may change, since selectors are immutable."""
    labels = {
        "app.kubernetes.io/instance": federation,
        "app.kubernetes.io/component": component,
    }
    if pool is not None:
        labels[POOL_LABEL] = pool
    return labels


def common_labels(
    federation: str,
    component: str,
    version: str,
    pool: str | None = None,
    extra: dict[str, str] | None = None,
) -> dict[str, str]:
    labels = dict(extra or {})
    labels.update(
        {
            "app.kubernetes.io/name": "flower",
            "app.kubernetes.io/version": version,
            "app.kubernetes.io/part-of": PART_OF,
            "app.kubernetes.io/managed-by": MANAGED_BY,
            OPERATOR_COMPONENT_LABEL: component,
            OPERATOR_FEDERATION_LABEL: federation,
        }
    )
    labels.update(selector_labels(federation, component, pool))
    return labels


def service_dns_names(service: str, namespace: str, cluster_domain: str) -> list[str]:
    """The names a Service answers to in the cluster, shortest first."""
    return [
        service,
        f"{service}.{namespace}",
        f"{service}.{namespace}.svc",
        f"{service}.{namespace}.svc.{cluster_domain}",
    ]


def pod_wildcards(service: str, namespace: str, cluster_domain: str) -> list[str]:
    """One wildcard per form of a headless Service's pod names (`<pod>.<service>...`): a certificate with these
    covers every pod of a StatefulSet behind it, however many, so scaling re-issues nothing."""
    return [f"*.{service}.{namespace}.svc.{cluster_domain}", f"*.{service}.{namespace}.svc", f"*.{service}.{namespace}"]


def is_ip_address(host: str) -> bool:
    try:
        ipaddress.ip_address(host)
        return True
    except ValueError:
        return False
