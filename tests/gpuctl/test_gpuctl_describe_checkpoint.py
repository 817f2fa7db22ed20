"""`gpuctl describe` shows a job's grace, its checkpoint and the GPU-hours its evictions lost."""

from gpuctl.output import format_job


def job(**extra):
    return {
        "id": 7,
        "name": "train",
        "workspace": "vision-lab",
        "queue": "community",
        "state": "Pending",
        "replicas": [],
        "quote": None,
        **extra,
    }


def test_describe_shows_the_grace_the_checkpoint_and_the_loss():
    text = format_job(
        job(
            termination_grace_s=120,
            lost_gpu_hours="0.9333",
            checkpoint={"path": "/ckpt", "volume": "runs", "every_s": 600, "resumable": True},
        ),
        [],
    )
    lines = {
        line.split("  ")[0].strip(): line.split("  ", 1)[1].strip()
        for line in text.splitlines()
        if "  " in line and not line.startswith(" ")
    }
    assert lines["grace"] == "2m"
    assert lines["checkpoint"] == "/ckpt on runs every 10m (resumable)"
    assert lines["lost GPU-hours"] == "0.9333"


def test_describe_in_chinese_names_the_fields_in_chinese():
    text = format_job(job(termination_grace_s=30, lost_gpu_hours="0"), [], lang="zh")
    assert "终止宽限期" in text and "损失的 GPU 小时" in text
