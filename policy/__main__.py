"""The policy pack's entry point: Pulumi runs this file (`pulumi preview --policy-pack policy/`),
with this directory on sys.path. Everything else is in pack.py, which tests import."""

from pack import PACK_NAME, policies
from pulumi_policy import PolicyPack

PolicyPack(name=PACK_NAME, policies=policies())
