"""In a pod, with no kubeconfig: the backend reaches the API server named by KUBERNETES_SERVICE_HOST/PORT over
HTTPS, trusting the service account's ca.crt and sending its token (a fake service-account directory and the
emulator serving TLS with a self-signed certificate)."""

from __future__ import annotations

import datetime
import ipaddress

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from scheduling.backends.kubernetes.backend import KubernetesBackend
from scheduling.backends.kubernetes.config import KubernetesConfig
from tests.scheduling.backends.kubernetes.k8s_emulator import KubeEmulator


def self_signed(directory) -> tuple:
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "kubernetes")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(days=1))
            .not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
                           critical=False)
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .sign(key, hashes.SHA256()))
    cert_path, key_path = directory / "server.crt", directory / "server.key"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    return cert_path, key_path


@pytest.fixture
def in_cluster(tmp_path, monkeypatch):
    """(emulator over TLS, service-account dir) with the pod's environment set."""
    cert, key = self_signed(tmp_path)
    account = tmp_path / "serviceaccount"
    account.mkdir()
    (account / "token").write_text("sa-token-123")
    (account / "ca.crt").write_bytes(cert.read_bytes())
    (account / "namespace").write_text("gpu-platform\n")
    with KubeEmulator(tls=(cert, key)) as api:
        monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "127.0.0.1")
        monkeypatch.setenv("KUBERNETES_SERVICE_PORT", str(api.port))
        for name in ("K8S_KUBECONFIG", "KUBECONFIG", "K8S_IN_CLUSTER"):
            monkeypatch.delenv(name, raising=False)
        monkeypatch.setenv("K8S_SERVICE_ACCOUNT_DIR", str(account))
        yield api, account


def test_in_a_pod_the_service_account_is_used_without_any_setting(in_cluster):
    api, account = in_cluster
    api.add_node("gpu-1", capacity={"nvidia.com/gpu": 8}, labels={"gpu-platform/pool": "h100"})
    config = KubernetesConfig.from_env()
    assert config.kubeconfig is None and config.uses_service_account()
    backend = KubernetesBackend(config, identity="worker-0_1")
    try:
        assert [n.name for n in backend.inventory()] == ["gpu-1"]
        assert api.authorizations[-1].lower() == "bearer sa-token-123"  # the scheme is case-insensitive
        assert backend.core.api_client.configuration.host == api.url
        api.create("configmaps", "gpu-platform", {"metadata": {"name": "make-the-namespace"}})
        assert backend.leader.namespace == "gpu-platform"  # the pod's own namespace
        assert backend.leader.acquire()
        assert api.get("leases", "gpu-platform", "gpu-platform-scheduler")["spec"]["holderIdentity"] == "worker-0_1"
    finally:
        backend.close()


def test_a_kubeconfig_wins_over_the_pod_environment(in_cluster, tmp_path, monkeypatch):
    api, _ = in_cluster
    monkeypatch.setenv("K8S_KUBECONFIG", str(tmp_path / "kubeconfig"))
    config = KubernetesConfig.from_env()
    assert not config.uses_service_account()
    monkeypatch.setenv("K8S_IN_CLUSTER", "1")
    assert KubernetesConfig.from_env().uses_service_account()


def test_an_untrusted_server_is_refused(in_cluster, tmp_path):
    api, account = in_cluster
    (tmp_path / "other").mkdir()
    other, _ = self_signed(tmp_path / "other")
    (account / "ca.crt").write_bytes(other.read_bytes())
    backend = KubernetesBackend(KubernetesConfig.from_env(), identity="worker-0_1")
    try:
        with pytest.raises(Exception, match="(?i)certificate|ssl"):
            backend.inventory()
        assert api.requests == []
    finally:
        backend.close()
