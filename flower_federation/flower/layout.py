"""Where things live inside our pods: mount paths, volume names, container names and the
env vars we set. Builders place them; rules reserve them, so a user's volume or env var
can never shadow one of ours. No logic here."""

from __future__ import annotations

from flower_federation.flower.node_config import NODE_NAME_ENV, POD_INDEX_ENV
from flower_federation.kube.naming import (
    NODE_REGISTRATION,
    SUPEREXEC_CLIENTAPP,
    SUPEREXEC_SERVERAPP,
    SUPERLINK,
    SUPERNODE,
)

FLOWER_UID = 49999

# Containers are named after the component they run (and the registration Job's after its job).
MANAGED_CONTAINERS = (SUPERLINK, SUPERNODE, SUPEREXEC_SERVERAPP, SUPEREXEC_CLIENTAPP, NODE_REGISTRATION)

# Where Flower writes (../shared/flower-cli.md): FLWR_HOME, caches and temp dirs.
# One emptyDir per container, mounted with a subPath per directory, so containers of
# one pod do not share scratch space.
WRITABLE_PATHS = {
    "flwr-home": "/app/.flwr",
    "cache": "/app/.cache",
    "config": "/app/.config",
    "tmp": "/tmp",
    "var-tmp": "/var/tmp",
}
STATE_VOLUME = "state"
STATE_DIR = "/var/lib/flower"
STATE_FILE = f"{STATE_DIR}/state.db"
TLS_VOLUME = "tls"
TLS_DIR = "/etc/flower/tls"
CA_VOLUME = "ca"
CA_DIR = "/etc/flower/ca"
CA_FILE = f"{CA_DIR}/ca.crt"
NODE_KEY_VOLUME = "node-auth"
NODE_KEY_DIR = "/etc/flower/node-auth"
# The Runtime API a SuperNode serves its SuperExec (HTTP era, process isolation): its
# certificate and key; the SuperExec auth secret both sides sign/verify with.
RUNTIME_TLS_VOLUME = "runtime-tls"
RUNTIME_TLS_DIR = "/etc/flower/runtime-tls"
# A site's own CA for that hop (a site has the hub's CA certificate, never its key): what its SuperNodes name as
# --ssl-ca-certfile and its SuperExecs verify the Runtime API with; apart from CA_DIR, which holds the hub's CA.
RUNTIME_CA_VOLUME = "runtime-ca"
RUNTIME_CA_DIR = "/etc/flower/runtime-ca"
RUNTIME_CA_FILE = f"{RUNTIME_CA_DIR}/ca.crt"
SUPEREXEC_AUTH_VOLUME = "superexec-auth"
SUPEREXEC_AUTH_DIR = "/etc/flower/superexec-auth"
SUPEREXEC_AUTH_KEY = "secret"
SUPEREXEC_AUTH_FILE = f"{SUPEREXEC_AUTH_DIR}/{SUPEREXEC_AUTH_KEY}"
EXECUTOR_CONFIG_VOLUME = "executor-config"
EXECUTOR_CONFIG_DIR = "/etc/flower/executor"
EXECUTOR_CONFIG_FILE = "executor.yaml"
# The Fleet-only proxy in the SuperLink's pod (fleet_proxy.py): its container, config and scratch.
FLEET_PROXY_CONTAINER = "fleet-proxy"
FLEET_PROXY_CONFIG_VOLUME = "fleet-proxy-config"
FLEET_PROXY_CONFIG_DIR = "/etc/fleet-proxy"
# The federation exporter in the SuperLink's pod (builders/monitoring.py): its container, its files (script,
# connection config, key labels) and the server certificate alone (never the key beside it in the TLS Secret).
EXPORTER_CONTAINER = "federation-exporter"
EXPORTER_VOLUME = "federation-exporter"
EXPORTER_DIR = "/etc/flower/exporter"
EXPORTER_CERT_VOLUME = "federation-exporter-cert"
EXPORTER_CERT_DIR = "/etc/flower/exporter-cert"
REGISTRATION_VOLUME = "node-registration"
REGISTRATION_DIR = "/etc/flower/node-registration"
# Supernode-side GPU devices for AMD mountAll.
AMD_DEVICES = {"dev-kfd": "/dev/kfd", "dev-dri": "/dev/dri"}

# Flower sends usage telemetry unless this is "0" (flwr/supercore/telemetry.py).
TELEMETRY_ENV = "FLWR_TELEMETRY_ENABLED"
# Distributed SuperExec replica k: the stable DNS name of SuperNode k.
SUPERNODE_HOST_ENV = "FLOWER_SUPERNODE_HOST"
RESERVED_ENV = (POD_INDEX_ENV, NODE_NAME_ENV, SUPERNODE_HOST_ENV)


def scratch_volume(container: str) -> str:
    return f"scratch-{container}"


RESERVED_VOLUMES = frozenset(
    {
        STATE_VOLUME,
        TLS_VOLUME,
        CA_VOLUME,
        RUNTIME_TLS_VOLUME,
        RUNTIME_CA_VOLUME,
        SUPEREXEC_AUTH_VOLUME,
        NODE_KEY_VOLUME,
        EXECUTOR_CONFIG_VOLUME,
        REGISTRATION_VOLUME,
        FLEET_PROXY_CONFIG_VOLUME,
        scratch_volume(FLEET_PROXY_CONTAINER),
        EXPORTER_VOLUME,
        EXPORTER_CERT_VOLUME,
        scratch_volume(EXPORTER_CONTAINER),
        *AMD_DEVICES,
        *(scratch_volume(c) for c in MANAGED_CONTAINERS),
    }
)
RESERVED_MOUNT_PATHS = frozenset(
    {
        *WRITABLE_PATHS.values(),
        STATE_DIR,
        TLS_DIR,
        CA_DIR,
        RUNTIME_TLS_DIR,
        RUNTIME_CA_DIR,
        SUPEREXEC_AUTH_DIR,
        NODE_KEY_DIR,
        EXECUTOR_CONFIG_DIR,
        REGISTRATION_DIR,
        FLEET_PROXY_CONFIG_DIR,
        EXPORTER_DIR,
        EXPORTER_CERT_DIR,
        *AMD_DEVICES.values(),
    }
)
