"""An S3 error says what was being done: an upload says upload, a listing says list (issue 12).

Real failures, no fakes: no credentials anywhere in boto3's chain (as a run by hand outside the
unit's ``LoadCredential=``), an endpoint that refuses connections, and a bucket moto does not
have.
"""

from __future__ import annotations

import json
import socket

import pytest

from tests.conftest import s3_section


def refusing_endpoint() -> str:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{probe.getsockname()[1]}"


def exit_error(err: str) -> dict:
    return json.loads(err.strip().splitlines()[-1])


@pytest.mark.parametrize(
    ("case", "reason"),
    [
        ("no-credentials", "no credentials found"),
        ("refused", "endpoint unreachable"),
        ("no-bucket", "bucket does not exist"),
    ],
)
def test_a_failed_upload_says_upload_and_why(
    make_deployment, cli, s3_endpoint, request, case, reason
):
    endpoint = refusing_endpoint() if case == "refused" else s3_endpoint
    if case == "no-credentials":
        request.getfixturevalue("no_credentials")
    deployment = make_deployment(count=5, extra_config=s3_section(endpoint, "absent-bucket"))
    deployment.close()
    result = cli("snapshot", "create", "--upload", "--json", config=deployment.config)
    assert result.code == 11
    message = exit_error(result.err)["message"]
    assert "upload" in message.split(" failed")[0] and reason in message
    assert "S3 read" not in message
    assert "absent-bucket" in message


def test_a_failed_listing_says_list(make_deployment, cli, s3_endpoint, no_credentials):
    deployment = make_deployment(count=0, extra_config=s3_section(s3_endpoint, "absent-bucket"))
    deployment.close()
    result = cli("snapshot", "list", "--remote", "--json", config=deployment.config)
    assert result.code == 11
    message = exit_error(result.err)["message"]
    assert message.startswith("S3 list ") and "no credentials found" in message
