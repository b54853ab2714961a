"""The component provider's entry point: Pulumi runs it, with the engine's address, when a
program that added this package (`pulumi package add`) constructs a Federation."""

from flower_federation.provider.server import main

main()
