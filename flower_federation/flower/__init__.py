"""Flower as this project sees it: versions and what each accepts (dialects: flags, ports, routes),
where things live inside our pods (layout), node config, public keys and CA certificates as Flower
reads them, the SuperLink's state start-up, and the registration script that runs in the SuperLink's
image (scripts/)."""
