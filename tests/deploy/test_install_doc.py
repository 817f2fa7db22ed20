"""docs/install-kubernetes.md runs: its values file renders into valid objects, its helm and kubectl
commands name the chart and objects that exist, and its `manage.py` commands (blocks marked
`# test: run`) run against the test database."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import kubernetes_validate
import yaml
from django.contrib.auth import get_user_model
from django.core.management import call_command

from tests.deploy.test_chart import CHART, K8S_VERSION, ROOT, merge, render

DOC = ROOT / "docs" / "install-kubernetes.md"
FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.S | re.M)
KINDS = {"deploy": "Deployment", "cronjob": "CronJob", "job": "Job", "svc": "Service"}
PASSWORDS = {"operator-password.txt": "Lamp-Orbit-7-Quartz", "new-password.txt": "Rivet-Meadow-3-Cobalt"}


def blocks() -> list[tuple[str, str]]:
    return FENCE.findall(DOC.read_text())


def marked(tag: str) -> list[tuple[str, str]]:
    """(argument of the marker, the block without it) of each block whose first line is `# test: <tag>`."""
    out = []
    for _, body in blocks():
        first, _, rest = body.partition("\n")
        m = re.fullmatch(rf"# test: {tag}\s*(\S*)", first.strip())
        if m:
            out.append((m.group(1), rest))
    return out


def commands(body: str) -> list[str]:
    """The block's commands, continuation lines joined."""
    return [line.strip() for line in body.replace("\\\n", " ").splitlines() if line.strip()]


def helm_commands() -> list[list[str]]:
    return [shlex.split(c) for _, body in blocks() for c in commands(body) if c.startswith("helm ")]


def release_and_chart(command: list[str]) -> tuple[str, str] | None:
    """`helm install R CHART ...` or `helm upgrade [--install] R CHART ...`: the release and the chart."""
    words = [w for w in command[2:] if w != "--install"]
    return (words[0], words[1]) if command[1] in ("install", "upgrade") else None


def installs() -> list[list[str]]:
    return [c for c in helm_commands() if c[1] == "install" or (c[1] == "upgrade" and "--install" in c)]


def doc_values() -> tuple[str, dict]:
    ((name, body),) = marked("values")
    return name, yaml.safe_load(body)


def rendered_from_the_doc() -> list[dict]:
    name, values = doc_values()
    (install,) = installs()
    release, namespace = release_and_chart(install)[0], install[install.index("-n") + 1]
    assert install[install.index("-f") + 1] == name
    return render(merge(yaml.safe_load((CHART / "values.yaml").read_text()), values), release, namespace)


def leaves(values: dict, prefix: str = "") -> set[str]:
    out = set()
    for key, value in values.items():
        path = f"{prefix}{key}"
        out |= leaves(value, path + ".") if isinstance(value, dict) and value else {path}
    return out


def test_the_doc_has_the_install_sections_in_order():
    headings = re.findall(r"^## (.+)$", DOC.read_text(), re.M)
    wanted = ["Prerequisites", "Images", "Namespace and Secret", "Values", "Install", "The first operator",
              "Checking that it is ready", "Node agents", "Backups", "Upgrades", "Uninstall"]
    assert [h for h in headings if h in wanted] == wanted


def test_the_docs_values_file_sets_only_keys_the_chart_has():
    _, values = doc_values()
    chart_keys = leaves(yaml.safe_load((CHART / "values.yaml").read_text()))
    # a key under an empty map of the chart (labels, annotations, extraEnv) is the user's own
    unknown = {k for k in leaves(values) if k not in chart_keys and not any(k.startswith(p + ".") for p in chart_keys)}
    assert not unknown, f"keys the chart does not read: {unknown}"
    assert not leaves({"portal": {"autoscalling": {"enabled": True}}}) <= chart_keys  # a typo is caught


