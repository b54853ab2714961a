"""How a SuperLink is reached from outside its cluster: the Fleet-only proxy in front of it, the Service for the
Control API, a Gateway API route and an Ingress."""

from __future__ import annotations

from typing import Any, Literal, Optional

from pydantic import Field

from flower_federation.config.base import Model, ResourcesPreset
from flower_federation.config.images import Image
from flower_federation.flower.dialects import CONTROL_SERVICE_PORT

# What the Fleet-only proxy runs unless `superlink.fleetProxy.image` says otherwise: nginx, as its unprivileged
# image (no root, no privileged port), stable branch.
FLEET_PROXY_IMAGE = "nginxinc/nginx-unprivileged:1.28.0-alpine"


class FleetProxy(Model):
    """HTTP era (Flower 1.40+): a proxy container `fleet-proxy` in the SuperLink's pod that serves only the Fleet API
    (`/v1/fleet/`, and `/health`) on the port sites dial, with the SuperLink's own certificate, and answers 404 to
    everything else (Control, Runtime) without forwarding it. The SuperLink itself then listens on
    `controlService.port`, reached in the cluster only (or through `controlService`)."""

    enabled: Optional[bool] = Field(
        default=None,
        description=(
            "Unset: on whenever the SuperLink is reachable from outside its cluster (a hub, an ingress, a gateway, "
            "pools in other clusters, a `LoadBalancer` or `NodePort` Service) in the HTTP era, unless "
            "`exposeControlApi: true`. `false` with an exposed SuperLink needs `exposeControlApi: true`."
        ),
    )
    image: Image = Field(
        default=FLEET_PROXY_IMAGE,
        description=(
            f"Unset: `{FLEET_PROXY_IMAGE}`. Any nginx build with the http ssl and proxy modules whose `nginx` is on "
            "PATH; it runs as the pod's user with a read-only root filesystem (temp files in an emptyDir at /tmp)."
        ),
    )
    resources_preset: Optional[ResourcesPreset] = Field(
        default=None,
        description='The proxy container\'s preset (see "Resources"). Unset: `resourcesPreset`, else `nano`.',
    )
    resources: Optional[dict[str, Any]] = Field(
        default=None, description="ResourceRequirements of the proxy container, key by key over its preset."
    )
    max_request_body_size: str = Field(
        default="8m",
        pattern=r"^(0|[1-9][0-9]{0,5}[km]?)$",
        description=(
            "The largest request body the proxy forwards (nginx size: `8m`, `512k`), answered 413 above it; `0` "
            "(nginx: no limit) is refused, since it would leave the SuperLink's memory unbounded. Flower's Fleet client sends a model as objects of "
            "one array chunk each, at most 5 MiB (`FLWR_PRIVATE_MAX_ARRAY_CHUNK_SIZE`), so `8m` carries any model; "
            "only a single non-array record (a ConfigRecord of bytes) this large is refused. The SuperLink reads a "
            "whole body before it checks the node's signature, so this bounds what one unauthenticated request makes "
            "it hold."
        ),
    )
    max_concurrent_uploads: Optional[int] = Field(
        default=None,
        ge=1,
        le=100000,
        description=(
            "How many requests with a body of 10 kB or more (or of unknown length) the proxy forwards at once, from "
            "all clients together; more are answered 503, which Flower's SuperNodes retry. Unset: derived from the "
            "SuperLink's memory limit L and `maxRequestBodySize` B as max(1, floor((L - 416Mi) / (8 * B))) (768Mi, "
            "8m: 5): a real 1.42 SuperLink was measured to grow by up to about 6.5 times a body while it reads it, "
            "so eight with margin, beside 416Mi for its own use (up to 405 MiB measured while its ServerApp runs; "
            "docs/benchmarks.md). No memory limit: 768Mi is assumed."
        ),
    )
    max_concurrent_uploads_per_address: Optional[int] = Field(
        default=None,
        ge=1,
        le=100000,
        description=(
            "The same, per client address, so one host cannot take every upload slot. Unset: the smaller of "
            "`maxConcurrentUploads` and 2, the pushes Flower's Fleet client makes at once "
            "(`FLWR_PRIVATE_MAX_CONCURRENT_OBJ_PUSHES`). Sites behind one NAT address share it; more are answered "
            "503, which Flower retries."
        ),
    )
    client_header_timeout_seconds: int = Field(
        default=10,
        ge=1,
        le=300,
        description="How long a client may take to send a request's headers (a slow-headers client is dropped).",
    )
    idle_timeout_seconds: int = Field(
        default=30,
        ge=5,
        le=3600,
        description=(
            "How long a client may stall between two reads of its request body or two writes of the response (a "
            "slow-body client is dropped, its upload slot freed); Flower's Fleet client gives up on a request after "
            "30 s itself."
        ),
    )
    keepalive_timeout_seconds: int = Field(
        default=30,
        ge=0,
        le=3600,
        description="How long an idle keep-alive connection from a client stays open (`0`: none).",
    )
    header_buffer_size: str = Field(
        default="8k",
        pattern=r"^[1-9][0-9]{0,2}k$",
        description=(
            "The largest request line or header the proxy accepts (nginx `large_client_header_buffers 4 <this>`), "
            "answered 400/414 above it; Flower's node-auth headers take well under 1k."
        ),
    )
    timeout_seconds: int = Field(
        default=3600,
        ge=60,
        le=86400,
        description=(
            "How long the proxy waits for the SuperLink's answer to one request, or to send one to it: longer than "
            "any request a SuperNode makes (Flower's Fleet client waits at most 30 s per request). A client that "
            "stalls mid-body or mid-response for `idleTimeoutSeconds` is dropped whatever this says."
        ),
    )


