"""The SuperLink's objects: its StatefulSet (state on a PVC; the exporter's container with `monitoring`),
public Service and ServiceAccount and, with distributed SuperExec, the ServerApp SuperExec Deployment and the
internal ServerAppIo Service it dials (gRPC era). NetworkPolicies: `network.py`; TLS: `trust.py`."""

from __future__ import annotations

import copy
from typing import Any, Optional

from flower_federation.builders import access, appio, fleet_proxy, gateway, monitoring, resources, state_guard
from flower_federation.builders.pod_pipeline import PodRecipe, finish_pod
from flower_federation.builders.workload_parts import (
    ExecutorWiring,
    Mount,
    ca_mounts,
    ca_volumes,
    executor_wiring,
    managed_container,
    secret_volume,
    statefulset,
    superexec_container,
    workload_meta,
)
from flower_federation.flower.dialects import (
    ANY_ADDRESS,
    HEALTH_PORT,
    LOOPBACK,
    SIDECAR_HEALTH_PORT,
    ServerTls,
    ServicePort,
    health_server_args,
)
from flower_federation.flower.layout import STATE_DIR, STATE_FILE, STATE_VOLUME, TLS_DIR, TLS_VOLUME
from flower_federation.flower.superlink_state import superlink_command
from flower_federation.kube.naming import SUPEREXEC_SERVERAPP, SUPERLINK, selector_labels
from flower_federation.kube.objects import Container, Manifest, Volume
from flower_federation.plan import FederationPlan, probes


def appio_address(plan: FederationPlan) -> str:
    """Where a SuperExec for ServerApps reaches the SuperLink's in-cluster API."""
    if not plan.distributed:
        return f"{LOOPBACK}:{plan.ports.serverappio or plan.ports.control}"
    if plan.grpc_era:  # an internal plaintext Service
        return f"{plan.service_host(plan.names.superlink_appio_service)}:{plan.ports.serverappio}"
    return plan.control_address  # HTTP era: the Runtime API shares the SuperLink's own TLS port


def _serverapp_ca(plan: FederationPlan) -> Optional[str]:
    # HTTP era: the SuperExec dials the SuperLink's TLS port; gRPC era: plaintext AppIo.
    return None if plan.grpc_era else plan.client_ca_file


def _serverapp_superexec(plan: FederationPlan, wiring: ExecutorWiring) -> Container:
    sl = plan.spec.superlink
    return superexec_container(
        plan,
        SUPEREXEC_SERVERAPP,
        plugin="serverapp",
        image=plan.serverapp_superexec_image,
        pull_policy=plan.pull_policy(sl.superexec_image),
        appio_address=appio_address(plan),
        ca_file=_serverapp_ca(plan),
        # A sidecar shares the pod's network namespace with the SuperLink.
        default_health_port=HEALTH_PORT if plan.distributed else SIDECAR_HEALTH_PORT,
        probe_settings=plan.serverapp_superexec_probes,
        wiring=wiring,
        env=list(sl.env),
        resources=resources.serverapp_superexec(plan),
        mounts=(ca_mounts(plan) if _serverapp_ca(plan) else []) + appio.auth_mounts(plan),
        auth_secret_file=appio.auth_file(plan),
        settings=sl.superexec,
    )


