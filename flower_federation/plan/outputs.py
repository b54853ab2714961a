"""Stack outputs: SuperLink addresses, pools, and the `flwr` CLI connection config; and the warnings a
preview prints for what is deployed as asked but a reviewer should know."""

from __future__ import annotations

from typing import Any

import tomli_w

from flower_federation.config import Pool
from flower_federation.flower.layout import CA_FILE
from flower_federation.flower.skew import ROWS, WHERE, WINDOW_MINORS, outside_window
from flower_federation.flower.versions import FLWR_CONFIG_TOML_SINCE, FlowerVersion, version_from_image
from flower_federation.plan import FederationPlan
from flower_federation.plan.sites import ACROSS_ERAS, era_of

TLS_DISABLED_WARNING = (
    "TLS IS DISABLED (insecure: true): Fleet and Control traffic, including model updates, "
    "travels in plaintext and SuperNodes cannot verify the SuperLink."
)


def connection_name(plan: FederationPlan) -> str:
    return plan.spec.cli.connection_name or plan.name


def flwr_connection(plan: FederationPlan) -> dict[str, Any]:
    conn: dict[str, Any] = {"address": plan.spec.cli.address or plan.control_address}
    if plan.trust is None:
        conn["insecure"] = True
    else:
        # Flower 1.26+ wants an absolute path. The default is where our pods mount the
        # CA, which fits the default in-cluster address (flwr run from a pod).
        conn["root-certificates"] = plan.spec.cli.root_certificates or CA_FILE
    return conn


def flwr_config(plan: FederationPlan) -> dict[str, Any]:
    """What to put in the CLI's config for this federation, in the form the federation's
    Flower version reads."""
    name = connection_name(plan)
    conn = flwr_connection(plan)
    if plan.version >= FLWR_CONFIG_TOML_SINCE:
        return {"superlink": {"default": name, name: conn}}
    return {"tool": {"flwr": {"federations": {"default": name, name: conn}}}}


def flwr_config_file(plan: FederationPlan) -> str:
    return "~/.flwr/config.toml" if plan.version >= FLWR_CONFIG_TOML_SINCE else "pyproject.toml"


def stack_outputs(plan: FederationPlan) -> dict[str, Any]:
    """Plain outputs (the shell adds `caCertificate` and `nodeAuth`). A hub's are what a
    site needs: `superlink.externalAddress` (and the CA); a site's say which SuperLink it
    dials, and hand over its public keys (`nodeAuth.publicKeys`)."""
    spec = plan.spec
    pools = {
        p.name: {
            "kind": spec.mode,
            "replicas": p.replicas if spec.mode == "StatefulSet" else "one per eligible node",
            **({"cluster": p.cluster} if p.cluster else {}),
        }
        for p in spec.supernodes.pools
    }
    out: dict[str, Any] = {"role": plan.role, "namespace": plan.namespace, "flowerVersion": str(plan.version)}
    if plan.remote is not None:
        out["superlink"] = {"fleetAddress": str(plan.remote.endpoint)}
    elif plan.runs_superlink:
        out["superlink"] = {
            "fleetAddress": plan.fleet_address,
            "controlAddress": plan.control_address,
            "serviceType": spec.superlink.service.type,
        }
        if plan.external is not None:
            out["superlink"]["externalAddress"] = str(plan.external)
    if pools:
        out["pools"] = pools
    out["tls"] = "enabled" if plan.trust else TLS_DISABLED_WARNING
    if plan.runs_superlink:
        out["flwrConfigFile"] = flwr_config_file(plan)
        out["flwrConfig"] = tomli_w.dumps(flwr_config(plan))
    return out


