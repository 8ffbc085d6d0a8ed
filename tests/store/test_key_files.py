"""A bad snapshot key file is a configuration error that names its key, never its content."""

from __future__ import annotations


def test_a_short_encryption_key_file_is_exit_10_naming_the_key_and_never_its_content(
    make_deployment, cli, tmp_path
):
    key = tmp_path / "snapshot.key"
    key.write_bytes(b"secret-but-short")
    deployment = make_deployment(count=5, extra_config=f'encrypt_key_file = "{key}"\n')
    result = cli("snapshot", "create", "--json", config=deployment.config)
    assert result.code == 10 and result.out == ""
    assert "snapshot.encrypt_key_file" in result.err and str(key) in result.err
    assert "secret-but-short" not in result.err


def test_an_unreadable_encryption_key_file_is_exit_10_naming_the_key(
    make_deployment, cli, tmp_path
):
    missing = tmp_path / "absent.key"
    deployment = make_deployment(count=5, extra_config=f'encrypt_key_file = "{missing}"\n')
    result = cli("snapshot", "create", config=deployment.config)
    assert result.code == 10
    assert "snapshot.encrypt_key_file" in result.err and str(missing) in result.err


def test_a_short_signing_key_file_is_exit_10_naming_the_key_and_the_config(
    make_deployment, cli, tmp_path
):
    key = tmp_path / "signing.key"
    key.write_bytes(b"short")
    deployment = make_deployment(count=5, extra_config=f'signing_key_file = "{key}"\n')
    result = cli("snapshot", "create", config=deployment.config)
    assert result.code == 10
    assert "snapshot.signing_key_file" in result.err and str(deployment.config) in result.err
