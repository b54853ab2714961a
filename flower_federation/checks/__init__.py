"""The federation's promises, checked on any Kubernetes objects: ours (`render`), a `helm template`
of Flower's charts, `kubectl get -o yaml`, or a Pulumi stack's resources (the policy pack in
policy/ adapts them). No Pulumi here: plain dicts in, violations out.

- `model.py`          a policy, a violation (object and field), and `UNKNOWN` (Pulumi preview).
- `pods.py`           pods in any workload, and which Flower program each container runs.
- `exposure.py`       what is reachable from outside the cluster (Services, Ingresses, routes).
- `flower_version.py` which Flower a container is checked as (its tag's; none: the newest, or older by its flags).
- `flower_policies.py` TLS, the SuperExec hop's TLS, node authentication, the Control API.
- `gateway_grants.py` no ReferenceGrant hands Gateways the SuperLink's own server key.
- `pod_policies.py`   NetworkPolicies, Pod Security restricted, memory limits, API tokens, images.
- `policies.py`       every policy, in order, and `run` over a set of objects.
- `reading.py`        multi-document YAML (and `kind: List`) into objects, per cluster.
"""
