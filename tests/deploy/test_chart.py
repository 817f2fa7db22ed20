"""The Helm chart: it renders with each values file, every object is valid for Kubernetes 1.30, the
ServiceMonitors match their CRD, and the scheduler's RBAC is exactly what the Kubernetes backend calls.

There is no `helm` binary here: templates are rendered by tests/deploy/gotemplate.py (a subset of Go
templates that the chart keeps to); where `helm` is installed, `helm template` is checked too.
"""

from __future__ import annotations

import ast
import copy
import json
import re
import shutil
import subprocess
from pathlib import Path

import jsonschema
import kubernetes_validate
import pytest
import yaml

from scheduling.backends.kubernetes.config import KubernetesConfig
from tests.deploy.gotemplate import Renderer, TemplateError

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "deploy" / "helm" / "gpu-platform"
BACKEND = ROOT / "scheduling" / "backends" / "kubernetes"
VALUES_FILES = ["values.yaml", "values-small.yaml", "values-production.yaml", "values-ha.yaml"]
K8S_VERSION = "1.30.0"
# values.yaml alone needs the credentials someone must choose
DEFAULT_OVERRIDES = {"secrets": {"databaseUrl": "postgres://u:p@db/x", "redisUrl": "redis://r:6379/0",
                                 "secretKey": "k" * 50}}


def merge(base: dict, over: dict) -> dict:
    out = copy.deepcopy(base)
    for key, value in over.items():
        out[key] = merge(out[key], value) if isinstance(value, dict) and isinstance(out.get(key), dict) else value
    return out


def values_for(name: str, extra: dict | None = None) -> dict:
    values = yaml.safe_load((CHART / "values.yaml").read_text())
    values = merge(values, DEFAULT_OVERRIDES if name == "values.yaml" else yaml.safe_load((CHART / name).read_text()))
    return merge(values, extra or {})


def render(values: dict, release: str = "gpu", namespace: str = "gpu-platform") -> list[dict]:
    chart = yaml.safe_load((CHART / "Chart.yaml").read_text())
    base_path = f"{chart['name']}/templates"
    files = {f"{base_path}/{t.name}": t.read_text() for t in sorted((CHART / "templates").glob("*.yaml"))}
    renderer = Renderer(values, {"Name": release, "Namespace": namespace, "Service": "Helm"},
                        {"Name": chart["name"], "Version": chart["version"], "AppVersion": chart["appVersion"]},
                        files=files, base_path=base_path)
    docs = []
    for template in sorted((CHART / "templates").glob("*.yaml")):
        text = renderer.render(template.read_text())
        for doc in yaml.safe_load_all(text):
            if doc:
                docs.append(doc)
    return docs


def by_kind(docs: list[dict], kind: str) -> list[dict]:
    return [d for d in docs if d["kind"] == kind]


def named(docs: list[dict], kind: str, name: str) -> dict:
    (doc,) = [d for d in docs if d["kind"] == kind and d["metadata"]["name"] == name]
    return doc


@pytest.fixture(params=VALUES_FILES)
def rendered(request) -> tuple[str, list[dict]]:
    return request.param, render(values_for(request.param))


def test_every_core_object_is_valid_for_kubernetes_1_30(rendered):
    name, docs = rendered
    assert docs, name
    checked = 0
    for doc in docs:
        if doc["apiVersion"].startswith("monitoring.coreos.com"):
            continue
        kubernetes_validate.validate(doc, K8S_VERSION, strict=True)
        checked += 1
    assert checked >= 8


def test_service_monitors_match_the_vendored_crd_schema():
    schema = json.loads((ROOT / "tests" / "deploy" / "schemas" / "servicemonitor-v1.json").read_text())
    docs = render(values_for("values-production.yaml"))
    monitors = by_kind(docs, "ServiceMonitor")
    assert {m["metadata"]["name"] for m in monitors} == {"gpu-portal", "gpu-agent"}
    for monitor in monitors:
        jsonschema.validate(monitor, schema)
    portal = named(docs, "ServiceMonitor", "gpu-portal")["spec"]["endpoints"][0]
    assert portal["authorization"]["credentials"] == {"name": "gpu-platform-secrets", "key": "METRICS_TOKEN"}
    broken = copy.deepcopy(monitors[0])
    broken["spec"]["endpoints"][0]["intervall"] = "30s"
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(broken, schema)


