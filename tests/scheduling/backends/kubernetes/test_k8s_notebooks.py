"""A notebook on Kubernetes: a pod bound like any replica, serving under its base URL with its token, its
home volume's PersistentVolumeClaim (kept across stop and start, grown with the volume, deleted only when
asked) and a ClusterIP Service, all made and deleted through the emulated API server; every object valid for
Kubernetes 1.30."""

from __future__ import annotations

from dataclasses import replace

import kubernetes_validate
import pytest

from scheduling.backends.base import JUPYTER
from scheduling.backends.kubernetes import manifests as m
from scheduling.backends.kubernetes.config import KubernetesConfig
from scheduling.storage import Mount
from tests.scheduling.backends.kubernetes.k8s_launches import launch

K8S_VERSION = "1.30.0"
NS = "gpu-ws-vision-lab"
HOME = Mount("volume", "vision-lab", "home-lab", 0, "", False, 20, "standard", "ReadWriteOnce", home_of="lab")


def notebook_launch():
    """As the cycle launches a notebook (`kind` of the helper is the slice's)."""
    replica = launch(job_id=7, role="notebook", kind="fraction", token="s3cret", base_url="/nb/vision-lab/lab/",
                     home_mib=20 * 1024, home=HOME, job_name="lab", command=(),
                     image="quay.io/jupyter/pytorch-notebook:cuda12-latest", slice={"gpu_milli": 500, "gpu_mem_mib": 10240})
    return replace(replica, kind="notebook", shape=JUPYTER)


def test_the_notebook_objects_are_valid_and_say_what_they_serve():
    replica = notebook_launch()
    pod = m.replica_pod(replica, NS, "nvidia", KubernetesConfig())
    claim = m.home_claim(replica, NS)
    service = m.notebook_service(replica, NS)
    for obj in (pod, claim, service):
        kubernetes_validate.validate(obj, K8S_VERSION, strict=True)
    (container,) = pod["spec"]["containers"]
    env = {e["name"]: e["value"] for e in container["env"]}
    assert env["JUPYTER_TOKEN"] == "s3cret" and env["NOTEBOOK_ARGS"] == "--ServerApp.base_url=/nb/vision-lab/lab/"
    assert env["NVIDIA_VISIBLE_DEVICES"] == "GPU-h100-0000"  # a fraction is pinned as any replica's is
    assert container["ports"] == [{"name": "http", "containerPort": 8888, "protocol": "TCP"}]
    assert container["volumeMounts"] == [{"name": "home", "mountPath": "/home/jovyan"}]
    assert pod["spec"]["volumes"] == [{"name": "home", "persistentVolumeClaim": {"claimName": "home-lab"}}]
    assert pod["spec"]["nodeName"] == "gpu-1" and "command" not in container  # the image's own command
    assert claim["spec"] == {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "20Gi"}}}
    assert service["spec"]["selector"] == {m.MANAGED: "true", m.KIND: m.REPLICA_KIND, m.JOB_ID: "7"}
    assert m.notebook_url(7, NS, "/nb/vision-lab/lab/") == f"http://nb-7.{NS}.svc:8888/nb/vision-lab/lab/"
    training = m.replica_pod(launch(), NS, "nvidia", KubernetesConfig())
    assert "ports" not in training["spec"]["containers"][0] and "volumes" not in training["spec"]


