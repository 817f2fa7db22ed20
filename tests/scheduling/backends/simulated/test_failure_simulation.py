"""The simulated training process honours SIM_EXIT_CODE (one code, or one per placement) and SIM_FAIL_AFTER
(simulated time) from its environment, so demos and tests can watch retries happen."""

import subprocess
import sys
import time

import pytest

from scheduling.backends.simulated import training_process
from scheduling.backends.simulated.training_process import simulated_exit_code, simulated_fail_after

SCRIPT = training_process.__file__


@pytest.mark.parametrize(
    ("env", "attempt", "code"),
    [
        ({}, 0, 0),
        ({"SIM_EXIT_CODE": "42"}, 3, 42),
        ({"SIM_EXIT_CODE": "1,1,0"}, 0, 1),
        ({"SIM_EXIT_CODE": "1,1,0"}, 2, 0),
        ({"SIM_EXIT_CODE": "1,137"}, 5, 137),  # past the list: its last
        ({"SIM_FAIL_AFTER": "5m"}, 0, 1),  # a failure time alone fails with 1
        ({"SIM_EXIT_CODE": "oops"}, 0, 1),
    ],
)
def test_the_exit_code_of_each_placement(env, attempt, code):
    assert simulated_exit_code(env, attempt) == code


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("90", 90.0), ("30s", 30.0), ("10m", 600.0), ("1.5h", 5400.0), ("", None), ("soon", None)],
)
def test_the_failure_time_in_simulated_seconds(text, seconds):
    assert simulated_fail_after({"SIM_FAIL_AFTER": text}) == seconds


def run(env, *args):
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-I", "-S", SCRIPT, "--seconds", "30", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=20,
    )
    return done, time.monotonic() - started


def test_the_process_fails_after_the_simulated_time_with_its_code():
    done, took = run({"SIM_EXIT_CODE": "3", "SIM_FAIL_AFTER": "10m"}, "--speedup", "6000")  # 0.1 s
    assert done.returncode == 3 and took < 10
    assert done.stdout.splitlines()[-1] == "simulated failure: exit code 3"


def test_the_third_placement_completes():
    done, took = run({"SIM_EXIT_CODE": "1,1,0", "SIM_FAIL_AFTER": "1m"}, "--attempt", "2", "--seconds", "0.1")
    assert done.returncode == 0 and done.stdout.splitlines()[-1] == training_process.COMPLETED
