"""Flower as this project sees it: versions and what each accepts (dialects), where things
live inside our pods, node config, public keys and the SuperLink's state start-up."""
