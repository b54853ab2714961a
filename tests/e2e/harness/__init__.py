"""A small kubelet, kube-proxy and cluster DNS on one Linux host, for end-to-end tests:
it runs the pods of rendered manifests as real processes, with real Flower.

What it does, as Kubernetes would:

- **Objects.** `Cluster.apply(manifests)` keeps Secrets, ConfigMaps, Services and
  workloads (StatefulSet, Deployment, DaemonSet) like an API server would.
  `create_pods()` makes the pods a controller would: StatefulSet pod `<sts>-<k>` with
  the labels `apps.kubernetes.io/pod-index` and `statefulset.kubernetes.io/pod-name`,
  hostname `<sts>-<k>` and subdomain `serviceName`; one Deployment pod per replica; one
  DaemonSet pod per emulated node (`node-a`, `node-b`) its required node affinity /
  nodeSelector on `metadata.name` / `kubernetes.io/hostname` admits.
- **Network.** A network namespace `<id>-node` stands for the node: it holds a bridge
  with the first address of a random 10.x.y.0/24 that no host route or address uses, and
  is where probes come from. Each pod gets a network namespace `<id>-<pod>` with `lo`
  and `eth0` (a veth whose peer is on the bridge) and its own address; all of a pod's
  containers share it. Nothing is created in the host's network namespace and no host
  address is used.
- **DNS.** Per pod, `/etc/netns/<netns>/hosts` (bind-mounted over /etc/hosts by
  `ip netns exec`) maps what cluster DNS would answer: a ClusterIP Service's names
  (`svc`, in its own namespace only; `svc.ns`, `svc.ns.svc`, `svc.ns.svc.<domain>`) to
  its single backing pod (the Service's virtual IP; a Service port must equal its
  target port, since no port translation is emulated); a headless Service's names to
  every pod it selects, and `<hostname>.<svc>...` for StatefulSet pods; plus the pod's
  own hostname, as the kubelet writes it. `resolv.conf` points at a closed local port, so
  other names fail at once (there is no network beyond the bridge).
- **Volumes.** Secrets and ConfigMaps (with `items`, `defaultMode`/`mode`, then the
  kubelet's fsGroup ownership: group fsGroup, `| 0440`, read-only mount), emptyDirs (mode
  2777, group fsGroup, fresh for every pod, subPath directories created like the
  kubelet), PVCs of volumeClaimTemplates and persistentVolumeClaim volumes (directories
  `<claim>-<pod>` that outlive pods, group fsGroup, 2775). Each container's mounts
  appear at their mountPaths in a private mount namespace (see podinit.py); mountpoints
  missing on the host (e.g. /etc/flower/ca, /app/.flwr, /var/lib/flower) are created and
  removed again at the end, exactly those.
- **Init containers** run one after the other before the pod's containers, each until
  it exits 0 (restarted with the back-off below otherwise).
- **Containers.** The entrypoint of the image (`flwr/superlink:<v>` ->
  `flower-superlink` of the Flower venv of version `<v>`: the image tag must be that
  version), or `command`; nginx images (`nginxinc/nginx-unprivileged`, `nginx`, any tag:
  the Fleet-only proxy's) run their `command`, whose `nginx` is the host's Debian nginx,
  with the image's environment (PATH, HOME, NGINX_VERSION) and working dir `/`; `args`
  with the kubelet's `$(VAR)` expansion; env from values, the downward API
  (`metadata.name`, `metadata.namespace`, `spec.nodeName`, `metadata.labels[...]`,
  `status.podIP`, ...), Secret/ConfigMap keys and `envFrom`; Flower's image env
  `HOME=/app`, `PATH` (venv first), `HOSTNAME`; working dir `/app` (the images'
  WORKDIR) unless `workingDir`; runAsUser/runAsGroup/fsGroup/
  supplementalGroups, runAsNonRoot enforced, allowPrivilegeEscalation=false
  (no_new_privs), capabilities drop ALL (empty bounding set), readOnlyRootFilesystem
  (`/` remounted read-only). Each container is PID 1 of its own PID namespace, so when
  it dies everything it started dies with it, as in a container. In a warm cluster
  (`Cluster(warm=True)`, warm.py), Flower's daemons, and the programs they start, are forks
  of a process that imported Flower once, in the same namespaces with the same identity.
- **Restarts.** restartPolicy Always: a container that exits is started again after a
  back-off of 1 s, doubling, capped at 8 s (the kubelet: 10 s ... 5 min), reset once it
  ran twice the cap. Logs of every container incarnation go to one file per container.
  restartPolicy OnFailure restarts it only after a failure, Never not at all: the pod is
  then Succeeded (every container exited 0) or Failed.
- **Jobs** (jobs.py). A Job's pods run to completion (restartPolicy Never): one pod at a
  time, `<job>-<5 chars>` with the `job-name` labels; a failed pod is followed by a new
  one (fresh volumes and address) after a back-off of 1 s doubling (the controller: 10 s
  ... 6 min) until one exits 0 (Complete), `backoffLimit` pods failed,
  `activeDeadlineSeconds` passed or a `podFailurePolicy` rule on exit codes says FailJob
  (Failed); every pod's log is kept. Jobs are made by
  `create_pods()` but started only by `start_jobs()` (whoever deploys orders them: Pulumi
  creates a Job once what it depends on is ready), and their pods are not in
  `Cluster.pods` (a completed pod is never Ready). `update(manifests)` applies a later
  render of the same stack: objects updated, removed ones deleted (a Job with its pods),
  new Jobs created; a changed, new or removed long-running workload is refused (a
  changed StatefulSet is rolled out by rollout.py instead).
- **Partitions.** `Cluster.partition(pods)` cuts the given pods off from one another:
  their bridge ports are isolated, so frames between them are dropped silently (no
  reset, no ICMP), as on a split network, while the node (the kubelet's probes) and
  every other pod and client still reach them; `heal()` joins them again.
- **Deletion and rolling updates** (rollout.py). `Pod.terminate(grace)` is the kubelet's
  graceful deletion: SIGTERM to every container, SIGKILL after the grace period.
  `rolling_update(cluster, manifests)` applies a later render whose StatefulSet changed
  as its controller does (RollingUpdate: highest ordinal first, one pod at a time,
  the next once the new one is Ready for `minReadySeconds`; `partition` honoured).
- **Between clusters** (wan.py). Several clusters (one per stack or organisation) meet
  on a WAN: each node gets a leg on a shared bridge and routes its pods to it (only to
  it: no pod reaches another cluster's pods); a Service of type LoadBalancer gets a WAN
  address where forwarder.py relays its ports to the backing pod (TCP, TLS passed
  through), and a public name for it resolves in the clusters it is published to.
  gateway.py does for a Gateway API Gateway what a controller would: its HTTPRoutes,
  BackendTLSPolicies and ReferenceGrants programmed into an nginx on a WAN address of its
  own, TLS terminated with the listener's certificate, backends verified as the policies say.
- **NetworkPolicies** (netpol.py compiles, enforce.py loads). Every NetworkPolicy
  applied is enforced as a CNI would: an nftables table in each pod's (and client's)
  network namespace, compiled from the policies' pod and namespace selectors, ipBlocks
  and ports (named ports included) against the pods' labels, namespaces and addresses;
  a pod no policy selects for a direction is open in it, an isolated one drops
  everything its rules do not allow; loopback, replies and the node (the kubelet's
  probes) always pass. The tables follow pods, clients and objects as they change
  (`write_dns` runs on every change), before a new pod's containers start. A client
  netns stands for a pod with the labels `add_client` gives it. `nft` is required: a
  cluster refuses to start without it. Limits (DNS as hosts files, ipBlock on pod
  addresses, IPv4 only, ...): netpol.py's docstring.
- **Probes.** From the node namespace to the pod IP (prober.py): gRPC health (SERVING),
  HTTP(S) GET (200-399, certificate not verified), TCP connect; exec probes in the container
  itself (exec_probes.py: its namespaces, user, environment and working dir; exit 0 passes,
  a command still running after timeoutSeconds fails and is killed); with initialDelaySeconds,
  timeoutSeconds, failureThreshold, successThreshold. Liveness every periodSeconds;
  `failureThreshold` failures in a row kill the container (it restarts). Readiness
  every periodSeconds once ready; while not ready, every min(periodSeconds, 1 s): the
  kubelet probes again at once on pod status updates, and this keeps tests fast. A pod
  is Ready when every container is running and its readiness probe (if any) passes.
- **Cleanup.** Every process runs in one of our network namespaces; `close()` kills
  them (PID namespaces first, then whatever `ip netns pids` still finds), deletes the
  namespaces (their veths and the bridge go with them), the /etc/netns entries, the
  work directory and the mountpoints it created. `close()` runs from `try/finally` in the
  fixtures, at interpreter exit and on SIGTERM/SIGHUP; every wait is bounded.

What it does not emulate: scheduling, resource requests/limits, seccomp, Service
virtual IPs and port translation (a ClusterIP name resolves to its backing pod's
address, which stays the same when that pod is recreated, as a virtual IP would),
readiness-gated endpoints, sidecar (restartPolicy Always) init containers,
Secret updates after a pod started (a changed ConfigMap is written into running pods'
volumes on `update`, as the kubelet syncs it; subPath mounts keep the old file), image
pulls, evictions (PodDisruptionBudgets bind them; a rollout's are checked by scenario
11), Deployment and DaemonSet rollouts, ServiceAccounts and RBAC.

Modules: host.py (can it run here, tools, signals), network.py (namespaces, bridge,
subnet, port isolation), dns.py (hosts files), volumes.py (volumes, mounts, mountpoints, the image's
paths), containers.py (supervision, restarts), probes.py (the node's prober, probe loops and
kills), exec_probes.py (a command in a running container), pods.py (a pod's sandbox, volumes
and containers, the container launch),
workload_pods.py (controllers' pods), jobs.py (the Job controller), cluster.py (objects,
pods, DNS), cluster_network.py (bridge addresses, routes, partitions, clients),
cluster_processes.py (what runs where, commands in a client namespace), cleanup.py (every
live cluster, closed at exit; leftovers), rollout.py (a StatefulSet's rolling update), wan.py
(between clusters: routes, load balancers, public names), gateway.py (a Gateway API
controller's data plane on the WAN; the controller: gateway_controller.py, gateway_api.py,
gateway_nginx.py), netpol.py (NetworkPolicies -> compiled rules, pure; netpol_model.py,
and netpol_nft.py: nftables rules), enforce.py (loading them per pod, reachability probes,
a host outside the cluster).
"""

from tests.e2e.harness.cleanup import CREATED, close_all, install_cleanup_handlers, leftovers
from tests.e2e.harness.cluster import Cluster
from tests.e2e.harness.containers import Container
from tests.e2e.harness.host import HarnessError, NotReady, skip_reason
from tests.e2e.harness.pods import Pod
from tests.e2e.harness.volumes import EXPOSED, MOUNTPOINTS

__all__ = [
    "CREATED",
    "EXPOSED",
    "MOUNTPOINTS",
    "Cluster",
    "Container",
    "HarnessError",
    "NotReady",
    "Pod",
    "close_all",
    "install_cleanup_handlers",
    "leftovers",
    "skip_reason",
]
