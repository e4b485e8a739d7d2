"""moto's fake AWS credentials, for fixtures (``conftest.fake_aws_credentials``) and for the
environment of subprocesses and clients that a test builds itself."""

FAKE_CREDENTIALS = {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_DEFAULT_REGION": "us-east-1",
    "AWS_REGION": "us-east-1",
}


def reset_moto(endpoint: str) -> None:
    """Empty a moto server (every bucket, cluster, database ...), as a fresh one would be."""
    import urllib.request

    urllib.request.urlopen(
        urllib.request.Request(f"{endpoint}/moto-api/reset", method="POST"), timeout=30
    ).close()