def test_kubernetes_validation_catches_a_broken_object():
    deployment = named(render(values_for("values.yaml")), "Deployment", "gpu-portal")
    deployment["spec"]["template"]["spec"]["containers"][0]["readinessProbe"]["httpGet"]["port"] = {"bad": 1}
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(deployment, K8S_VERSION, strict=True)


def test_workloads_run_what_the_platform_needs():
    docs = render(values_for("values-ha.yaml"))
    portal = named(docs, "Deployment", "gpu-portal")
    container = portal["spec"]["template"]["spec"]["containers"][0]
    command = container["command"]
    assert command[:2] == ["uvicorn", "portal.asgi:application"]
    # the client's address from the ingress's X-Forwarded-For (login rate limits are per client)
    assert command[command.index("--forwarded-allow-ips") + 1] == "*"
    assert command[command.index("--workers") + 1] == "2"  # one process per core a pod may use
    assert container["readinessProbe"]["httpGet"]["path"] == "/readyz"
    assert container["livenessProbe"]["httpGet"]["path"] == "/healthz"
    assert "replicas" not in portal["spec"]  # the HPA sets it
    assert named(docs, "HorizontalPodAutoscaler", "gpu-portal")["spec"]["minReplicas"] == 3
    assert {e["secretRef"]["name"] for e in container["envFrom"] if "secretRef" in e} == {"gpu-platform-secrets"}
    assert not by_kind(docs, "Secret")  # from the existing Secret
    worker = named(docs, "Deployment", "gpu-worker")["spec"]["template"]["spec"]
    assert worker["containers"][0]["command"][:4] == ["celery", "-A", "portal", "worker"]
    assert worker["serviceAccountName"] == "gpu-platform-scheduler"
    beat = named(docs, "Deployment", "gpu-beat")["spec"]
    assert beat["replicas"] == 1 and beat["strategy"]["type"] == "Recreate"
    agent = named(docs, "DaemonSet", "gpu-agent")["spec"]["template"]["spec"]
    assert agent["runtimeClassName"] == "nvidia" and agent["hostPID"] is True
    assert agent["nodeSelector"] == {"nvidia.com/gpu.present": "true"}
    assert "--token" not in " ".join(agent["containers"][0]["command"])
    job = named(docs, "Job", "gpu-migrate")
    assert job["metadata"]["annotations"]["helm.sh/hook"].split(",") == ["pre-install", "pre-upgrade"]
    assert job["spec"]["template"]["spec"]["containers"][0]["command"] == ["python", "manage.py", "migrate",
                                                                           "--noinput"]
    assert named(docs, "PodDisruptionBudget", "gpu-portal")["spec"]["maxUnavailable"] == 1
    assert by_kind(docs, "Ingress") and len(by_kind(docs, "NetworkPolicy")) == 3


def test_a_chart_made_secret_carries_the_three_urls_and_keys():
    docs = render(values_for("values-small.yaml"))
    (secret,) = by_kind(docs, "Secret")
    assert set(secret["stringData"]) == {"DATABASE_URL", "REDIS_URL", "SECRET_KEY"}
    assert not by_kind(docs, "ServiceMonitor") and not by_kind(docs, "NetworkPolicy")
    with_token = render(values_for("values-small.yaml", {"metrics": {"requireToken": True},
                                                          "secrets": {"metricsToken": "t0ken"}}))
    assert by_kind(with_token, "Secret")[0]["stringData"]["METRICS_TOKEN"] == "t0ken"


def test_missing_credentials_are_refused_at_render_time():
    values = yaml.safe_load((CHART / "values.yaml").read_text())
    with pytest.raises(TemplateError, match="databaseUrl"):
        render(values)


def test_values_yaml_is_documented_line_by_line():
    for number, line in enumerate((CHART / "values.yaml").read_text().splitlines(), 1):
        stripped = line.strip()
        if stripped and not stripped.startswith("#"):
            previous = (CHART / "values.yaml").read_text().splitlines()[number - 2].strip()
            assert "#" in line or previous.startswith("#"), f"values.yaml:{number} has no comment: {line}"