def test_launch_stop_start_and_delete_through_the_api_server(api, backend, gpu_node):
    replica = notebook_launch()
    backend.inventory()
    backend.launch(replica)
    (pod,) = api.list("pods", NS)
    assert pod["metadata"]["labels"][m.NOTEBOOK_NAME] == "lab" and pod["spec"]["nodeName"] == "gpu-1"
    (claim,) = api.list("persistentvolumeclaims", NS)
    (service,) = api.list("services", NS)
    assert claim["metadata"]["name"] == "home-lab" and service["metadata"]["name"] == "nb-7"
    (reservation,) = api.list("pods", backend.config.reservation_namespace)  # same binding rules as jobs:
    assert reservation["spec"]["nodeName"] == "gpu-1"  # the fraction's GPU is held whole by a reservation
    assert backend.endpoint(replica.key, workspace="vision-lab", base_url=replica.base_url).url == \
        f"http://nb-7.{NS}.svc:8888/nb/vision-lab/lab/"

    backend.evict(replica.key, "stopped")  # stop: the pod and its Service go, the home stays
    assert api.list("pods", NS) == [] and api.list("services", NS) == []
    assert [c["metadata"]["name"] for c in api.list("persistentvolumeclaims", NS)] == ["home-lab"]

    backend.launch(replace(replica, home=replace(HOME, size_gib=30)))  # start again: the same claim, grown
    (again,) = api.list("persistentvolumeclaims", NS)
    assert again["metadata"]["uid"] == claim["metadata"]["uid"]
    assert again["spec"]["resources"]["requests"]["storage"] == "30Gi"
    assert len(api.list("pods", NS)) == 1 and len(api.list("services", NS)) == 1

    backend.forget(replica.key)
    backend.delete_home("vision-lab", "lab")
    backend.delete_home("vision-lab", "lab")  # idempotent
    assert api.list("persistentvolumeclaims", NS) == [] and api.list("pods", NS) == []


@pytest.mark.django_db
def test_a_notebook_job_stops_and_starts_through_the_kubernetes_backend(cluster, api, make_backend,
                                                                        django_capture_on_commit_callbacks):
    from billing.services import submit_quoted_job
    from scheduling import services
    from scheduling.cycle.run import run_scheduling_cycle
    from scheduling.models import JobState, Node
    from scheduling.notebooks import endpoint_of, notebook_token

    for node in Node.objects.select_related("pool").filter(pool__name="h100"):
        api.add_node(node.name, capacity={"nvidia.com/gpu": node.gpus.count()},
                     labels={"gpu-platform/pool": node.pool.name, "nvidia.com/gpu.product": node.pool.gpu_model,
                             "nvidia.com/gpu.memory": str(node.pool.gpu_memory_mib),
                             "nvidia.com/gpu.count": str(node.gpus.count())})
    backend = make_backend()

    def cycle():
        with django_capture_on_commit_callbacks(execute=True):
            return run_scheduling_cycle(backend)

    job = submit_quoted_job(user=cluster.alice, workspace=cluster.vision,
                            spec="kind: notebook\nname: lab\nqueue: vision-lab\nnodePool: h100\n")
    cycle()
    (pod,) = api.list("pods", NS)
    env = {e["name"]: e["value"] for e in pod["spec"]["containers"][0]["env"]}
    assert env["JUPYTER_TOKEN"] == notebook_token(job.pk)
    assert env["NOTEBOOK_ARGS"] == "--ServerApp.base_url=/nb/vision-lab/lab/"
    api.set_pod_phase(NS, pod["metadata"]["name"], "Running")
    cycle()
    job.refresh_from_db()
    assert job.state == JobState.RUNNING
    assert endpoint_of(job, backend).url == f"http://nb-{job.pk}.{NS}.svc:8888/nb/vision-lab/lab/"

    services.stop_workload(cluster.alice, job, "")
    cycle()
    job.refresh_from_db()
    assert job.state == JobState.STOPPED
    assert api.list("pods", NS) == [] and api.list("services", NS) == []
    assert len(api.list("persistentvolumeclaims", NS)) == 1

    services.start_workload(cluster.alice, job)
    cycle()
    job.refresh_from_db()
    assert job.state == JobState.SCHEDULED
    (pod,) = api.list("pods", NS)
    assert pod["spec"]["volumes"][0]["persistentVolumeClaim"]["claimName"] == "home-lab"

    with django_capture_on_commit_callbacks(execute=True):
        services.delete_notebook(cluster.alice, job, delete_home=True, backend=backend)
    cycle()
    assert api.list("pods", NS) == [] and api.list("persistentvolumeclaims", NS) == []