class ControlService(Model):
    """With the Fleet-only proxy: Service `N-superlink-control` for the SuperLink's own API port (Control, Runtime and
    Fleet): what `flwr`, the registration Job and distributed SuperExecs dial in the cluster. A `LoadBalancer` type
    exposes the Control API outside the cluster to `loadBalancerSourceRanges` only."""

    type: Literal["ClusterIP", "LoadBalancer"] = Field(default="ClusterIP", description="Service type.")
    port: int = Field(
        default=CONTROL_SERVICE_PORT,
        ge=1,
        le=65535,
        description="The SuperLink's own API port (its `--port`) and this Service's port. Must differ from the Fleet port.",
    )
    load_balancer_source_ranges: list[str] = Field(
        default=[],
        description="Required with `type: LoadBalancer`: the CIDRs allowed to reach the Control API (operators' `flwr`).",
    )
    annotations: dict[str, str] = Field(default={}, description="Annotations on the Service (e.g. a load balancer's).")
    labels: dict[str, str] = Field(default={}, description="Extra labels on the Service (ours win on a clash).")


class ParentRef(Model):
    """A Gateway (a listener of it) the route attaches to: Gateway API `ParentReference`."""

    name: str = Field(description="The Gateway's name.")
    namespace: Optional[str] = Field(default=None, description="The Gateway's namespace. Unset: the federation's.")
    section_name: Optional[str] = Field(
        default=None,
        description=(
            "The listener's name: the HTTPS listener (HTTP era) or the TLS passthrough listener (gRPC era) sites "
            "dial. Required unless `allListeners: true`: without it the route attaches to every listener of the "
            "Gateway that admits it, plain-HTTP ones included, where the Fleet API would travel in clear."
        ),
    )
    port: Optional[int] = Field(default=None, ge=1, le=65535, description="The listener's port.")
    all_listeners: bool = Field(
        default=False,
        description=(
            "`true`: attach to every listener of this Gateway (no `sectionName`), e.g. a Gateway the platform "
            "guarantees has TLS listeners only. An explicit opt-in: a plain-HTTP listener added later would serve "
            "the Fleet API in clear."
        ),
    )