def warnings(plan: FederationPlan) -> list[str]:
    """What the stack deploys as asked but a reviewer should know (printed by `pulumi
    preview`/`up` and by an offline render)."""
    out = []
    if plan.runs_superlink and plan.exposed and not plan.grpc_era and not plan.fleet_proxy:
        out.append(
            f"superlink.exposeControlApi is true: Flower {plan.version} serves the Fleet and Control APIs on one port "
            f"({plan.ports.fleet}), and no Fleet-only proxy stands in front of it, so whoever reaches the SuperLink "
            "from outside the cluster reaches its Control API (`flwr run` runs code at every site, `flwr supernode "
            "register` admits nodes). Limit who reaches it (superlink.service.loadBalancerSourceRanges), or remove "
            "exposeControlApi and give operators superlink.controlService instead."
        )
    if plan.runs_superlink and plan.exposed and plan.grpc_era and not plan.control_apart:
        sl, names = plan.spec.superlink, plan.names
        out.append(
            f"superlink.exposeControlApi is true: Service {names.superlink} (type {sl.service.type}) carries Flower "
            f"{plan.version}'s Control API port ({plan.ports.control}) next to its Fleet port ({plan.ports.fleet}), so "
            "whatever exposes that Service outside the cluster exposes the Control API too (`flwr run` runs code at "
            "every site, `flwr supernode register` admits nodes), guarded only by the NetworkPolicy (the "
            "registration Job and the configured sources), which some clusters do not enforce. Limit who reaches it "
            f"(superlink.service.loadBalancerSourceRanges), or remove exposeControlApi: the Control API then moves "
            f"to the ClusterIP Service {names.superlink_control}."
        )
    if plan.fleet_proxy and plan.spec.superlink.control_service.type == "LoadBalancer":
        ranges = ", ".join(plan.spec.superlink.control_service.load_balancer_source_ranges)
        out.append(
            f"superlink.controlService is a LoadBalancer: the Control API (`flwr run`, `flwr supernode register`) is "
            f"reachable from outside the cluster by {ranges}."
        )
    if plan.trust is None and (plan.remote is not None or (plan.runs_superlink and plan.exposure.by_config)):
        out.append(TLS_DISABLED_WARNING + " This federation crosses cluster boundaries.")
    elif plan.trust is None and plan.runs_superlink and plan.exposed:
        out.append(
            f"{TLS_DISABLED_WARNING} The SuperLink is reachable from outside its cluster "
            f"(a {plan.spec.superlink.service.type} Service)."
        )
    if plan.runs_superlink and plan.exposed and not plan.node_auth and plan.role != "hub":
        out.append(
            "The SuperLink is reached from outside its cluster without node authentication: any host that reaches "
            "its Fleet port and trusts the CA may join as a SuperNode. Set nodeAuth.enabled: true."
        )
    if plan.registers_nodes and not plan.spec.superlink.persistence.enabled:
        out.append(
            "superlink.persistence.enabled is false: node registrations live in memory and are lost when the "
            "SuperLink restarts, and the registration Job runs again only when the trusted keys change. Re-run "
            "the exported registerScript after a restart, or keep persistence on."
        )
    for pool in plan.spec.supernodes.pools:
        if pool.service.type != "ClusterIP":
            out.append(_exposed_api_warning(plan, pool))
    if plan.remote is not None and not plan.remote.cidrs:
        out.append(
            f"SuperNodes may reach port {plan.remote.endpoint.port} at any address (the hub's address is a name): "
            "set supernodes.superlink.cidrs to the hub's addresses to confine the pods that run ClientApps next to "
            "this site's data."
        )
    out += prerelease_warnings(plan)
    out += _version_skew_warnings(plan)
    out += _site_era_warnings(plan)
    out += _skew_window_warnings(plan)
    return out


def _skew_window_warnings(plan: FederationPlan) -> list[str]:
    """A hub's sites, or a site's hub, in its era but outside the skew window (flower/skew.py)."""
    row = f"({WHERE}: {ROWS['outside']})"
    out = []
    for site, version in plan.site_versions:
        theirs = FlowerVersion.parse(version)
        if theirs is not None and outside_window(plan.version, theirs):
            out.append(
                f"Site {site} runs Flower {theirs}, this hub {plan.version}: more than {WINDOW_MINORS} minor release "
                f"apart {row}. Its SuperNodes may connect, but this pair is untested: move the site (or this hub) "
                "within one minor release of the other."
            )
    hub = FlowerVersion.parse(plan.remote.hub_version) if plan.remote and plan.remote.hub_version else None
    if hub is not None and outside_window(hub, plan.version):
        out.append(
            f"The hub runs Flower {hub}, this site {plan.version}: more than {WINDOW_MINORS} minor release apart "
            f"{row}. This site's SuperNodes may connect, but this pair is untested: set version within one minor "
            "release of the hub's."
        )
    return out


