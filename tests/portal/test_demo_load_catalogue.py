"""Every job of the demo's trickle is a spec the platform takes; among them one that retries and one that
checkpoints and can be evicted (so a demo shows retries and resumes)."""

import random

from portal.demo.load import CATALOGUE, demo_spec
from scheduling.api import parse_job_spec


def test_every_demo_job_parses_and_some_retry_or_resume():
    specs = {}
    for seed in range(200):
        text = demo_spec(random.Random(seed), 1)
        specs[text.split("\n", 1)[0]] = parse_job_spec(text)
    assert len(specs) == len(CATALOGUE)
    assert specs["name: flaky-1"].retry is not None
    resumable = specs["name: resumable-1"]
    assert resumable.checkpoint is not None and resumable.preemptible
