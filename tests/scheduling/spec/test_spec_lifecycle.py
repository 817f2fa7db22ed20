"""maxRuntime, retry and ttlAfterFinished in the task YAML: read, written back, and wrong at line and column."""

import pytest

from scheduling.spec import SpecError, parse_job_spec, parse_job_spec_obj, spec_to_dict
from scheduling.spec.model import RetrySpec

ROLES = "roles: [{name: main, image: busybox}]\n"


def read(text):
    return parse_job_spec(text + ROLES)


def errors(text):
    with pytest.raises(SpecError) as caught:
        read(text)
    return [(e.line, e.column, e.message) for e in caught.value.errors]


def test_the_fields_are_read_and_written_back():
    spec = read(
        "name: a\nmaxRuntime: 6h\nttlAfterFinished: 7d\n"
        "retry: {limit: 3, backoff: 30s, maxBackoff: 10m, on: [failed, nodeLost], onExitCodes: [42, 1]}\n"
    )
    assert spec.max_runtime_s == 6 * 3600 and spec.ttl_after_finished_s == 7 * 86400
    assert spec.retry == RetrySpec(
        limit=3, backoff_s=30, max_backoff_s=600, on=("failed", "nodeLost"), on_exit_codes=(1, 42)
    )
    out = spec_to_dict(spec)
    assert out["maxRuntime"] == "6h" and out["ttlAfterFinished"] == "7d"
    assert out["retry"] == {
        "limit": 3,
        "backoff": "30s",
        "maxBackoff": "10m",
        "on": ["failed", "nodeLost"],
        "onExitCodes": [1, 42],
    }
    assert parse_job_spec_obj(out) == spec


def test_defaults_and_absence():
    spec = read("name: a\nretry: {limit: 2}\n")
    assert (
        spec.retry == RetrySpec(limit=2) and spec.max_runtime_s is None and spec.ttl_after_finished_s is None
    )
    assert "maxRuntime" not in spec_to_dict(read("name: a\n"))


def test_a_notebook_takes_max_runtime_but_not_retries():
    spec = parse_job_spec("kind: notebook\nname: nb\nmaxRuntime: 8h\n")
    assert spec.max_runtime_s == 8 * 3600 and spec_to_dict(spec)["maxRuntime"] == "8h"
    with pytest.raises(SpecError) as caught:
        parse_job_spec("kind: notebook\nname: nb\nretry: {limit: 1}\n")
    assert caught.value.errors[0].line == 3 and "retry" in caught.value.errors[0].message


@pytest.mark.parametrize(
    ("text", "where", "words"),
    [
        ("name: a\nmaxRuntime: 30\n", (2, 13), "has no unit"),
        ("name: a\nmaxRuntime: 10s\n", (2, 13), "must be at least 1m"),
        ("name: a\nttlAfterFinished: soon\n", (2, 19), "is not a duration"),
        ("name: a\nretry: 3\n", (2, 8), "must be a mapping"),
        ("name: a\nretry: {backoff: 30s}\n", (2, 8), "retry.limit is required"),
        ("name: a\nretry: {limit: -1}\n", (2, 16), "must be from 0 to 100"),
        ("name: a\nretry: {limit: 1, on: [failed, crashed]}\n", (2, 32), "crashed is not one of"),
        ("name: a\nretry: {limit: 1, onExitCodes: [0]}\n", (2, 33), "not an exit code from 1 to 255"),
        ("name: a\nretry: {limit: 1, backoff: 1h, maxBackoff: 1m}\n", (2, 44), "shorter than retry.backoff"),
        ("name: a\nretry: {limit: 1, every: 1h}\n", (2, 19), "unknown field 'every'"),
    ],
)
def test_wrong_fields_are_said_at_line_and_column(text, where, words):
    found = errors(text)
    assert len(found) == 1 and found[0][:2] == where and words in found[0][2], found


def test_the_image_form_gives_max_runtime_a_retry_limit_and_the_clean_up():
    from scheduling.spec import image_form_values, spec_from_image_form

    spec = spec_from_image_form({"image": "busybox", "maxRuntime": "6h", "retryLimit": "2", "ttlAfterFinished": "7d"})
    assert (spec.max_runtime_s, spec.retry, spec.ttl_after_finished_s) == (6 * 3600, RetrySpec(limit=2), 7 * 86400)
    values, hidden = image_form_values(spec)
    assert (values["maxRuntime"], values["retryLimit"], values["ttlAfterFinished"]) == ("6h", "2", "7d")
    assert hidden == []
    _, hidden = image_form_values(read("name: a\nretry: {limit: 2, on: [oom]}\n"))
    assert hidden == ["retry"]   # the form gives the limit alone
    with pytest.raises(SpecError) as caught:
        spec_from_image_form({"image": "busybox", "maxRuntime": "6", "retryLimit": "x"})
    assert [e.field for e in caught.value.errors] == ["retryLimit"]
    with pytest.raises(SpecError) as caught:
        spec_from_image_form({"image": "busybox", "maxRuntime": "6"})
    assert caught.value.errors[0].message == "maxRuntime '6' has no unit; write e.g. 30m, 2h or 1d"
