"""flower-federation: a Flower federation on Kubernetes from stack config."""

from flower_federation.program import run

run()
