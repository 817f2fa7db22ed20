"""A one-role job spec for the cycle tests."""

ONE_GPU = """name: {name}
queue: {queue}
priority: {priority}
preemptible: {preemptible}
expectedDuration: 1h
roles:
  - name: main
    image: busybox
    resources: {{gpu: {gpus}}}
    nodePool: {pool}
"""


def spec(name, *, queue="vision-lab", priority=0, preemptible="true", gpus=1, pool="h100"):
    return ONE_GPU.format(name=name, queue=queue, priority=priority, preemptible=preemptible, gpus=gpus, pool=pool)