def test_the_docs_values_render_into_valid_objects():
    docs = rendered_from_the_doc()
    checked = 0
    for doc in docs:
        if not doc["apiVersion"].startswith("monitoring.coreos.com"):
            kubernetes_validate.validate(doc, K8S_VERSION, strict=True)
            checked += 1
    assert checked >= 15
    kinds = {d["kind"] for d in docs}
    assert {"HorizontalPodAutoscaler", "PodDisruptionBudget", "CronJob", "Job", "Ingress"} <= kinds
    assert "Secret" not in kinds  # the doc's Secret is made with kubectl


def test_the_docs_commands_name_the_chart_and_objects_that_exist():
    for command in helm_commands():
        if (named := release_and_chart(command)) is not None:
            assert (ROOT / named[1]).resolve() == CHART
    docs = rendered_from_the_doc()
    names = {(d["kind"], d["metadata"]["name"]) for d in docs}
    text = DOC.read_text()
    # Jobs the doc makes itself: one from the CronJob, and the restore Job's manifest
    names |= {("Job", n) for n in re.findall(r"create job --from=\S+ ([a-z0-9-]+)", text)}
    names |= {(k, n) for k, n in re.findall(r"kind: (\w+)\nmetadata: \{name: ([a-z0-9-]+)\}", text)}
    referred = re.findall(r"(?<=[\s=])(deploy|cronjob|job|svc)/([a-z0-9-]+)(?![\w/-])", DOC.read_text())
    assert len(referred) >= 4
    for kind, name in referred:
        assert (KINDS[kind], name) in names, f"{kind}/{name} is not an object the chart makes"


def manage_py(command: str, tmp_path: Path) -> list[str]:
    """The `manage.py` part of a documented command, `/dev/stdin` replaced by the file redirected to it."""
    words = shlex.split(command)
    if "--" in words:
        words = words[words.index("--") + 1:]
    stdin = None
    if "<" in words:
        stdin = words[words.index("<") + 1]
        words = words[:words.index("<")]
    assert words[:2] == ["python", "manage.py"], command
    args = words[2:]
    if stdin is not None:
        path = tmp_path / stdin
        path.write_text(PASSWORDS[stdin] + "\n")
        args = [str(path) if a == "/dev/stdin" else a for a in args]
    return args


def test_the_docs_manage_py_commands_run(db, tmp_path, capsys):
    runs = [c for _, body in marked("run") for c in commands(body)]
    assert len(runs) == 2
    first, update = (manage_py(c, tmp_path) for c in runs)
    call_command(*first)
    ops = get_user_model().objects.get(username="ops")
    assert ops.is_staff and ops.is_superuser and ops.check_password(PASSWORDS["operator-password.txt"])
    call_command(*first)  # "Running it again changes nothing"
    assert "nothing changed" in capsys.readouterr().out
    call_command(*update)
    ops.refresh_from_db()
    assert ops.check_password(PASSWORDS["new-password.txt"])
    out = capsys.readouterr().out
    assert not [p for p in PASSWORDS.values() if p in out]



def test_the_docs_restore_job_is_a_valid_object_that_mounts_what_the_chart_makes():
    ((_, body),) = marked("manifest")
    job = yaml.safe_load(body)
    kubernetes_validate.validate(job, K8S_VERSION, strict=True)
    spec = job["spec"]["template"]["spec"]
    assert spec["containers"][0]["command"][:3] == ["python", "manage.py", "restore"]
    assert "--yes" in spec["containers"][0]["command"]  # a Job has no terminal to confirm at
    claims = {v["persistentVolumeClaim"]["claimName"] for v in spec["volumes"] if "persistentVolumeClaim" in v}
    made = {(d["kind"], d["metadata"]["name"]) for d in rendered_from_the_doc()}
    assert {("PersistentVolumeClaim", c) for c in claims} <= made
    config = {r["configMapRef"]["name"] for r in spec["containers"][0]["envFrom"] if "configMapRef" in r}
    assert {("ConfigMap", c) for c in config} <= made