@pytest.mark.skipif(shutil.which("helm") is None, reason="no helm binary here; gotemplate.py renders instead")
@pytest.mark.parametrize("name", VALUES_FILES)
def test_helm_template_agrees(name, tmp_path):
    extra = tmp_path / "extra.yaml"
    extra.write_text(yaml.safe_dump(DEFAULT_OVERRIDES if name == "values.yaml" else {}))
    out = subprocess.run(["helm", "template", "gpu", str(CHART), "-n", "gpu-platform", "-f", str(CHART / name),
                          "-f", str(extra)], capture_output=True, text=True, check=True).stdout
    helm_docs = [d for d in yaml.safe_load_all(out) if d]
    ours = render(values_for(name))
    assert sorted((d["kind"], d["metadata"]["name"]) for d in helm_docs) == sorted(
        (d["kind"], d["metadata"]["name"]) for d in ours)


# --- RBAC against the backend's code ---------------------------------------------------------------------

VERBS = {"list": "list", "read": "get", "create": "create", "patch": "patch", "delete": "delete",
         "replace": "update", "connect": "create"}
CALL = re.compile(r"^(list|read|create|patch|delete|replace)_(namespaced_)?([a-z_]+?)(_for_all_namespaces)?$")
# the client's API classes the backend may hold, and the API group each one calls
API_GROUPS = {"CoreV1Api": "", "CoordinationV1Api": "coordination.k8s.io", "SnapshotV1Api": "snapshot.storage.k8s.io"}
# generic APIs, called only inside a typed wrapper whose methods name the resource (backends/kubernetes/snapshots.py)
GENERIC_APIS = {"CustomObjectsApi"}


def plural(snake: str) -> str:
    word = snake.replace("_", "")
    return word if word.endswith("s") else word + ("es" if word.endswith(("ss", "sh", "ch")) else "s")


def api_calls(backend: Path = BACKEND) -> set[tuple[str, str, str]]:
    """(API group, resource, verb) of every Kubernetes API method the backend names, from its source."""
    found: set[tuple[str, str, str]] = set()
    for path in sorted(backend.glob("*.py")):
        tree = ast.parse(path.read_text())
        api_attrs: dict[str, str] = {}  # self.core = client.CoreV1Api(...): `core` calls the core group
        for node in ast.walk(tree):
            if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call):
                func = node.value.func
                if (isinstance(func, ast.Attribute) and func.attr.endswith("Api") and func.attr != "ApiClient"
                        and func.attr not in GENERIC_APIS):
                    assert func.attr in API_GROUPS, f"{path.name}: {func.attr} needs its own mapping here"
                    api_attrs.update((t.attr, API_GROUPS[func.attr]) for t in node.targets
                                     if isinstance(t, ast.Attribute))
        for node in ast.walk(tree):
            if not (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Attribute)
                    and node.value.attr in api_attrs):
                continue
            method = node.attr
            if method == "api_client":
                continue
            m = CALL.match(method)
            assert m, f"{path.name}: unknown API method {method}"
            verb, resource = VERBS[m.group(1)], m.group(3)
            if resource.endswith("_log"):
                resource = plural(resource.removesuffix("_log")) + "/log"
            else:
                resource = plural(resource)
            found.add((api_attrs[node.value.attr], resource, verb))
        # a list called with watch=True is a watch
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and any(k.arg == "watch" and isinstance(k.value, ast.Constant)
                                                  and k.value.value is True for k in node.keywords):
                func = node.func
                if (isinstance(func, ast.Attribute) and CALL.match(func.attr)
                        and isinstance(func.value, ast.Attribute) and func.value.attr in api_attrs):
                    found.add((api_attrs[func.value.attr], plural(CALL.match(func.attr).group(3)), "watch"))
    return found


def granted(docs: list[dict]) -> set[tuple[str, str, str]]:
    """What the ClusterRole grants everywhere and the Roles grant in the release namespace."""
    out = set()
    for role in by_kind(docs, "ClusterRole") + by_kind(docs, "Role"):
        for rule in role["rules"]:
            out |= {(g, r, v) for g in rule["apiGroups"] for r in rule["resources"] for v in rule["verbs"]}
    return out