def _superlink_container(plan: FederationPlan) -> Container:
    sl = plan.spec.superlink
    tls = None
    if plan.trust:
        tls = ServerTls(ca_file=str(plan.client_ca_file), cert_file=f"{TLS_DIR}/tls.crt", key_file=f"{TLS_DIR}/tls.key")
    args = plan.dialect.superlink_args(
        isolation=plan.spec.isolation_mode,
        ports=plan.ports,
        serverappio_bind=ANY_ADDRESS if plan.distributed else LOOPBACK,
        database=STATE_FILE if sl.persistence.enabled else None,
        tls=tls,
        runtime_dependency_installation=plan.spec.allow_runtime_dependency_installation,
        auth_secret_file=appio.auth_file(plan),
    )
    if plan.node_auth:
        args.append("--enable-supernode-auth")
    if plan.grpc_era:
        args += health_server_args(plan.version, HEALTH_PORT)
        health = probes.grpc_health(plan.version, HEALTH_PORT, plan.superlink_probes)
    else:
        health = probes.http_health("api", plan.trust is not None, plan.superlink_probes)
    args += list(sl.extra_args)

    mounts: list[Mount] = []
    if plan.trust:
        mounts.append({"name": TLS_VOLUME, "mountPath": TLS_DIR, "readOnly": True})
    mounts += ca_mounts(plan) + appio.auth_mounts(plan)
    if sl.persistence.enabled:
        mounts.append({"name": STATE_VOLUME, "mountPath": STATE_DIR})
    c = managed_container(
        plan,
        SUPERLINK,
        plan.superlink_image,
        args,
        env=list(sl.env) or None,
        resources=resources.superlink(plan),
        mounts=mounts + list(sl.volume_mounts),
        health=health,
        pull_policy=plan.pull_policy(sl.image),
    )
    command = superlink_command(plan.version)
    if command:  # state created before serving (see superlink_state); args stay Flower's own
        c["command"] = command
    c["ports"] = [{"name": p.name, "containerPort": p.port, "protocol": "TCP"} for p in _superlink_ports(plan)]
    if plan.distributed and plan.grpc_era:
        c["ports"].append({"name": "serverappio", "containerPort": plan.ports.serverappio, "protocol": "TCP"})
    return c


def _superlink_ports(plan: FederationPlan) -> list[ServicePort]:
    """The SuperLink container's API ports: behind the Fleet-only proxy, its one port is
    `control` (named as the dialect names it); else the dialect's public ports."""
    if plan.fleet_proxy:
        return [ServicePort(p.name, plan.ports.control) for p in plan.dialect.service_ports(plan.ports)]
    return plan.dialect.service_ports(plan.ports)


def _public_ports(plan: FederationPlan) -> list[dict[str, Any]]:
    """Ports of Service `N-superlink` (what sites, an Ingress and a Gateway reach): Fleet alone when the Control
    API is apart (`plan.control_apart`)."""
    if plan.fleet_proxy:
        port: dict[str, Any] = {
            "name": fleet_proxy.PORT_NAME,
            "port": plan.ports.fleet,
            "targetPort": fleet_proxy.PORT_NAME,
            "protocol": "TCP",
        }
        if plan.trust:  # what controller-neutral Ingresses and Gateways read to dial the backend with TLS
            port["appProtocol"] = "https"
        return [port]
    ports = plan.dialect.service_ports(plan.ports)
    return _service_ports([p for p in ports if p not in _control_ports(plan)] if plan.control_apart else ports)


def _control_ports(plan: FederationPlan) -> list[ServicePort]:
    """Ports of Service `N-superlink-control`: behind the proxy, the SuperLink's own port; gRPC era, Control's."""
    if plan.fleet_proxy:
        return _superlink_ports(plan)
    return [p for p in plan.dialect.service_ports(plan.ports) if p.port == plan.ports.control]


def _service_ports(ports: list[ServicePort]) -> list[dict[str, Any]]:
    """A Service's ports, each to the container port of the same name."""
    return [{"name": p.name, "port": p.port, "targetPort": p.name, "protocol": "TCP"} for p in ports]


def _control_service(plan: FederationPlan) -> Manifest:
    """`N-superlink-control`: the SuperLink's own API port behind the Fleet-only proxy (or the gRPC era's Control
    port of an exposed SuperLink), for `flwr`, the registration Job and distributed SuperExecs (ClusterIP unless
    the operator exposes it to `loadBalancerSourceRanges`, HTTP era)."""
    cs = plan.spec.superlink.control_service
    spec: dict[str, Any] = {"type": cs.type}
    if cs.type == "LoadBalancer":
        spec["loadBalancerSourceRanges"] = list(cs.load_balancer_source_ranges)
        # Clients keep their addresses, so the NetworkPolicy admits the same ranges.
        spec["externalTrafficPolicy"] = "Local"
    spec["selector"] = selector_labels(plan.name, SUPERLINK)
    spec["ports"] = _service_ports(_control_ports(plan))
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": plan.meta(
            plan.names.superlink_control, SUPERLINK, annotations=cs.annotations, extra_labels=cs.labels
        ),
        "spec": spec,
    }


