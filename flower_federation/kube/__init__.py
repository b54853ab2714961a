"""Kubernetes vocabulary the rest is written in: object types, names and labels, quantities,
Pod Security levels, the OpenAPI schema checks, and YAML in and out."""
