"""A failed pod's exit code and an OOM kill reach the cycle (the failure class of a retry and an end code)."""

from scheduling.backends.kubernetes import manifests as m
from tests.scheduling.backends.kubernetes.test_k8s_manifests import pod


def terminated(code, reason):
    return {
        "containerStatuses": [
            {
                "state": {
                    "terminated": {"exitCode": code, "reason": reason, "finishedAt": "2026-01-01T01:00:00Z"}
                }
            }
        ]
    }


def test_a_failed_pod_gives_its_exit_code():
    status = m.replica_status(pod("Failed", **terminated(42, "Error")))
    assert (status.exit_code, status.oom) == (42, False) and "exit code 42" in status.message


def test_an_oom_kill_is_said():
    status = m.replica_status(pod("Failed", **terminated(137, "OOMKilled")))
    assert (status.exit_code, status.oom) == (137, True)


def test_a_pod_that_succeeded_or_runs_has_none():
    assert m.replica_status(pod("Succeeded", **terminated(0, "Completed"))).exit_code is None
    assert m.replica_status(pod("Running")).exit_code is None
