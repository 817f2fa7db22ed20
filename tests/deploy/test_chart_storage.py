"""The chart's storage settings: the node agent reads its kubelet's volume stats (storage billing) when
agent.kubeletMetrics is on, its own node's kubelet on the secure port with a token that may `get nodes/metrics`
and nothing else; the VolumeSnapshotClass of dataset versions reaches the backend's settings."""

from __future__ import annotations

import kubernetes_validate

from nodeagent.__main__ import build_parser
from tests.deploy.test_chart import K8S_VERSION, by_kind, named, render, values_for

ON = {"agent": {"kubeletMetrics": {"enabled": True}}}


def _agent(docs: list[dict]) -> dict:
    return named(docs, "DaemonSet", "gpu-agent")["spec"]["template"]["spec"]


def _agent_rules(docs: list[dict]) -> list[dict]:
    roles = {r["metadata"]["name"]: r for r in by_kind(docs, "ClusterRole")}
    rules = []
    for binding in by_kind(docs, "ClusterRoleBinding") + by_kind(docs, "RoleBinding"):
        if any(s["kind"] == "ServiceAccount" and s["name"] == "gpu-agent" for s in binding["subjects"]):
            rules += roles[binding["roleRef"]["name"]]["rules"]
    return rules


def test_off_by_default_the_agent_has_no_token_and_no_rights():
    docs = render(values_for("values.yaml"))
    agent = _agent(docs)
    assert agent["automountServiceAccountToken"] is False
    assert not {"GPU_AGENT_KUBELET_METRICS", "GPU_AGENT_NODE_IP"} & {e["name"] for e in agent["containers"][0]["env"]}
    assert _agent_rules(docs) == []


def test_on_the_agent_reads_its_own_nodes_kubelet_with_nodes_metrics_only():
    docs = render(values_for("values.yaml", ON))
    for doc in docs:
        if doc["apiVersion"].startswith(("v1", "apps/", "rbac.")):
            kubernetes_validate.validate(doc, K8S_VERSION, strict=True)
    agent = _agent(docs)
    assert agent["automountServiceAccountToken"] is True
    env = {e["name"]: e for e in agent["containers"][0]["env"]}
    assert env["GPU_AGENT_NODE_IP"]["valueFrom"] == {"fieldRef": {"fieldPath": "status.hostIP"}}
    names = [e["name"] for e in agent["containers"][0]["env"]]
    # $(VAR) expands only variables defined before it
    assert names.index("GPU_AGENT_NODE_IP") < names.index("GPU_AGENT_KUBELET_METRICS")
    assert env["GPU_AGENT_KUBELET_METRICS"]["value"] == "https://$(GPU_AGENT_NODE_IP):10250/metrics"
    assert "GPU_AGENT_KUBELET_INSECURE" not in env  # the cluster CA checks the kubelet by default
    assert _agent_rules(docs) == [{"apiGroups": [""], "resources": ["nodes/metrics"], "verbs": ["get"]}]
    binding = named(docs, "ClusterRoleBinding", "gpu-agent-kubelet")
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": "gpu-agent", "namespace": "gpu-platform"}]


def test_the_port_and_skipping_the_certificate_check_are_values_the_agent_reads(monkeypatch):
    docs = render(values_for("values.yaml", {"agent": {"kubeletMetrics": {
        "enabled": True, "port": 10255, "insecureSkipTLSVerify": True}}}))
    env = {e["name"]: e.get("value") for e in _agent(docs)["containers"][0]["env"]}
    assert env["GPU_AGENT_KUBELET_METRICS"] == "https://$(GPU_AGENT_NODE_IP):10255/metrics"
    assert build_parser().parse_args([]).kubelet_insecure is False
    monkeypatch.setenv("GPU_AGENT_KUBELET_INSECURE", env["GPU_AGENT_KUBELET_INSECURE"])
    monkeypatch.setenv("GPU_AGENT_KUBELET_METRICS", "https://10.0.0.5:10255/metrics")  # as the kubelet expands it
    args = build_parser().parse_args([])
    assert args.kubelet_insecure is True and args.kubelet_metrics == "https://10.0.0.5:10255/metrics"


def test_the_agents_network_policy_leaves_egress_to_the_kubelet_open():
    docs = render(values_for("values.yaml", ON))
    for policy in by_kind(docs, "NetworkPolicy"):
        selector = policy["spec"]["podSelector"].get("matchLabels", {})
        if selector.get("app.kubernetes.io/component") in (None, "agent"):  # the agent's, or every pod's
            egress = policy["spec"].get("egress")
            assert "Egress" not in policy["spec"]["policyTypes"] or any(
                not rule.get("ports") or {"port": 10250, "protocol": "TCP"} in rule["ports"] for rule in egress or ())


def test_the_snapshot_class_of_dataset_versions_reaches_the_backends_settings():
    from scheduling.backends.kubernetes.config import KubernetesConfig

    def settings(extra: dict) -> KubernetesConfig:
        config = {}
        for doc in by_kind(render(values_for("values.yaml", extra)), "ConfigMap"):
            config.update(doc.get("data") or {})
        return KubernetesConfig.from_env(config)

    assert settings({}).snapshot_class is None
    assert settings({"config": {"k8sVolumeSnapshotClass": "csi-snapclass"}}).snapshot_class == "csi-snapclass"


def _rules_of(docs: list[dict], account: str) -> set[tuple[str, str, str]]:
    roles = {r["metadata"]["name"]: r for r in by_kind(docs, "ClusterRole")}
    found = set()
    for binding in by_kind(docs, "ClusterRoleBinding"):
        if any(s["kind"] == "ServiceAccount" and s["name"] == account for s in binding["subjects"]):
            found |= {(g, r, v) for rule in roles[binding["roleRef"]["name"]]["rules"] for g in rule["apiGroups"]
                      for r in rule["resources"] for v in rule["verbs"]}
    return found


def test_the_portal_makes_and_deletes_versions_and_the_worker_copies_them_and_mounts_buckets():
    docs = render(values_for("values.yaml"))
    snap = "snapshot.storage.k8s.io"
    portal, worker = _rules_of(docs, "gpu-platform-portal"), _rules_of(docs, "gpu-platform-scheduler")
    # storage.snapshot / delete_version / revoke run in the portal's request
    assert {("", "persistentvolumeclaims", "get"), (snap, "volumesnapshots", "create"),
            (snap, "volumesnapshots", "delete"), (snap, "volumesnapshotcontents", "delete"),
            ("", "persistentvolumeclaims", "delete")} <= portal
    assert not {(snap, "volumesnapshotcontents", "create"), ("", "persistentvolumes", "create")} & portal
    # a grantee's copy at launch; a job's bucket volumes and csi-s3 Secret, made and removed by the cycle
    assert {(snap, r, v) for r in ("volumesnapshots", "volumesnapshotcontents") for v in ("create", "get")} <= worker
    assert {("", "persistentvolumes", "create"), ("", "persistentvolumes", "delete"), ("", "secrets", "delete"),
            ("", "secrets", "update")} <= worker
