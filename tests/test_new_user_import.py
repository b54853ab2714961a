"""`python -m flower_federation import` as a new user meets it (GitHub issue 23): the stack file's header is
true of the stack it heads. Its check command passes once the secret config it shows is added (the offline form
of a node key included); every resource figure it states is what the render of the written stack gives; it names
the values file, not where it lay on the importer's disk. A refusal offers --allow-drop only when --allow-drop
would leave nothing refused, and a name too long says which Helm value shortens it."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from flower_federation.flower.public_keys import openssh_from_pem
from flower_federation.importers.resources_note import describe
from tests.support.importing import header, run, run_import, stack_config, write
from tests.support.tls_provider import new_openssh_key

CONFIG_KEY = "flower-federation:federation"


def _validate(path: Path) -> tuple[int, str]:
    from tests.test_new_user_cli import cli

    code, out, err = cli("validate", "--config-file", str(path))
    return code, out + err


# --- node keys: the header's check passes once its secret config is added ---------------------------------------


def _offline_form(text: str) -> str:
    """The YAML the header shows for a copy of the stack file, uncommented."""
    lines = text.split("\nconfig:", 1)[0].splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("# Its offline form"))
    block = []
    for line in lines[start + 1 :]:
        if line.startswith("#     "):
            block.append(line[len("#     ") :])
        elif block:
            break
    assert block, text
    return "\n".join(block) + "\n"


def _pem_key() -> str:
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ec

    key = ec.generate_private_key(ec.SECP384R1())
    pkcs8 = serialization.PrivateFormat.PKCS8
    return key.private_bytes(serialization.Encoding.PEM, pkcs8, serialization.NoEncryption()).decode()


@pytest.mark.parametrize("fmt", ["openssh", "pem"])
def test_a_node_key_import_validates_once_the_offline_form_its_header_shows_is_added(fmt, tmp_path, capsys):
    given = new_openssh_key() if fmt == "openssh" else _pem_key()
    key = given if fmt == "openssh" else openssh_from_pem(given)  # the header says: as the command converts it
    values = {"global": {"nodeAuth": {"enabled": True, "authSupernodePrivateKey": given}}}
    values["supernode"] = {"image": {"tag": "1.26.1"}}
    code, out, err = run_import(capsys, "helm", write(tmp_path, "v.yaml", values), "--output-dir", str(tmp_path))
    assert code == 0, err
    (path,) = tmp_path.glob("Pulumi.*.yaml")
    text = path.read_text()
    assert given.splitlines()[1] not in text  # never the key itself
    # As written, the secret is missing, and the header says so where it says how to check the file.
    said = " ".join(line.lstrip("# ") for line in text.split("\nconfig:", 1)[0].splitlines())
    assert re.search(
        r"Check it with `python -m flower_federation validate --config-file Pulumi\.\S+\.yaml` once its secret config",
        said,
    ), said
    assert _validate(path)[0] == 1
    # The offline form, the key put where it says.
    form = _offline_form(text)
    placeholder = re.search(r"<[^>]*supernode-0\.key[^>]*>", form)
    assert placeholder, form
    indent = form[: placeholder.start()].rsplit("\n", 1)[-1]
    assert indent.strip() == "", form
    filled = form.replace(placeholder.group(0), key.strip().replace("\n", "\n" + indent))
    copy = tmp_path / "copy" / path.name
    copy.parent.mkdir()
    copy.write_text(text.replace("\nconfig:\n", "\nconfig:\n" + _indented(filled, 2), 1))
    code, said = _validate(copy)
    assert code == 0, said


def _indented(text: str, n: int) -> str:
    return "".join(" " * n + line + "\n" for line in text.splitlines())


# --- resources: the header's figures are the render's ----------------------------------------------------------

HELM_CASES: dict[str, dict[str, Any]] = {
    "subprocess": {"supernode": {"image": {"tag": "1.26.1"}}},
    # A request above the preset's limit raises the limit: the header once said 384Mi where the render has 512Mi.
    "process, a request over the preset": {
        "supernode": {
            "image": {"tag": "1.26.1"},
            "isolationMode": "process",
            "resources": {"requests": {"memory": "512Mi"}},
        },
        "superexec": {"enabled": True, "image": {"tag": "1.26.1"}},
    },
    "a GPU": {
        "supernode": {"image": {"tag": "1.26.1"}, "resources": {"limits": {"nvidia.com/gpu": 1}}},
    },
}

OPERATOR_CR = {
    "apiVersion": "flwr.exalsius.ai/v1",
    "kind": "Federation",
    "metadata": {"name": "gpufed", "namespace": "flower"},
    "spec": {
        "isolationMode": "process",
        "version": "1.26.1",
        "superlink": {"superexecImage": "flwr/superexec:1.26.1"},
        "supernodes": {
            "pools": [
                {
                    "name": "gpu",
                    "replicas": 2,
                    "images": {"superexecClientApp": "flwr/superexec:1.26.1"},
                    "gpu": {"enabled": True, "vendor": "nvidia"},
                },
                {
                    "name": "cpu",
                    "replicas": 1,
                    "images": {"superexecClientApp": "flwr/superexec:1.26.1"},
                    "supernodeResources": {"requests": {"memory": "1Gi"}},
                },
            ]
        },
    },
}


def _rendered_containers(config: dict[str, Any], stack: str) -> dict[tuple[str, str], dict[str, Any]]:
    """{(workload, container): resources} of the written stack's render."""
    found = {}
    for obj in run(config, stack).manifests():
        if obj["kind"] in ("StatefulSet", "DaemonSet", "Deployment"):
            for c in obj["spec"]["template"]["spec"]["containers"]:
                found[(obj["metadata"]["name"], c["name"])] = c.get("resources", {})
    return found


