"""The CEL rules of the operator's CRD (its README's Troubleshooting table), on its
own examples broken one way at a time: each reported at its config path with the
message verbatim, and all of them together in one run."""

from __future__ import annotations

import pytest

from flower_federation.config.errors import ConfigError
from flower_federation.plan import load_plan
from tests.support.operator_examples import SX, from_cr
from tests.support.operator_readme import MULTIPOOLS, PROCESS, QUICK_START, SUBPROCESS


def _ds_with_replicas():
    config = from_cr(MULTIPOOLS)
    config["supernodes"]["pools"][1]["replicas"] = 2
    return config


def _sts_without_replicas():
    config = from_cr(QUICK_START)
    del config["supernodes"]["pools"][0]["replicas"]
    return config


def _sts_zero_replicas():
    config = from_cr(QUICK_START)
    config["supernodes"]["pools"][0]["replicas"] = 0
    return config


def _process_without_superexec():
    config = from_cr(PROCESS)
    del config["superlink"]["superexecImage"]
    return config


def _subprocess_with_clientapp():
    config = from_cr(SUBPROCESS)
    config["supernodes"]["pools"][0]["images"] = {"superexecClientApp": SX}
    return config


@pytest.mark.parametrize(
    "make,path,message",
    [
        (
            _ds_with_replicas,
            "federation.supernodes.pools[1].replicas",
            "replicas must not be set for pools when mode is DaemonSet",
        ),
        (
            _sts_without_replicas,
            "federation.supernodes.pools[0].replicas",
            "replicas must be set (>=1) for every pool when mode is StatefulSet",
        ),
        (
            _sts_zero_replicas,
            "federation.supernodes.pools[0].replicas",
            "replicas must be set (>=1) for every pool when mode is StatefulSet",
        ),
        (
            _process_without_superexec,
            "federation.superlink.superexecImage",
            "is required when isolationMode=process",
        ),
        (
            _subprocess_with_clientapp,
            "federation.supernodes.pools[0].images.superexecClientApp",
            "must be empty when isolationMode=subprocess",
        ),
    ],
    ids=[
        "daemonset-replicas",
        "statefulset-no-replicas",
        "statefulset-zero-replicas",
        "process-no-superexec-image",
        "subprocess-with-clientapp-image",
    ],
)
def test_cel_rule(make, path: str, message: str):
    with pytest.raises(ConfigError) as err:
        load_plan(make(), "dev")
    assert f"{path}: {message}" in str(err.value)
    assert len(err.value.problems) == 1, str(err.value)


def test_cel_rules_are_reported_together():
    # One run lists every broken rule, so a user fixes the config in one pass.
    config = from_cr(PROCESS)
    config["mode"] = "DaemonSet"
    del config["superlink"]["superexecImage"]
    with pytest.raises(ConfigError) as err:
        load_plan(config, "dev")
    text = str(err.value)
    assert "federation.supernodes.pools[0].replicas: replicas must not be set for pools when mode is DaemonSet" in text
    assert "federation.superlink.superexecImage: is required when isolationMode=process" in text
