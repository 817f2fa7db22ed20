"""Example task specs: the seed's YAML exactly as written, and the README's clean form.

The submit page offers them as starting points; tests use them as fixtures.
"""

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

# The clean-form example documented in the README.
CLEAN_YAML = """\
name: bert-finetune
type: pytorch                # single | pytorch | mpi
queue: vision-lab            # optional: the workspace's default queue
priority: 20                 # 0-100, default 0
preemptible: true            # default: true when reduceCost, else false
reduceCost: false            # true: off-peak / spot / idle capacity only, discounted
expectedDuration: 2h         # used for quotes and the simulated cluster; default 1h
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

EXAMPLES = {"seed": SEED_YAML, "clean": CLEAN_YAML}
