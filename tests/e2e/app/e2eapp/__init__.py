"""Numpy FedAvg app for the e2e tests (tests/e2e)."""