def test_rbac_grants_exactly_what_the_kubernetes_backend_calls():
    calls = api_calls()
    assert ("", "pods", "watch") in calls and ("", "pods/log", "get") in calls and ("", "nodes", "list") in calls
    assert {c for c in calls if c[0] == "coordination.k8s.io"} == {
        ("coordination.k8s.io", "leases", v) for v in ("get", "create", "update")}
    docs = render(values_for("values.yaml"))
    assert granted(docs) == calls
    assert {r["metadata"]["name"] for r in by_kind(docs, "ClusterRole")} == {"gpu-scheduler", "gpu-portal"}
    assert {c for c in calls if c[0] == "snapshot.storage.k8s.io"} == {
        ("snapshot.storage.k8s.io", r, v) for r in ("volumesnapshots", "volumesnapshotcontents")
        for v in ("create", "get", "delete")}
    for cluster_role in by_kind(docs, "ClusterRole"):  # leases: the namespace only
        assert all(rule["apiGroups"] in ([""], ["snapshot.storage.k8s.io"]) for rule in cluster_role["rules"])
    (role,) = by_kind(docs, "Role")
    (binding,) = by_kind(docs, "RoleBinding")
    assert role["metadata"]["namespace"] == binding["metadata"]["namespace"] == "gpu-platform"
    assert binding["roleRef"]["name"] == role["metadata"]["name"]
    assert binding["subjects"][0]["name"] == "gpu-platform-scheduler"


def test_a_new_api_call_without_a_rule_is_caught(tmp_path):
    copy_dir = tmp_path / "kubernetes"
    shutil.copytree(BACKEND, copy_dir)
    source = copy_dir / "backend.py"
    source.write_text(source.read_text() + "\n\ndef extra(self):\n    return self.core.list_namespaced_secret('x')\n")
    lease = copy_dir / "lease.py"
    lease.write_text(lease.read_text() + "\n\ndef extra(self):\n    return self.coordination.delete_namespaced_lease('x')\n")
    calls = api_calls(copy_dir)
    assert ("", "secrets", "list") in calls and ("coordination.k8s.io", "leases", "delete") in calls
    assert granted(render(values_for("values.yaml"))) != calls
    assert granted(render(values_for("values.yaml"))) == calls - {("", "secrets", "list"),
                                                                  ("coordination.k8s.io", "leases", "delete")}


def test_the_worker_runs_with_the_charts_lease_and_scheduler_settings():
    docs = render(values_for("values.yaml", {"worker": {"schedulerName": "gpu-platform",
                                                        "leaderElection": {"leaseDurationS": "20"}}}))
    worker = named(docs, "Deployment", "gpu-worker")["spec"]["template"]["spec"]["containers"][0]
    env = {e["name"]: e["value"] for e in worker["env"]}
    assert env == {"K8S_LEASE_NAME": "gpu-platform-scheduler", "K8S_LEASE_NAMESPACE": "gpu-platform",
                   "K8S_LEASE_DURATION_S": "20", "K8S_SCHEDULER_NAME": "gpu-platform"}
    config = {}
    for doc in by_kind(docs, "ConfigMap"):
        config.update(doc.get("data") or {})
    settings = KubernetesConfig.from_env({**config, **env})
    assert (settings.lease_name, settings.lease_namespace, settings.lease_duration_s) == (
        "gpu-platform-scheduler", "gpu-platform", 20.0)
    assert settings.scheduler_name == "gpu-platform" and settings.in_cluster is True
    default = named(render(values_for("values.yaml")), "Deployment", "gpu-worker")["spec"]["template"]["spec"]
    assert "K8S_SCHEDULER_NAME" not in {e["name"] for e in default["containers"][0]["env"]}


def test_each_agent_pod_holds_only_its_pools_join_token_never_other_nodes_tokens():
    agent = named(render(values_for("values.yaml")), "DaemonSet", "gpu-agent")["spec"]["template"]["spec"]
    container = agent["containers"][0]
    env = {e["name"]: e for e in container["env"]}
    assert env["GPU_AGENT_NODE"]["valueFrom"] == {"fieldRef": {"fieldPath": "spec.nodeName"}}
    assert env["GPU_AGENT_JOIN_TOKEN_FILE"]["value"] == "/etc/gpu-agent/join/token"
    assert "GPU_AGENT_TOKEN" not in env and container["command"] == ["gpu-node-agent"]
    secrets = [v["secret"] for v in agent["volumes"] if "secret" in v]
    assert secrets == [{"secretName": "gpu-platform-agent-join", "items": [{"key": "token", "path": "token"}]}]
    assert agent["automountServiceAccountToken"] is False


