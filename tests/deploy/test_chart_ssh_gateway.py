"""The chart's SSH gateway: off by default; on, a Deployment running portal.ssh_gateway with its host key from a
Secret (read-only, never in values), a Service on the SSH port, and NetworkPolicies: anyone may reach the gateway,
and in each workspace namespace named, the gateway alone reaches the job pods' sidecar port."""

from __future__ import annotations

import pytest

from tests.deploy.gotemplate import TemplateError
from tests.deploy.test_chart import render, values_for

ON = {"sshGateway": {"enabled": True, "hostKeySecret": "gateway-host-key", "host": "ssh.example.com",
                     "jobNamespaces": ["ws-vision-lab"]}}


def by_kind_name(docs):
    return {(d["kind"], d["metadata"]["name"]): d for d in docs}


def test_off_by_default():
    assert not [d for d in render(values_for("values.yaml")) if "ssh-gateway" in d["metadata"]["name"]]


def test_the_gateway_deployment_service_and_policies():
    docs = by_kind_name(render(values_for("values.yaml", ON)))
    deployment = docs[("Deployment", "gpu-ssh-gateway")]
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    assert container["command"][:3] == ["python", "-m", "portal.ssh_gateway"]
    env = {e["name"]: e.get("value") for e in container["env"]}
    assert env["SSH_HOST_KEY_PATH"] == "/etc/ssh-gateway/ssh_host_ed25519_key" and env["SSH_GATEWAY_HOST"] == "ssh.example.com"
    volumes = {v["name"]: v for v in deployment["spec"]["template"]["spec"]["volumes"]}
    assert volumes["host-key"]["secret"]["secretName"] == "gateway-host-key"
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    service = docs[("Service", "gpu-ssh-gateway")]
    assert service["spec"]["ports"][0]["targetPort"] == "ssh"
    assert docs[("NetworkPolicy", "gpu-ssh-gateway")]["spec"]["ingress"][0]["ports"][0]["port"] == "ssh"
    into_jobs = docs[("NetworkPolicy", "gpu-ssh-from-gateway")]
    assert into_jobs["metadata"]["namespace"] == "ws-vision-lab"
    peer = into_jobs["spec"]["ingress"][0]["from"][0]
    assert peer["podSelector"]["matchLabels"]["app.kubernetes.io/component"] == "ssh-gateway"
    assert into_jobs["spec"]["ingress"][0]["ports"][0]["port"] == 2222


def test_the_host_key_secret_is_required():
    with pytest.raises(TemplateError, match="hostKeySecret"):
        render(values_for("values.yaml", {"sshGateway": {"enabled": True}}))


def test_the_job_pods_get_an_ssh_sidecar_of_the_platform_image_with_the_gateway_only():
    from scheduling.backends.kubernetes.config import KubernetesConfig

    def config(values):
        (configmap,) = [d for d in render(values) if d["kind"] == "ConfigMap" and d["metadata"]["name"] == "gpu-config"]
        return KubernetesConfig.from_env(configmap["data"])

    on = config(values_for("values.yaml", ON))
    assert on.ssh_sidecar is True and on.ssh_image == "registry.example.com/gpu-platform:0.2.0"
    assert config(values_for("values.yaml")).ssh_sidecar is False
