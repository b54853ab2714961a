"""What a config change does, offline: the objects added, removed, changed and replaced between two renders
(`changes.py`, with the replace-on-change rules of Kubernetes and pulumi-kubernetes in `replacements.py`), the
federation's topology as Mermaid, its edges made of the NetworkPolicies' own links (`topology.py`), and the
Markdown of a pull-request comment (`markdown.py`). Pure: rendered objects and plans in, text out; no Pulumi."""