def _stated(text: str) -> list[tuple[str, str, str]]:
    """(container, workload, figures) of every container the header states the resources of."""
    return re.findall(r"container (\S+) of (\S+): (.*?)(?=; |\. |\.$)", header(text), re.M)


def _check_header_against_render(out: str) -> None:
    stack = re.match(r"# Pulumi\.(.+)\.yaml\n", out).group(1)
    rendered = _rendered_containers(stack_config(out), stack)
    stated = _stated(out)
    assert stated, header(out)
    for container, workload, figures in stated:
        assert (workload, container) in rendered, (workload, container, sorted(rendered))
        assert figures == describe(rendered[(workload, container)]), (workload, container, figures)
    # Every container that runs Flower is stated.
    assert {(w, c) for c, w, _ in stated} == set(rendered)


@pytest.mark.parametrize("case", list(HELM_CASES))
@pytest.mark.parametrize("preserve", [False, True], ids=["ours", "preserved"])
def test_the_helm_headers_resource_figures_are_the_renders(case, preserve, tmp_path, capsys):
    flags = ["--preserve-behaviour"] if preserve else []
    code, out, err = run_import(capsys, "helm", write(tmp_path, "v.yaml", HELM_CASES[case]), *flags)
    assert code == 0, err
    _check_header_against_render(out)


@pytest.mark.parametrize("preserve", [False, True], ids=["ours", "preserved"])
def test_the_operator_headers_resource_figures_are_the_renders(preserve, tmp_path, capsys):
    flags = ["--preserve-behaviour"] if preserve else []
    code, out, err = run_import(capsys, "operator", write(tmp_path, "cr.yaml", OPERATOR_CR), *flags)
    assert code == 0, err
    _check_header_against_render(out)
    said = header(out)
    assert "100m CPU and 256Mi" not in said
    if preserve:  # the operator's behaviour: no preset, so no memory limit it never set
        assert stack_config(out)["resourcesPreset"] == "none"
        rendered = _rendered_containers(stack_config(out), "gpufed")
        assert not any("memory" in r.get("limits", {}) for r in rendered.values())


def test_a_gpu_clientapp_under_a_preset_memory_limit_is_warned_of(tmp_path, capsys):
    code, out, err = run_import(capsys, "operator", write(tmp_path, "cr.yaml", OPERATOR_CR))
    assert code == 0, err
    limit = _rendered_containers(stack_config(out), "gpufed")[("gpufed-supernode-gpu", "superexec-clientapp")]
    (note,) = [line for line in header(out).splitlines() if "GPU" in line and "OOM" in line]
    assert f"memory limit of {limit['limits']['memory']}" in note
    assert "supernodes.pools[0].superexecResources.limits.memory" in note


# --- the values file by its name, --allow-drop only when it would do, long names -----------------------------------


def test_the_header_names_the_values_file_not_its_path(tmp_path, capsys):
    code, out, err = run_import(capsys, "helm", write(tmp_path, "values.yaml", HELM_CASES["subprocess"]))
    assert code == 0, err
    assert str(tmp_path) not in out
    assert "values.yaml" in header(out).splitlines()[1]
    code, out, err = run_import(capsys, "operator", write(tmp_path, "cr.yaml", OPERATOR_CR))
    assert code == 0 and str(tmp_path) not in out and "cr.yaml" in out


def test_allow_drop_is_offered_only_when_every_refusal_can_be_dropped(tmp_path, capsys):
    droppable = {"supernode": {"image": {"tag": "1.26.1"}, "serviceAccount": {"enabled": False}}}
    code, _, err = run_import(capsys, "helm", write(tmp_path, "v.yaml", droppable))
    assert code == 1 and "rerun with --allow-drop" in err
    both = {"supernode": {"image": {"tag": "1.26.1"}, "serviceAccount": {"enabled": False}, "isolationMode": "x"}}
    code, _, err = run_import(capsys, "helm", write(tmp_path, "v.yaml", both))
    assert code == 1 and "--allow-drop" not in err, err


def test_a_release_name_too_long_says_which_helm_value_to_set(tmp_path, capsys):
    path = write(tmp_path, "v.yaml", HELM_CASES["subprocess"])
    code, _, err = run_import(capsys, "helm", path, "--release", "hospital-a-production-federated-learning-release")
    assert code == 1
    lines = [line for line in err.splitlines() if "StatefulSet name may have at most 52" in line]
    assert lines, err
    for line in lines:
        assert "fullnameOverride" in line, line
    assert any("supernode.name" in line.split(":", 1)[1] for line in lines), err


def test_an_output_dir_that_does_not_exist_yet_is_made(tmp_path, capsys):
    target = tmp_path / "stacks" / "site"
    code, out, err = run_import(
        capsys, "helm", write(tmp_path, "v.yaml", HELM_CASES["subprocess"]), "--output-dir", str(target)
    )
    assert code == 0, err
    assert len(list(target.glob("Pulumi.*.yaml"))) == 1
