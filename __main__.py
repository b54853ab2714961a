"""flower-federation: a Flower federation on Kubernetes from stack config."""

from components.program import run

run()