class Gateway(Model):
    """Gateway API (the successor of Ingress): routes only the Fleet API to the SuperLink. HTTP era: an `HTTPRoute`
    `N-superlink` matching `PathPrefix /v1/fleet/` to the Fleet-only proxy, and a `BackendTLSPolicy` so the gateway
    verifies that backend with the federation's CA (ConfigMap `N-ca-bundle`) and the Service's name. gRPC era: a
    `TLSRoute` (passthrough) to the Fleet port. The Gateway itself is the platform's; in the HTTP era its listener
    presents a certificate of its own from the federation's CA for `hostname` only (Secret `N-gateway-tls`; a
    ReferenceGrant lets a Gateway in another namespace read that Secret, and no other), so sites keep trusting the
    federation's CA."""

    parent_refs: list[ParentRef] = Field(description="The Gateway listeners to attach to (at least one).")
    hostname: str = Field(
        description="The name sites dial: the route's hostname, added to the server certificate; unset externalAddress: "
        "this name, port 443."
    )
    pod_selector: Optional[dict[str, str]] = Field(
        default=None,
        description=(
            "matchLabels of the gateway's data-plane pods: with `namespaceSelector`, the only sources the proxy's port "
            "admits (unless the Service is also a LoadBalancer/NodePort or an Ingress exists). Unset: any source."
        ),
    )
    namespace_selector: Optional[dict[str, str]] = Field(
        default=None, description="matchLabels of the namespace the gateway's pods run in (see `podSelector`)."
    )
    tls_route_version: Literal["v1", "v1alpha2"] = Field(
        default="v1",
        description=(
            "gRPC era: the `TLSRoute`'s `gateway.networking.k8s.io` version. `v1`: Gateway API v1.5+ (standard "
            "channel), which no longer serves `v1alpha2` there. `v1alpha2`: a cluster with Gateway API older than "
            "v1.5 (experimental channel CRDs), or v1.5+ on the experimental channel, where it is deprecated."
        ),
    )
    present_federation_certificate: bool = Field(
        default=True,
        description=(
            "HTTP era (the Gateway terminates TLS): its listener presents a certificate of its own from the "
            "federation's CA that carries `hostname` only (Secret `N-gateway-tls`, made with the SuperLink's: "
            "pulumi-tls for `tls.source: generate`, a cert-manager Certificate `N-gateway` from the same issuer for "
            "`certManager`; `listenerSecretName` for `existingSecret`), and a ReferenceGrant lets the Gateways of "
            "the parentRefs' namespaces read that Secret only, never the SuperLink's own key (whose certificate "
            "also serves localhost and the in-cluster Control API). Sites keep trusting the federation's CA. "
            "`false`: none of this; the listener has a certificate of its own, and sites must trust its CA instead."
        ),
    )
    listener_secret_name: Optional[str] = Field(
        default=None,
        description=(
            "`tls.source: existingSecret` only, and then required in the HTTP era unless "
            "`presentFederationCertificate: false`: the kubernetes.io/tls Secret (in the federation's namespace) "
            "the Gateway's listener presents, a certificate for `hostname` only from the CA sites trust; never the "
            "SuperLink's own Secret (`tls.existingSecret`). The ReferenceGrant names it."
        ),
    )


class Ingress(Model):
    """An Ingress `N-superlink` for `host`. HTTP era: routes only `Prefix /v1/fleet/` to the Fleet-only proxy, whose
    Service port says `appProtocol: https` (controller-neutral; a controller that ignores it needs its own backend-TLS
    annotation in `annotations`); the controller terminates TLS with `tlsSecretName`. gRPC era: TLS passed through to
    the Fleet port, as before. Prefer `gateway`: Kubernetes retired ingress-nginx in March 2026."""

    class_name: Optional[str] = Field(
        default=None, description="`ingressClassName`. Unset: the cluster's default class."
    )
    host: str = Field(description="The name sites dial; added to the server certificate.")
    tls_secret_name: Optional[str] = Field(
        default=None,
        description=(
            "`spec.tls[].secretName`: the certificate the controller presents for `host`. Unset: Secret "
            "`N-superlink-tls`, the federation's server certificate (sites keep trusting the federation's CA)."
        ),
    )
    passthrough: Optional[bool] = Field(
        default=None,
        description=(
            "ingress-nginx only (retired): pass TLS through to the Fleet port "
            '(`nginx.ingress.kubernetes.io/ssl-passthrough: "true"` and the backend protocol, one `/` rule); the '
            "controller then sees no paths, and in the HTTP era the Fleet-only proxy still filters. Unset: `true` in the "
            "gRPC era (as before: its Fleet API has a port of its own), `false` in the HTTP era."
        ),
    )
    annotations: dict[str, str] = Field(default={}, description="Annotations on the Ingress (the controller's).")
