"""From a plan to plain Kubernetes objects: one builder per component (SuperLink, SuperNode
pools, SuperExecs, TLS trust, node auth, access, network), and `manifests.py`, which builds
the whole federation once, per cluster. No Pulumi here."""
