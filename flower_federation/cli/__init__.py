"""The command line: `python -m flower_federation validate | render | check | diff | schema | docs | import`.
Rendering runs the real Pulumi program under Pulumi's mocks (offline.py)."""
