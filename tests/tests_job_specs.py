"""Task YAML for tests that need jobs of a given shape (console tests and their browser twins)."""

JOB = """name: {name}
queue: {queue}
preemptible: {preemptible}
expectedDuration: {hours}h
roles:
  - name: main
    image: busybox
    replicas: {{min: {min}, max: {max}}}
    resources: {{gpu: {gpus}}}
    nodePool: {pool}
"""


def job_spec(name, *, queue="vision-lab", preemptible="false", gpus=1, pool="h100", hours=1, min=1, max=1):
    return JOB.format(name=name, queue=queue, preemptible=preemptible, gpus=gpus, pool=pool, hours=hours,
                      min=min, max=max)