def _volumes(plan: FederationPlan) -> list[Volume]:
    volumes: list[Volume] = []
    if plan.trust:
        volumes.append(
            secret_volume(TLS_VOLUME, plan.trust.server_secret, {"tls.crt": "tls.crt", "tls.key": "tls.key"}, 0o440)
        )
    auth = appio.auth_volumes(plan, appio.superlink_auth_secret_name(plan))
    proxy = fleet_proxy.volumes(plan) if plan.fleet_proxy else []
    proxy += monitoring.volumes(plan) if monitoring.enabled(plan) else []  # the exporter's beside the proxy's
    return volumes + ca_volumes(plan) + auth + proxy + list(plan.spec.superlink.volumes)


def _claims(plan: FederationPlan) -> list[dict[str, Any]]:
    sl = plan.spec.superlink
    claims = []
    if sl.persistence.enabled:
        claim_spec: dict[str, Any] = {
            "accessModes": ["ReadWriteOnce"],
            "resources": {"requests": {"storage": sl.persistence.size}},
        }
        if sl.persistence.storage_class_name:
            claim_spec["storageClassName"] = sl.persistence.storage_class_name
        claims.append({"metadata": {"name": STATE_VOLUME}, "spec": claim_spec})
    return claims + [copy.deepcopy(c) for c in sl.volume_claim_templates]


def objects(plan: FederationPlan) -> list[Manifest]:
    """The SuperLink's objects (its NetworkPolicies excepted)."""
    sl = plan.spec.superlink
    names = plan.names
    containers = [_superlink_container(plan)]
    if plan.sidecar_superexec:
        containers.append(_serverapp_superexec(plan, ExecutorWiring(False)))
    containers += [fleet_proxy.container(plan)] if plan.fleet_proxy else []
    containers += [monitoring.container(plan)] if monitoring.enabled(plan) else []
    pod = finish_pod(
        plan,
        PodRecipe(
            labels=plan.labels(SUPERLINK),
            containers=containers,
            volumes=_volumes(plan),
            service_account=names.superlink,
            selector=selector_labels(plan.name, SUPERLINK),
            settings=sl,
            # Back up before an upgrade migrates the state; refuse a downgrade.
            init_containers=[state_guard.container(plan, containers[0])] if sl.persistence.enabled else [],
            main_container=SUPERLINK,
            user_template=sl.pod_template,
        ),
    )
    service: Manifest = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": plan.meta(
            names.superlink, SUPERLINK, annotations=sl.service.annotations, extra_labels=sl.service.labels
        ),
        "spec": {
            "type": sl.service.type,
            **(
                {"loadBalancerSourceRanges": list(sl.service.load_balancer_source_ranges)}
                if sl.service.load_balancer_source_ranges
                else {}
            ),
            "selector": selector_labels(plan.name, SUPERLINK),
            "ports": _public_ports(plan),
        },
    }
    out = [
        statefulset(
            plan,
            names.superlink,
            SUPERLINK,
            None,
            pod,
            replicas=1,
            service_name=names.superlink,
            claims=_claims(plan),
            settings=sl,
        ),
        service,
        access.service_account(plan, names.superlink, SUPERLINK, settings=sl.service_account),
    ]
    if plan.fleet_proxy:
        out.append(fleet_proxy.config_map(plan))
    if plan.control_apart:
        out.append(_control_service(plan))
    if sl.ingress is not None:
        out.append(_ingress(plan))
    out += gateway.objects(plan) + monitoring.objects(plan)
    if plan.distributed:
        out += _distributed_superexec(plan)
    return out


# ingress-nginx (retired March 2026), asked for with `ingress.passthrough`: pass TLS
# through to the Fleet port, to the protocol each dialect serves.
SSL_PASSTHROUGH = "nginx.ingress.kubernetes.io/ssl-passthrough"
BACKEND_PROTOCOL = "nginx.ingress.kubernetes.io/backend-protocol"
# The one path prefix of the Fleet API (HTTP era); the proxy filters again behind it.
FLEET_PATH = "/v1/fleet/"
GRPC_FLEET_SERVICE = "flwr.proto.Fleet"
GRPC_FLEET_PATH = f"/{GRPC_FLEET_SERVICE}/"


def ingress_passthrough(plan: FederationPlan) -> bool:
    ingress = plan.spec.superlink.ingress
    assert ingress is not None
    return ingress.passthrough if ingress.passthrough is not None else plan.grpc_era


