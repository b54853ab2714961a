"""`python -m flower_federation import helm`, the chart's node key (`global.nodeAuth.*`): a key in PEM (PKCS#8, as the
chart's guide allows) reaches the stack in OpenSSH format, the one Flower's SuperNode reads, through the command
the stack file prints; a key the SuperNode could not use, or a public key that is not the private key's, is
refused at import by its path, never quoted."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa

from flower_federation.flower.public_keys import key_problem, public_key
from flower_federation.plan import load_plan
from tests.support.importing import header, run_import, stack_config, write
from tests.support.tls_provider import new_openssh_key

PRIVATE = "global.nodeAuth.authSupernodePrivateKey"
PUBLIC = "global.nodeAuth.authSupernodePublicKey"


def _values(private: str, public: str | None = None) -> dict:
    auth = {"enabled": True, "authSupernodePrivateKey": private}
    if public is not None:
        auth["authSupernodePublicKey"] = public
    return {"global": {"nodeAuth": auth}, "supernode": {"image": {"tag": "1.26.1"}}}


def _pem(key, fmt=serialization.PrivateFormat.PKCS8, encryption=None) -> str:
    return key.private_bytes(serialization.Encoding.PEM, fmt, encryption or serialization.NoEncryption()).decode()


def _public(key) -> str:
    return key.public_key().public_bytes(serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH).decode()


def _secret_commands(out: str) -> list[str]:
    lines = out.split("\nconfig:", 1)[0].splitlines()
    start = lines.index("# Secret config, never in this file: set it with")
    end = next(i for i, line in enumerate(lines) if line.startswith("# Its offline form"))  # then the offline form
    return [line.removeprefix("#   ") for line in lines[start + 1 : end]]


def _run_commands(commands: list[str], key_text: str, tmp_path: Path) -> str:
    """What the printed commands set, run as printed in bash, with the key file written first (as the comment says)
    and `pulumi` standing in to record the value."""
    run = tmp_path / "run"
    run.mkdir()
    (run / "supernode-0.key").write_text(key_text)
    script = 'pulumi() { printf %s "${@: -1}" > set.value; }\n' + "\n".join(c for c in commands if c[0] != "#")
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"}
    subprocess.run(["bash", "-euc", script], cwd=run, env=env, check=True)
    return (run / "set.value").read_text()


@pytest.mark.parametrize("fmt", ["PKCS8", "TraditionalOpenSSL"])
def test_a_pem_key_reaches_the_stack_as_the_same_key_in_openssh_format(fmt, tmp_path, capsys):
    key = ec.generate_private_key(ec.SECP384R1())
    pem = _pem(key, getattr(serialization.PrivateFormat, fmt))
    code, out, err = run_import(capsys, "helm", write(tmp_path, "v.yaml", _values(pem, _public(key) + " site-a")))
    assert code == 0, err
    for line in pem.splitlines()[1:-1]:
        assert line not in out
    assert stack_config(out)["nodeAuth"] == {"enabled": True, "keySource": "config"}
    assert f"{PRIVATE} is in PEM format; Flower's SuperNode reads OpenSSH keys only" in header(out)
    value = _run_commands(_secret_commands(out), pem, tmp_path)
    assert value.startswith("-----BEGIN OPENSSH PRIVATE KEY-----")
    assert key_problem(value) is None and public_key(value) == _public(key)  # what the SuperNode loads, same key
    config = stack_config(out)
    load_plan(config, "site", {"supernode": {"0": value}})  # validates


def test_an_openssh_key_is_set_as_it_is(tmp_path, capsys):
    text = new_openssh_key()
    code, out, err = run_import(capsys, "helm", write(tmp_path, "v.yaml", _values(text)))
    assert code == 0, err
    assert "PEM format" not in out
    assert _run_commands(_secret_commands(out), text, tmp_path) == text.rstrip("\n")


def _refused_keys() -> dict[str, tuple[str, str]]:
    p256 = ec.generate_private_key(ec.SECP256R1())
    p384 = ec.generate_private_key(ec.SECP384R1())
    rsa_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    locked = serialization.BestAvailableEncryption(b"secret")
    return {
        "pkcs8 p256": (_pem(p256), "it is an ECDSA key on secp256r1"),
        "pkcs8 rsa": (_pem(rsa_key), "it is not an ECDSA key"),
        "pkcs8 with a passphrase": (_pem(p384, encryption=locked), "it is passphrase-protected"),
        "pkcs8 unreadable": (
            "-----BEGIN PRIVATE KEY-----\nbm90IGEga2V5\n-----END PRIVATE KEY-----\n",
            "could not be read",
        ),
        "openssh p256": (new_openssh_key("P256"), "must be an ECDSA P-384 private key"),
        # The guide's own example, `[...]` for the key.
        "openssh placeholder": (
            "-----BEGIN OPENSSH PRIVATE KEY-----\n[...]\n-----END OPENSSH PRIVATE KEY-----\n",
            "could not be read",
        ),
        "not a key": ("bm90IGEga2V5", "must be an ECDSA P-384 private key"),
    }


@pytest.mark.parametrize("case", list(_refused_keys()))
def test_a_key_the_supernode_could_not_use_is_refused_at_import(case, tmp_path, capsys):
    text, why = _refused_keys()[case]
    values = _values(text)
    code, out, err = run_import(capsys, "helm", write(tmp_path, "v.yaml", values))
    assert code == 1 and out == ""
    (line,) = [line for line in err.splitlines() if line.startswith(f"  - {PRIVATE}: ")]
    assert why in line
    for secret in text.splitlines()[1:-1] or [text]:
        assert secret not in err
    code, out, err = run_import(capsys, "helm", write(tmp_path, "v.yaml", values), "--allow-drop")
    assert code == 0, err
    assert stack_config(out)["nodeAuth"] == {"enabled": True}  # keys generated, one per SuperNode
    assert f"# Dropped (--allow-drop), not in this stack:\n#   - {PRIVATE}: " in out
    assert "nodeAuthKeys" not in out


def test_a_public_key_that_is_not_the_private_keys_is_refused(tmp_path, capsys):
    key, other = ec.generate_private_key(ec.SECP384R1()), ec.generate_private_key(ec.SECP384R1())
    for public, why in (
        (_public(other) + " site-a", "not the public key of global.nodeAuth.authSupernodePrivateKey"),
        ("ecdsa-sha2-nistp384 [...]", "must be an OpenSSH ECDSA public key line"),
    ):
        code, out, err = run_import(capsys, "helm", write(tmp_path, "v.yaml", _values(_pem(key), public)))
        assert code == 1 and out == ""
        assert f"  - {PUBLIC}: {why}" in err
        assert public not in err
    code, out, err = run_import(
        capsys, "helm", write(tmp_path, "v.yaml", _values(_pem(key), _public(other))), "--allow-drop"
    )
    assert code == 0, err  # the public key is derived from the private key here anyway
    assert stack_config(out)["nodeAuth"] == {"enabled": True, "keySource": "config"}
    assert f"#   - {PUBLIC}: not the public key" in out
