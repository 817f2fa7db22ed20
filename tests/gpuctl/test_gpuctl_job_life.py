"""gpuctl describe job: the max runtime, the deadline, how the job ended and its attempts, in both languages."""

from gpuctl.output import format_job

JOB = {
    "id": 9,
    "name": "flaky",
    "workspace": "vision-lab",
    "queue": "vision-lab",
    "state": "Failed",
    "pending_reason": "",
    "type": "single",
    "priority": 0,
    "preemptible": False,
    "reduce_cost": False,
    "expected_duration_s": 3600,
    "created": "2026-11-21T08:00:00Z",
    "started": "2026-11-21T08:01:00Z",
    "finished": "2026-11-21T08:40:00Z",
    "replicas": [],
    "quote": None,
    "max_runtime_s": 1800,
    "deadline": None,
    "end_code": "oom",
    "end_reason_text": "replica main-0 ran out of memory",
    "attempts": [
        {
            "number": 1,
            "start": "2026-11-21T08:01:00Z",
            "end": "2026-11-21T08:10:00Z",
            "class": "exit_code",
            "exit_code": 1,
            "node": "h100-01",
        },
        {
            "number": 2,
            "start": "2026-11-21T08:11:00Z",
            "end": "2026-11-21T08:40:00Z",
            "class": "oom",
            "exit_code": 137,
            "node": "h100-02",
        },
    ],
}


def test_describe_shows_the_end_and_each_attempt():
    lines = format_job(JOB, []).splitlines()
    fields = {line[:14].strip(): line[16:] for line in lines[: lines.index("")]}
    assert fields["max runtime"] == "30m" and "deadline" not in fields
    assert fields["end"] == "oom: replica main-0 ran out of memory"
    table = lines[lines.index("attempts") + 1 : lines.index("quote") - 1]
    assert table[0].split() == ["#", "STARTED", "ENDED", "CLASS", "EXIT", "CODE", "NODE"]
    assert table[1].split() == [
        "1",
        "2026-11-21",
        "08:01:00",
        "2026-11-21",
        "08:10:00",
        "exit_code",
        "1",
        "h100-01",
    ]
    assert table[2].split()[-3:] == ["oom", "137", "h100-02"]


def test_a_running_job_shows_its_deadline_and_an_unended_attempt_in_chinese():
    running = {
        **JOB,
        "state": "Running",
        "finished": None,
        "end_code": None,
        "end_reason_text": "",
        "deadline": "2026-11-21T08:31:00Z",
        "attempts": [
            {
                "number": 1,
                "start": "2026-11-21T08:01:00Z",
                "end": None,
                "class": None,
                "exit_code": None,
                "node": "h100-01",
            }
        ],
    }
    text = format_job(running, [], lang="zh")
    assert "截止时间" in text and "2026-11-21 08:31:00" in text and "结束方式" in text
    assert "尝试" in text


def test_a_job_from_an_older_server_has_no_attempts_section():
    old = {k: v for k, v in JOB.items() if k not in ("attempts", "max_runtime_s", "end_code")}
    assert "attempts" not in format_job(old, []).splitlines()