def _ingress(plan: FederationPlan) -> Manifest:
    """Ingress `N-superlink`: the Fleet API by host name. HTTP era: only `/v1/fleet/`,
    to the Fleet-only proxy, TLS terminated by the controller with the federation's
    server certificate (or `tlsSecretName`); with passthrough: everything to the Fleet
    port, TLS untouched (the SuperLink's or the proxy's)."""
    ingress = plan.spec.superlink.ingress
    assert ingress is not None
    backend = {"service": {"name": plan.names.superlink, "port": {"name": fleet_proxy.public_port_name(plan)}}}
    spec: dict[str, Any] = {}
    if ingress.class_name:
        spec["ingressClassName"] = ingress.class_name
    annotations = dict(ingress.annotations)
    if ingress_passthrough(plan):
        annotations = {SSL_PASSTHROUGH: "true", BACKEND_PROTOCOL: "GRPCS" if plan.grpc_era else "HTTPS", **annotations}
        paths = [{"path": "/", "pathType": "Prefix", "backend": backend}]
    else:
        secret = ingress.tls_secret_name or (plan.trust.server_secret if plan.trust else None)
        if secret:
            spec["tls"] = [{"hosts": [ingress.host], "secretName": secret}]
        # gRPC era: the controller must speak gRPC over TLS to the backend (its own annotation).
        path = GRPC_FLEET_PATH if plan.grpc_era else FLEET_PATH
        paths = [{"path": path, "pathType": "Prefix", "backend": backend}]
    spec["rules"] = [{"host": ingress.host, "http": {"paths": paths}}]
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "Ingress",
        "metadata": plan.meta(plan.names.superlink, SUPERLINK, annotations=annotations or None),
        "spec": spec,
    }


def _distributed_superexec(plan: FederationPlan) -> list[Manifest]:
    names = plan.names
    out: list[Manifest] = []
    if plan.grpc_era:
        # The plaintext ServerAppIo API, for the SuperExec only: never on the public Service.
        out.append(
            {
                "apiVersion": "v1",
                "kind": "Service",
                "metadata": plan.meta(names.superlink_appio_service, SUPERLINK),
                "spec": {
                    "type": "ClusterIP",
                    "selector": selector_labels(plan.name, SUPERLINK),
                    "ports": [
                        {
                            "name": "serverappio",
                            "port": plan.ports.serverappio,
                            "targetPort": "serverappio",
                            "protocol": "TCP",
                        }
                    ],
                },
            }
        )
    wiring = executor_wiring(
        plan,
        names.superexec_serverapp,
        "serverapp",
        plan.serverapp_superexec_image,
        plan.pull_policy(plan.spec.superlink.superexec_image),
    )
    volumes = (
        (ca_volumes(plan) if _serverapp_ca(plan) else [])
        + appio.auth_volumes(plan, appio.superlink_auth_secret_name(plan))
        + wiring.volumes
    )
    settings = plan.spec.superlink.superexec
    # The SuperLink's podTemplate patches the SuperLink's pod, not this one (it has a Deployment of its own).
    pod = finish_pod(
        plan,
        PodRecipe(
            labels=plan.labels(SUPEREXEC_SERVERAPP),
            containers=[_serverapp_superexec(plan, wiring)],
            volumes=volumes,
            service_account=names.superexec_serverapp,
            api_token=wiring.enabled,
            selector=selector_labels(plan.name, SUPEREXEC_SERVERAPP),
            settings=settings,
        ),
    )
    out += wiring.objects
    out.append(
        access.service_account(
            plan,
            names.superexec_serverapp,
            SUPEREXEC_SERVERAPP,
            api_token=wiring.enabled,
            settings=settings.service_account,
        )
    )
    spec: dict[str, Any] = {
        "replicas": settings.replicas,
        "selector": {"matchLabels": selector_labels(plan.name, SUPEREXEC_SERVERAPP)},
        "template": pod,
    }
    if settings.update_strategy:
        spec["strategy"] = copy.deepcopy(settings.update_strategy)  # a Deployment's name for it
    out.append(
        {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": workload_meta(plan, names.superexec_serverapp, SUPEREXEC_SERVERAPP, None, settings),
            "spec": spec,
        }
    )
    return out
