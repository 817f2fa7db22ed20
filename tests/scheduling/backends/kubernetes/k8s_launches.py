"""ReplicaLaunch values as the scheduling cycle builds them, for the Kubernetes backend tests."""

from __future__ import annotations

from scheduling.backends.base import ReplicaLaunch

H100_UUIDS = [f"GPU-h100-{i:04d}" for i in range(8)]


def launch(job_id: int = 1, role: str = "worker", index: int = 0, *, kind: str = "whole", gpus=(0,),
           node: str = "gpu-1", workspace: str = "vision-lab", job_type: str = "single", **extra) -> ReplicaLaunch:
    """A ReplicaLaunch as the cycle builds it (slice fields as the core's Slice)."""
    slice_ = {"kind": kind, "gpu_milli": 1000, "gpu_mem_mib": 0, "mig_profile": "", "mig_instance": -1,
              "timeslice_slot": -1, **extra.pop("slice", {})}
    fields = dict(job_id=job_id, role=role, index=index, workspace=workspace, job_name=f"train-{job_id}",
                  job_type=job_type, image="pytorch/pytorch:2.3.0", command=("python", "train.py"),
                  env=(("EPOCHS", "3"),), node=node, gpus=tuple(gpus),
                  gpu_uuids=tuple(H100_UUIDS[g] if node == "gpu-1" else "" for g in gpus), slice=slice_,
                  cpu_milli=4000, mem_mib=16384, expected_duration_s=600)
    fields.update(extra)
    return ReplicaLaunch(**fields)
