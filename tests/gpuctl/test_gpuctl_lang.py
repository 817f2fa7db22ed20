"""gpuctl speaks Chinese with --lang zh or a Chinese LANG, and asks the server for Chinese errors."""

import io

import httpx
import pytest

from gpuctl import cli, messages


@pytest.mark.parametrize(("flag", "env", "lang"), [
    (None, {"LANG": "zh_CN.UTF-8"}, "zh"),
    (None, {"LANG": "en_US.UTF-8"}, "en"),
    (None, {"LC_ALL": "en_US.UTF-8", "LANG": "zh_CN.UTF-8"}, "en"),
    ("zh", {"LANG": "en_US.UTF-8"}, "zh"),
    ("en", {"LANG": "zh_CN.UTF-8"}, "en"),
    (None, {}, "en"),
])
def test_the_language_comes_from_the_flag_then_the_locale(flag, env, lang):
    assert messages.language(flag, env) == lang


def test_an_empty_job_list_and_an_error_in_chinese(monkeypatch):
    asked = []

    def answer(request: httpx.Request) -> httpx.Response:
        asked.append(request.headers.get("Accept-Language"))
        if request.url.path == "/api/v1/jobs/":
            return httpx.Response(200, json={"count": 0, "next": None, "previous": None, "results": []})
        return httpx.Response(404, json={"title": "未找到", "status": 404, "detail": "没有", "errors": []},
                              headers={"Content-Type": "application/problem+json"})

    out, err = io.StringIO(), io.StringIO()
    monkeypatch.setattr("sys.stdout", out)
    monkeypatch.setattr("sys.stderr", err)
    env = {"GPUCTL_URL": "http://platform.test", "GPUCTL_TOKEN": "gpt_x", "LANG": "zh_CN.UTF-8",
           "HOME": "/nonexistent"}
    code = cli.main(["get", "jobs"], env=env, transport=httpx.MockTransport(answer))
    assert code == 0, err.getvalue()
    assert "没有作业" in err.getvalue()  # on stderr, as kubectl does
    assert asked and set(asked) == {"zh-hans"}
    cli.main(["get", "jobs", "--lang", "en"], env=env, transport=httpx.MockTransport(answer))
    assert "no jobs" in err.getvalue() and asked[-1] == "en"


def test_an_error_line_in_chinese(monkeypatch):
    def answer(request: httpx.Request) -> httpx.Response:
        return httpx.Response(404, json={"title": "未找到", "status": 404, "detail": "没有", "errors": []},
                              headers={"Content-Type": "application/problem+json"})

    err = io.StringIO()
    monkeypatch.setattr("sys.stderr", err)
    env = {"GPUCTL_URL": "http://platform.test", "GPUCTL_TOKEN": "gpt_x", "HOME": "/nonexistent"}
    code = cli.main(["--lang", "zh", "get", "jobs", "-w", "nowhere"], env=env, transport=httpx.MockTransport(answer))
    assert code != 0
    assert err.getvalue().startswith("gpuctl: 错误：没有这个工作空间：nowhere"), err.getvalue()