def prerelease_warnings(plan: FederationPlan) -> list[str]:
    """A pre-release is planned as its release (flower/versions.py), which it may not yet be: say so."""
    v = plan.version
    if not v.is_prerelease:
        return []
    return [
        f"Flower {v} is a pre-release of {v.release} ({v.prerelease_kind}): it is planned as {v.release} (its "
        f"command lines, feature gates and rules), which it may not yet match, and its state migrations are not final "
        "either (keep the backup the state guard takes before it opens the state). Run a release in production."
    ]


def _site_era_warnings(plan: FederationPlan) -> list[str]:
    """A hub whose sites still run the other era (a site refuses the hub's era change
    itself, so the hub only warns: one of the two moves first)."""
    era = era_of(str(plan.version))
    behind = [f"{site} ({version})" for site, version in plan.site_versions if era_of(version) not in (None, era)]
    if not behind:
        return []
    return [
        f"Flower {plan.version} is the {era}; sites {', '.join(behind)} run the other era: their SuperNodes cannot "
        f"connect until each moves to the {era} too (their stacks refuse this hub until then). Move the hub and "
        f"its sites in one window ({ACROSS_ERAS})."
    ]


def _flower_images(plan: FederationPlan) -> list[tuple[str, str]]:
    """(who runs, image) for every Flower container of the stack."""
    out = []
    if plan.runs_superlink:
        out.append(("The SuperLink runs", plan.superlink_image))
        if plan.process_isolation:
            out.append(("The ServerApp SuperExec runs", plan.serverapp_superexec_image))
    for pool in plan.spec.supernodes.pools:
        out.append((f"Pool {pool.name}'s SuperNodes run", plan.supernode_image(pool)))
        if plan.process_isolation:
            out.append((f"Pool {pool.name}'s SuperExecs run", plan.clientapp_superexec_image(pool)))
    return out


def _version_skew_warnings(plan: FederationPlan) -> list[str]:
    """Validation admits any image of the federation's Flower dialect (a command line is the same across
    it); a minor version apart still runs two Flowers against each other, which nothing here tests."""
    return [
        f"{who} Flower {theirs}{' (a pre-release)' if theirs.is_prerelease else ''} ({image}) in a federation of "
        f"Flower {plan.version}: their command lines "
        f"are written for {plan.version} (the same dialect), but the components then talk across Flower "
        f"versions, which this project's tests never run. Give every image a {plan.version} tag, or set "
        "`version` to the Flower they all run."
        for who, image in _flower_images(plan)
        if (theirs := version_from_image(image)) is not None and theirs != plan.version
    ]


def _exposed_api_warning(plan: FederationPlan, pool: Pool) -> str:
    exposed = f"Pool {pool.name}: the SuperNode's {{}} is exposed outside the cluster by a {pool.service.type} Service"
    limit = "Limit who reaches it (the load balancer's source ranges, a private network)."
    if plan.grpc_era:
        return (
            exposed.format("ClientAppIo API")
            + ", in plaintext (by Flower's design): whoever reaches it can take and answer its ClientApp tasks. "
            + limit
        )
    if plan.runtime_trust is None:
        return (
            exposed.format("Runtime API")
            + " without TLS (insecure: true): the SuperExec auth secret guards it, but its "
            "traffic can be read on the way. " + limit
        )
    runtime = plan.runtime_trust
    ca = f"the site's own CA (Secret {runtime.pool_ca_secret(pool.name)})" if runtime.own_ca else "the federation's CA"
    return (
        exposed.format("Runtime API")
        + f", over TLS with the pool's certificate: SuperExecs there need {ca}, a name the certificate carries "
        "(service.externalNames) and the pool's SuperExec auth secret. " + limit
    )
