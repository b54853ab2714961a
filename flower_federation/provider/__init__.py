"""The Pulumi component provider of flower-federation (plugin/PulumiPlugin.yaml hosts it) and its package schema."""
