"""One TLS context per process for the httpx clients of the `ollama` and `openai` SDKs (`paths.tls_context`).

Building a client read the whole CA bundle again (~20 ms of CPU, nearly all of what building one cost); the clients
now share one context, built as httpx builds its own: `$SSL_CERT_FILE`, else `$SSL_CERT_DIR`, else certifi's bundle.
What must not change is that certificates are verified: a loopback Ollama over HTTPS with a certificate from a CA of
the test's own answers when `$SSL_CERT_FILE` names that CA, and is refused when it does not.
"""

from __future__ import annotations

import datetime
import ipaddress
import ssl

import pytest

from loopback import ScriptedServer, ollama_reply
from workbench.errors import ProviderError
from workbench.paths import tls_context
from workbench.providers import ollama, openai
from workbench.providers.ollama import OllamaProvider
from workbench.retrieval.embeddings import OllamaEmbedding


def _context_of(httpx_client) -> ssl.SSLContext:
    return httpx_client._transport._pool._ssl_context


def test_every_ollama_and_openai_client_uses_the_process_one_context():
    clients = [ollama._shared_client("http://127.0.0.1:9", 5.0, None)._client,
               ollama._shared_client("http://127.0.0.1:10", 5.0, None)._client,
               openai._shared_client("http://127.0.0.1:11/v1", "k", 5.0)._client,
               OllamaEmbedding("nomic-embed-text", "http://127.0.0.1:12")._client._client]
    assert all(_context_of(c) is tls_context() for c in clients)
    assert tls_context().verify_mode == ssl.CERT_REQUIRED and tls_context().check_hostname


@pytest.fixture(scope="module")
def authority(tmp_path_factory):
    """A CA of the test's own (ca.pem) and a certificate it signed for 127.0.0.1 (server.pem, server.key)."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    folder = tmp_path_factory.mktemp("tls")
    now = datetime.datetime.now(datetime.timezone.utc)

    def certificate(subject, issuer, key, signer, *, ca: bool):
        builder = (x509.CertificateBuilder().subject_name(subject).issuer_name(issuer).public_key(key.public_key())
                   .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(hours=1))
                   .not_valid_after(now + datetime.timedelta(days=1))
                   .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True))
        if ca:
            builder = builder.add_extension(x509.KeyUsage(False, False, False, False, False, True, True, False, False),
                                            critical=True)
        else:
            builder = builder.add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address(
                "127.0.0.1"))]), critical=False)
        return builder.sign(signer, hashes.SHA256())

    ca_key, server_key = ec.generate_private_key(ec.SECP256R1()), ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "workbench test CA")])
    ca = certificate(ca_name, ca_name, ca_key, ca_key, ca=True)
    server = certificate(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")]), ca_name, server_key,
                         ca_key, ca=False)
    (folder / "ca.pem").write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    (folder / "server.pem").write_bytes(server.public_bytes(serialization.Encoding.PEM))
    (folder / "server.key").write_bytes(server_key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()))
    return folder


@pytest.fixture
def https_ollama(authority):
    """A loopback Ollama answering over HTTPS with the test CA's certificate; yields its https URL."""
    server = ScriptedServer(replies=[ollama_reply("Hello over TLS.")], repeat_last=True)
    served = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    served.load_cert_chain(authority / "server.pem", authority / "server.key")
    server.httpd.socket = served.wrap_socket(server.httpd.socket, server_side=True)
    with server:
        yield server.url.replace("http://", "https://")


def test_a_server_whose_ca_is_named_in_ssl_cert_file_answers(https_ollama, authority, monkeypatch):
    monkeypatch.setenv("SSL_CERT_FILE", str(authority / "ca.pem"))
    step = OllamaProvider(model="llama3.1:latest", host=https_ollama).complete([{"role": "user", "content": "hi"}], [])
    assert step.text == "Hello over TLS."
    assert tls_context() is not _certifi_context(monkeypatch), "a context per value of SSL_CERT_FILE"


def _certifi_context(monkeypatch) -> ssl.SSLContext:
    with monkeypatch.context() as m:
        m.delenv("SSL_CERT_FILE", raising=False)
        m.delenv("SSL_CERT_DIR", raising=False)
        return tls_context()


def test_a_certificate_from_an_unknown_ca_is_refused(https_ollama, monkeypatch):
    monkeypatch.delenv("SSL_CERT_FILE", raising=False)
    monkeypatch.delenv("SSL_CERT_DIR", raising=False)
    with pytest.raises(ProviderError, match="cannot connect"):
        OllamaProvider(model="llama3.1:latest", host=https_ollama).complete([{"role": "user", "content": "hi"}], [])
