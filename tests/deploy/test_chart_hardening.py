"""The chart's hardening: hook order of the migration Job, read-only containers under RuntimeDefault
seccomp, a portal that cannot write pods, probes on every long-running pod, the portal's HPA and PDB,
config checksums that roll the pods, the long-task worker and the backup CronJob."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import time

import pytest
import yaml

from tests.deploy.gotemplate import Renderer, TemplateError
from tests.deploy.test_chart import CHART, VALUES_FILES, by_kind, named, render, values_for

WRITE_VERBS = {"create", "delete", "deletecollection", "patch", "update", "*"}
POD_OWNERS = ("Deployment", "DaemonSet", "Job", "CronJob")


def pod_specs(docs: list[dict]) -> list[tuple[str, dict]]:
    out = []
    for doc in docs:
        if doc["kind"] == "CronJob":
            out.append((doc["metadata"]["name"], doc["spec"]["jobTemplate"]["spec"]["template"]["spec"]))
        elif doc["kind"] in POD_OWNERS:
            out.append((doc["metadata"]["name"], doc["spec"]["template"]["spec"]))
    return out


def annotations(doc: dict) -> dict:
    return doc["metadata"].get("annotations") or {}


@pytest.fixture(params=VALUES_FILES)
def docs(request) -> list[dict]:
    return render(values_for(request.param))


def test_config_and_secret_are_hooks_before_the_migration_job(docs):
    job = named(docs, "Job", "gpu-migrate")
    job_hook = annotations(job)
    assert job_hook["helm.sh/hook"].split(",") == ["pre-install", "pre-upgrade"]
    inputs = [d for d in docs if d["kind"] in ("ConfigMap", "Secret")]
    assert inputs
    for doc in inputs:
        hook = annotations(doc)
        assert hook["helm.sh/hook"].split(",") == ["pre-install", "pre-upgrade"], doc["metadata"]["name"]
        assert int(hook["helm.sh/hook-weight"]) < int(job_hook["helm.sh/hook-weight"]) == 0
        assert hook["helm.sh/hook-delete-policy"] == "before-hook-creation"  # replaced, never deleted after
        assert hook["helm.sh/resource-policy"] == "keep"
    read = job["spec"]["template"]["spec"]["containers"][0]["envFrom"]
    assert read[0]["configMapRef"]["name"] == "gpu-config"
    secrets = {d["metadata"]["name"] for d in by_kind(docs, "Secret")}
    assert not secrets or secrets == {read[1]["secretRef"]["name"]}
    assert "hook-succeeded" in job_hook["helm.sh/hook-delete-policy"]


def test_every_pod_is_read_only_under_runtime_default_seccomp(docs):
    specs = pod_specs(docs)
    assert {name for name, _ in specs} >= {"gpu-portal", "gpu-worker", "gpu-long-worker", "gpu-beat", "gpu-migrate"}
    (config,) = by_kind(docs, "ConfigMap")
    var_dir = config["data"]["VAR_DIR"]
    for name, spec in specs:
        assert spec["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}, name
        empty_dirs = {v["name"] for v in spec["volumes"] if "emptyDir" in v}
        for container in spec["containers"]:
            context = container["securityContext"]
            assert context["readOnlyRootFilesystem"] is True, name
            assert context["seccompProfile"] == {"type": "RuntimeDefault"}, name
            assert context["allowPrivilegeEscalation"] is False and context["capabilities"] == {"drop": ["ALL"]}
            mounts = {m["mountPath"]: m["name"] for m in container["volumeMounts"]}
            assert mounts["/tmp"] in empty_dirs, name
            if name != "gpu-agent":
                assert mounts[var_dir] in empty_dirs, name  # where the app writes
                assert spec["securityContext"]["runAsNonRoot"] is True


def test_the_agent_mounts_only_its_join_token_under_a_read_only_root():
    agent = named(render(values_for("values.yaml")), "DaemonSet", "gpu-agent")["spec"]["template"]["spec"]
    container = agent["containers"][0]
    assert {"name": "join-token", "mountPath": "/etc/gpu-agent/join", "readOnly": True} in container["volumeMounts"]
    assert {"name": "tmp", "mountPath": "/tmp"} in container["volumeMounts"]
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    # root with every capability dropped: the kubelet makes the host-path spool root-owned
    assert agent["securityContext"]["runAsUser"] == 0 and container["securityContext"]["capabilities"] == {"drop": ["ALL"]}
    relaxed = named(render(values_for("values.yaml", {"securityContext": {"agentReadOnlyRootFilesystem": False}})),
                    "DaemonSet", "gpu-agent")["spec"]["template"]["spec"]["containers"][0]
    assert relaxed["securityContext"]["readOnlyRootFilesystem"] is False


def _rules_of(docs: list[dict], account: str) -> list[dict]:
    roles = {(r["kind"], r["metadata"]["name"]): r for r in by_kind(docs, "ClusterRole") + by_kind(docs, "Role")}
    rules = []
    for binding in by_kind(docs, "ClusterRoleBinding") + by_kind(docs, "RoleBinding"):
        if any(s["kind"] == "ServiceAccount" and s["name"] == account for s in binding["subjects"]):
            rules += roles[(binding["roleRef"]["kind"], binding["roleRef"]["name"])]["rules"]
    return rules


def test_the_portal_account_writes_nothing_and_the_worker_keeps_pod_create_delete(docs):
    portal = named(docs, "Deployment", "gpu-portal")["spec"]["template"]["spec"]["serviceAccountName"]
    worker = named(docs, "Deployment", "gpu-worker")["spec"]["template"]["spec"]["serviceAccountName"]
    assert portal != worker
    assert named(docs, "ServiceAccount", portal)
    portal_rules = _rules_of(docs, portal)
    assert portal_rules, "the portal reads job logs through the API"
    writes = {(res, v) for r in portal_rules for res in r["resources"] for v in r["verbs"] if v in WRITE_VERBS}
    # at a member's request only: a notebook's home or a volume, a deleted secret's copy in the namespace, a
    # dataset version's snapshot made or deleted, a grantee's copies of it
    assert writes == {("persistentvolumeclaims", "delete"), ("secrets", "delete"), ("volumesnapshots", "create"),
                      ("volumesnapshots", "delete"), ("volumesnapshotcontents", "delete")}, writes
    assert not any("pods" in r["resources"] and {"create", "delete"} & set(r["verbs"]) for r in portal_rules)
    assert any("pods/log" in r["resources"] and "get" in r["verbs"] for r in portal_rules)
    worker_pods = {v for r in _rules_of(docs, worker) if "pods" in r["resources"] for v in r["verbs"]}
    assert {"create", "delete"} <= worker_pods
    for name in ("gpu-long-worker", "gpu-beat"):
        assert named(docs, "Deployment", name)["spec"]["template"]["spec"]["automountServiceAccountToken"] is False


def test_the_celery_pods_have_liveness_probes_that_write_nothing(docs):
    for name, node in (("gpu-worker", "celery"), ("gpu-long-worker", "long")):
        container = named(docs, "Deployment", name)["spec"]["template"]["spec"]["containers"][0]
        command = container["command"]
        assert command[command.index("-n") + 1] == f"{node}@%h"  # the name the probe pings
        probe = container["livenessProbe"]
        assert probe["exec"]["command"][:2] == ["/bin/sh", "-c"]
        assert f'celery -A portal inspect ping -d "{node}@$HOSTNAME"' in probe["exec"]["command"][2]
        assert probe["timeoutSeconds"] >= 10 and probe["failureThreshold"] >= 3
    beat = named(docs, "Deployment", "gpu-beat")["spec"]["template"]["spec"]["containers"][0]
    assert "/tmp/celerybeat-schedule" in beat["command"]
    assert beat["livenessProbe"]["exec"]["command"][:2] == ["python", "-c"]


def test_the_beat_probe_fails_on_a_stale_schedule_file(tmp_path):
    beat = named(render(values_for("values.yaml")), "Deployment", "gpu-beat")["spec"]["template"]["spec"]
    code = beat["containers"][0]["livenessProbe"]["exec"]["command"][2].replace("/tmp/", f"{tmp_path}/")

    def probe() -> int:
        return subprocess.run([sys.executable, "-c", code], timeout=30).returncode

    assert probe() == 1  # no schedule file yet
    schedule = tmp_path / "celerybeat-schedule"
    schedule.write_bytes(b"x")
    assert probe() == 0
    old = time.time() - 601
    os.utime(schedule, (old, old))
    assert probe() == 1


def test_the_worker_takes_the_default_queue_and_the_long_worker_the_long_one():
    docs = render(values_for("values.yaml", {"longWorker": {"concurrency": 3}}))
    (config,) = by_kind(docs, "ConfigMap")
    assert config["data"]["CELERY_QUEUE"] == "celery"
    worker = named(docs, "Deployment", "gpu-worker")["spec"]["template"]["spec"]["containers"][0]
    assert worker["command"][worker["command"].index("-Q") + 1] == "celery"
    long = named(docs, "Deployment", "gpu-long-worker")["spec"]["template"]["spec"]["containers"][0]
    assert long["command"] == ["celery", "-A", "portal", "worker", "-l", "INFO", "-Q", "long", "--concurrency", "3",
                               "-n", "long@%h"]
    assert {"name": "LONG_TASK_CONCURRENCY", "value": "3"} in long["env"]
    default = named(render(values_for("values.yaml")), "Deployment", "gpu-long-worker")
    assert default["spec"]["template"]["spec"]["containers"][0]["command"][9] == "2"
    assert not [d for d in render(values_for("values.yaml", {"longWorker": {"enabled": False}}))
                if d["metadata"]["name"] == "gpu-long-worker"]


def test_portal_probes_hpa_and_a_pdb_by_default():
    docs = render(values_for("values.yaml"))
    portal = named(docs, "Deployment", "gpu-portal")
    container = portal["spec"]["template"]["spec"]["containers"][0]
    assert container["readinessProbe"]["httpGet"]["path"] == "/readyz"
    assert container["livenessProbe"]["httpGet"]["path"] == "/healthz"
    assert portal["spec"]["replicas"] == 1 and not by_kind(docs, "HorizontalPodAutoscaler")
    pdb = named(docs, "PodDisruptionBudget", "gpu-portal")
    assert pdb["spec"] == {"maxUnavailable": 1, "selector": portal["spec"]["selector"]}
    scaled = render(values_for("values.yaml", {"portal": {"autoscaling": {
        "enabled": True, "minReplicas": 2, "maxReplicas": 9, "targetCPUUtilizationPercentage": 60}}}))
    hpa = named(scaled, "HorizontalPodAutoscaler", "gpu-portal")
    assert hpa["apiVersion"] == "autoscaling/v2"
    assert hpa["spec"]["scaleTargetRef"] == {"apiVersion": "apps/v1", "kind": "Deployment", "name": "gpu-portal"}
    assert (hpa["spec"]["minReplicas"], hpa["spec"]["maxReplicas"]) == (2, 9)
    assert hpa["spec"]["metrics"][0]["resource"]["target"] == {"type": "Utilization", "averageUtilization": 60}
    assert "replicas" not in named(scaled, "Deployment", "gpu-portal")["spec"]
    off = render(values_for("values.yaml", {"portal": {"podDisruptionBudget": {"enabled": False}}}))
    assert not by_kind(off, "PodDisruptionBudget")


ROLLED = ("gpu-portal", "gpu-worker", "gpu-long-worker", "gpu-beat")


def _checksums(docs: list[dict]) -> dict[str, tuple[str, str]]:
    out = {}
    for name in ROLLED:
        pod = named(docs, "Deployment", name)["spec"]["template"]["metadata"]["annotations"]
        out[name] = (pod["checksum/config"], pod["checksum/secret"])
    return out


def test_a_config_or_secret_change_rolls_the_pods():
    base = _checksums(render(values_for("values-small.yaml")))
    assert len(set(base.values())) == 1  # every Deployment carries the same two sums
    (config_sum, secret_sum), = set(base.values())
    config_text = Renderer(values_for("values-small.yaml"), {"Name": "gpu", "Namespace": "gpu-platform"}, {}).render(
        (CHART / "templates" / "configmap.yaml").read_text())
    assert config_sum == hashlib.sha256(config_text.encode()).hexdigest()
    zone = _checksums(render(values_for("values-small.yaml", {"config": {"timeZone": "Europe/Berlin"}})))
    assert all(zone[n][0] != config_sum and zone[n][1] == secret_sum for n in ROLLED)
    key = _checksums(render(values_for("values-small.yaml", {"secrets": {"secretKey": "another-" + "k" * 50}})))
    assert all(key[n][0] == config_sum and key[n][1] != secret_sum for n in ROLLED)
    assert _checksums(render(values_for("values-small.yaml"))) == base  # and stable when nothing changes


def test_backups_run_on_schedule_and_keep_the_newest_n():
    docs = render(values_for("values.yaml", {"backup": {"schedule": "30 1 * * *", "retain": 4}}))
    cron = named(docs, "CronJob", "gpu-backup")
    assert cron["spec"]["schedule"] == "30 1 * * *" and cron["spec"]["concurrencyPolicy"] == "Forbid"
    pod = cron["spec"]["jobTemplate"]["spec"]["template"]["spec"]
    command = pod["containers"][0]["command"]
    assert command[:2] == ["/bin/sh", "-c"]
    assert command[2] == ('exec python manage.py backup "/backups/gpu-platform-$(date +%Y%m%dT%H%M%S).tar" '
                          '--keep 4')
    claim = named(docs, "PersistentVolumeClaim", "gpu-backups")
    assert annotations(claim)["helm.sh/resource-policy"] == "keep"
    assert {"name": "backups", "persistentVolumeClaim": {"claimName": "gpu-backups"}} in pod["volumes"]
    default = named(render(values_for("values.yaml")), "CronJob", "gpu-backup")
    assert default["spec"]["schedule"] == "0 3 * * *" and default["spec"]["jobTemplate"]["spec"]["template"][
        "spec"]["containers"][0]["command"][2].endswith("--keep 7")
    mine = render(values_for("values.yaml", {"backup": {"existingClaim": "nfs-backups"}}))
    assert not by_kind(mine, "PersistentVolumeClaim")
    mine_pod = named(mine, "CronJob", "gpu-backup")["spec"]["jobTemplate"]["spec"]["template"]["spec"]
    assert {"name": "backups", "persistentVolumeClaim": {"claimName": "nfs-backups"}} in mine_pod["volumes"]
    assert not by_kind(render(values_for("values.yaml", {"backup": {"enabled": False}})), "CronJob")


def test_the_renderer_includes_other_templates_and_hashes():
    files = {"c/templates/a.yaml": "name-{{ .Values.name }}"}
    renderer = Renderer({"name": "x"}, {}, {}, files=files, base_path="c/templates")
    text = renderer.render('sum: {{ include (print $.Template.BasePath "/a.yaml") . | sha256sum }}\n'
                           'body: {{ template "c/templates/a.yaml" . }}')
    assert yaml.safe_load(text) == {"sum": hashlib.sha256(b"name-x").hexdigest(), "body": "name-x"}
    with pytest.raises(TemplateError, match="no such template"):
        renderer.render('{{ include "c/templates/b.yaml" . }}')
    with pytest.raises(TemplateError, match="outside the supported subset"):
        renderer.render('{{ define "x" }}{{ end }}')


def test_the_portal_trusts_forwarded_addresses_from_the_ingress_range_only(docs):
    """The client address (sign-in limits, the audit log) comes from X-Forwarded-For only when the direct
    peer is the ingress: the chart names its range, and nothing else is trusted."""
    import ipaddress

    config = named(docs, "ConfigMap", "gpu-config")["data"]
    ranges = [c for c in config["TRUSTED_PROXIES"].split(",") if c.strip()]
    assert ranges and all(ipaddress.ip_network(c.strip(), strict=False).is_private for c in ranges)
    narrowed = render(values_for("values.yaml", {"config": {"trustedProxies": "10.42.0.0/16"}}))
    assert named(narrowed, "ConfigMap", "gpu-config")["data"]["TRUSTED_PROXIES"] == "10.42.0.0/16"
