"""An https:// upstream: the gateway verifies its certificate (the system trust store, or
SSL_CERT_FILE) and streams through TLS like through plain HTTP."""

from __future__ import annotations

import shutil
import ssl
import subprocess

import pytest
from gateway_fakes import EXPECTED, FakeProvider

pytestmark = pytest.mark.skipif(shutil.which("openssl") is None, reason="needs openssl")


@pytest.fixture
def tls_fake(tmp_path):
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
                    "-subj", "/CN=localhost", "-addext", "subjectAltName=IP:127.0.0.1",
                    "-keyout", str(key), "-out", str(cert)], check=True, capture_output=True)
    fake = FakeProvider()
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(cert, key)
    fake.server.socket = ctx.wrap_socket(fake.server.socket, server_side=True)
    yield fake, cert
    fake.close()


def test_https_upstream(gateway_factory, tls_fake, provider_env):
    fake, cert = tls_fake
    url = f"https://127.0.0.1:{fake.port}"
    provider_env.setenv("SSL_CERT_FILE", str(cert))       # trust the test's own CA
    gw = gateway_factory(url)
    for stream in (False, True):
        status, _, body = gw.call("anthropic", stream)
        assert status == 200, body
    assert gw.totals(2)["output_tokens"] == 2 * EXPECTED["anthropic"][1]


def test_https_upstream_with_an_untrusted_certificate_is_a_502(gateway_factory, tls_fake,
                                                               provider_env):
    fake, _ = tls_fake
    provider_env.delenv("SSL_CERT_FILE", raising=False)
    gw = gateway_factory(f"https://127.0.0.1:{fake.port}")
    status, _, body = gw.call("anthropic")
    assert status == 502 and b"CERTIFICATE_VERIFY_FAILED" in body
    assert gw.proc.alive()
