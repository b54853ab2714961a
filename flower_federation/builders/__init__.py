"""From a plan to plain Kubernetes objects. No Pulumi here.

- one builder per component: `superlink.py` (its StatefulSet, Services, and the ServerApp SuperExec),
  `supernodes.py` (a pool) with `pool_superexec.py` (its SuperExecs), `registration.py` (the node
  registration and revocation Jobs), `fleet_proxy.py` and `gateway.py` (exposure), `state_guard.py`
  (the SuperLink's backup and downgrade guard);
- what they share: `workload_parts.py` (containers, StatefulSets), `pods.py` (pod and container
  basics), `pod_pipeline.py` (the one order that finishes every pod), `pod_settings.py`, `gpus.py`,
  `resources.py`;
- trust and identity: `trust.py` (the SuperLink's TLS), `appio.py` (the SuperExec hop's TLS and auth),
  `node_auth.py` (node keys), `access.py` (ServiceAccounts, RBAC, the Kubernetes executor's config);
- the network: `network_links.py` (who may talk to whom, written once) and `network.py` (the
  NetworkPolicies made of it);
- `manifests.py`: the whole federation, once, per cluster, with the invariants every render must hold.
"""
