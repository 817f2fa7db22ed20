"""Example task specs: the seed's YAML exactly as written, and the documented clean form (tests use
them as fixtures); and the Submit page's examples, made for one workspace's queues and the pools
that exist (`workspace_examples`).
"""

from django.utils.translation import gettext as _

from scheduling import formats

# Seed 000 (task YAML), copied exactly as written.
SEED_YAML = """\
# Platform configurations.
TaskName: training1
# The higher the priority, the higher the price. The platform does not guarantee the completion time of the training.
Priority: 50
# Task type, e.g., MPI requires two types of images, Master + Worker.
TaskType: MPI
# Determines the minimum and maximum number of Pods required for running the task.
MaxReplicas: 50
MinReplicas: 10
# Whether the task supports AMD GPU.
AMDSupport: true
# Whether there is a need to reduce consumption (for example, allocating more Replicas only when the cluster is
# relatively idle, characterized as preemptible, or running at night using off-peak electricity, similar to the logic of electric cars).
ReduceCost: true

# AI training task configurations.
TaskImage: vacant.io/training:1.0
MasterImage: vacant.io/training-master:1.0
WorkerImage: vacant.io/training-worker:1.0
MasterMaxReplicas: 10
WorkerMaxReplicas: 40
# and more ai training task configurations.
"""

# The clean-form example of docs/reference/task-yaml.md.
CLEAN_YAML = """\
name: bert-finetune
type: pytorch                # single | pytorch | mpi
queue: vision-lab            # optional: the workspace's default queue
priority: 20                 # 0-100, default 0
preemptible: true            # default: true when reduceCost, else false
reduceCost: false            # true: off-peak / spot / idle capacity only, discounted
expectedDuration: 2h         # what quotes and the simulated cluster assume; default 2h
roles:
  - name: worker             # mpi and pytorch: a `master` role and a `worker` role
    image: pytorch/pytorch:2.4.0-cuda12.1-cudnn9-runtime
    command: ["python", "train.py"]
    env: {EPOCHS: "3"}
    replicas: {min: 1, max: 4}
    sharing: fraction        # exclusive | fraction | mig | timeslice; default exclusive
    resources: {gpu: 0.5, gpuMemory: 10Gi, cpu: 4, memory: 16Gi}  # or gpu: 2, or mig: 3g.40gb
    vendor: nvidia           # nvidia | amd | any; default nvidia
    gpuModel: A100-80GB      # optional
    nodePool: a100-spot      # optional
checkpointPath: s3://bucket/run-1/   # optional
"""


# -- examples made for one workspace ------------------------------------------------------------

_SINGLE = """\
name: one-gpu
queue: {queue}  # {c_open}
expectedDuration: 2h
roles:
  - name: main
    image: pytorch/pytorch:2.4.0-cuda12.1-cudnn9-runtime
    command: ["python", "train.py"]
    sharing: exclusive         # {c_whole}
    resources: {{gpu: 1, cpu: 4, memory: 16Gi}}
    vendor: {vendor}
"""

_CLEAN = """\
name: bert-finetune
type: pytorch                # single | pytorch | mpi
queue: {queue}  # {c_default_queue}
priority: 20                 # {c_priority}
preemptible: true            # {c_preemptible}
reduceCost: false            # {c_reduce_cost}
expectedDuration: 2h         # {c_duration}
roles:
  - name: worker             # {c_roles}
    image: pytorch/pytorch:2.4.0-cuda12.1-cudnn9-runtime
    command: ["python", "train.py"]
    env: {{EPOCHS: "3"}}
    replicas: {{min: 1, max: 4}}
    sharing: {sharing}  # exclusive | fraction | mig | timeslice; {c_default} exclusive
    resources: {resources}
    vendor: {vendor}  # nvidia | amd | any; {c_default} nvidia
    gpuModel: {gpu_model}  # {c_optional}
    nodePool: {pool}  # {c_optional}
checkpointPath: s3://bucket/run-1/   # {c_optional}
"""

_SPARE = """\
name: spare-capacity
queue: {queue}  # {c_spare}
preemptible: true
expectedDuration: 2h
roles:
  - name: main
    image: pytorch/pytorch:2.4.0-cuda12.1-cudnn9-runtime
    command: ["python", "sweep.py"]
    resources: {{gpu: 1, cpu: 4, memory: 16Gi}}
    vendor: {vendor}
"""


def _comments() -> dict[str, str]:
    """The examples' comments in the reader's language (the YAML itself stays as the parser reads it)."""
    return {
        "c_open": _("a queue open to your workspace"), "c_whole": _("one whole GPU"),
        "c_default_queue": _("optional: the workspace's default queue"), "c_priority": _("0-100, default 0"),
        "c_preemptible": _("default: true when reduceCost, else false"),
        "c_reduce_cost": _("true: off-peak / spot / idle capacity only, discounted"),
        "c_duration": _("what the quote is for; default 2h"),
        "c_roles": _("mpi and pytorch: a `master` role and a `worker` role"),
        "c_default": _("default"), "c_optional": _("optional"),
        "c_spare": _("preemptible work only: idle GPUs, given back when others need them"),
    }


def workspace_examples(*, queue: str | None, spare_queue: str | None, pools: list) -> list[tuple[str, str, str]]:
    """(key, label, YAML) of the submit page's examples for one workspace: its queue (`queue`, its
    default), a preemptible-only queue open to it (`spare_queue`, or None) and the cluster's pools
    (objects with name, vendor, gpu_model, gpu_memory_mib and sharing_modes), so that each one
    quotes as it is. The seed's task form comes last, as written."""
    vendors = [p.vendor for p in pools]
    vendor = "nvidia" if "nvidia" in vendors or not vendors else vendors[0]
    shared = next((p for p in pools if "fraction" in p.sharing_modes and p.vendor == vendor), None)
    whole = next((p for p in pools if "exclusive" in p.sharing_modes and p.vendor == vendor), None)
    pool = shared or whole
    comments = _comments()
    out = []
    if queue:
        out.append(("single", "1 GPU", _SINGLE.format(queue=queue, vendor=vendor, **comments)))
    if queue and pool is not None:
        if shared is not None:
            memory = formats.memory(min(10 * 1024, shared.gpu_memory_mib // 2))
            sharing, resources = "fraction", f"{{gpu: 0.5, gpuMemory: {memory}, cpu: 4, memory: 16Gi}}"
        else:
            sharing, resources = "exclusive", "{gpu: 1, cpu: 4, memory: 16Gi}"
        out.append(("clean", "Shared GPU, every field", _CLEAN.format(
            queue=queue, sharing=sharing, resources=resources, vendor=vendor, gpu_model=pool.gpu_model,
            pool=pool.name, **comments)))
    if spare_queue:
        out.append(("spare", "Spare capacity", _SPARE.format(queue=spare_queue, vendor=vendor, **comments)))
    out.append(("seed", "Task form (seed)", SEED_YAML))
    return out