# --- request bodies ----------------------------------------------------------------------------------------


def test_the_ingress_refuses_the_bodies_the_portal_refuses():
    docs = render(values_for("values-production.yaml"))
    config = named(docs, "ConfigMap", "gpu-config")["data"]
    limits = {}
    for ingress in by_kind(docs, "Ingress"):
        rule = ingress["spec"]["rules"][0]  # the portal's host (the notebooks' hosts: below)
        (path,) = rule["http"]["paths"]
        limits[path["path"]] = ingress["metadata"]["annotations"]["nginx.ingress.kubernetes.io/proxy-body-size"]
        assert path["backend"]["service"]["name"] == "gpu-portal"
    assert limits == {"/": config["BODY_LIMIT_BYTES"], "/api/v1/agent/": config["BODY_LIMIT_AGENT_BYTES"],
                      "/console/planner/": config["BODY_LIMIT_PLANNER_BYTES"],
                      "/serve/": config["BODY_LIMIT_SERVE_BYTES"], "/nb/": config["BODY_LIMIT_NOTEBOOK_BYTES"]}
    assert int(config["BODY_LIMIT_BYTES"]) == 1024 * 1024 < int(config["BODY_LIMIT_AGENT_BYTES"])
    assert int(config["BODY_LIMIT_VOLUME_BYTES"]) > 0


def test_the_portals_routes_and_the_ingress_paths_agree():
    from portal.door import body_limit

    docs = render(values_for("values-production.yaml", {"bodyLimits": {
        "defaultBytes": "1", "agentBytes": "2", "plannerBytes": "3", "serveBytes": "4", "notebookBytes": "5"}}))
    config = named(docs, "ConfigMap", "gpu-config")["data"]
    for ingress in by_kind(docs, "Ingress"):
        path = ingress["spec"]["rules"][0]["http"]["paths"][0]["path"]
        setting = next(name for name, value in config.items()
                       if name.startswith("BODY_LIMIT_") and value == ingress["metadata"]["annotations"][
                           "nginx.ingress.kubernetes.io/proxy-body-size"])
        from django.conf import settings

        probe = path + "x" if path != "/" else "/api/v1/jobs/"
        assert body_limit(probe) == getattr(settings, setting), (path, setting)


def test_the_ingress_serves_the_notebooks_hosts_as_a_second_host():
    docs = render(values_for("values-production.yaml"))
    config = named(docs, "ConfigMap", "gpu-config")["data"]
    ingress = named(docs, "Ingress", "gpu-portal-notebook")
    hosts = [rule["host"] for rule in ingress["spec"]["rules"]]
    assert hosts == ["gpu.example.com", "*.nb.gpu.example.com"]
    assert all(rule["http"]["paths"][0]["backend"]["service"]["name"] == "gpu-portal" for rule in ingress["spec"]["rules"])
    assert {"hosts": ["*.nb.gpu.example.com"], "secretName": "gpu-platform-notebooks-tls"} in ingress["spec"]["tls"]
    assert ingress["metadata"]["annotations"]["nginx.ingress.kubernetes.io/proxy-body-size"] == \
        config["BODY_LIMIT_NOTEBOOK_BYTES"]
    assert config["NOTEBOOK_ORIGIN"] == "https://{id}.nb.gpu.example.com"
    assert config["NOTEBOOK_TICKET_SECONDS"] == "120"
    assert "nb.gpu.example.com" not in config["ALLOWED_HOSTS"]  # the portal's pages are never served there
    assert not any(key.endswith("COOKIE_DOMAIN") for key in config)  # the portal's cookies stay host-only
    without = render(values_for("values-production.yaml", {"ingress": {"notebookHost": ""}}))
    assert all(rule["host"] == "gpu.example.com" for i in by_kind(without, "Ingress") for rule in i["spec"]["rules"])
