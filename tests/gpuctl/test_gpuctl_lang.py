"""gpuctl speaks Chinese with --lang zh or a Chinese LANG, and asks the server for Chinese errors."""

import io
import json

import httpx
import pytest
import yaml

from gpuctl import cli, messages, output


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


# --------------------------------------------------------------------------- tables and fixed words

JOB = {"id": 7, "name": "bert", "workspace": "vision-lab", "queue": "vision-lab", "state": "Running",
       "pending_reason": "", "type": "pytorch", "priority": 20, "preemptible": True, "reduce_cost": False,
       "expected_duration_s": 7200, "created": "2026-11-21T08:00:00Z", "started": "2026-11-21T08:05:00Z",
       "finished": None, "final_cost": None, "cost_so_far": "1.20", "currency": "USD",
       "replicas": [{"role": "main", "index": 0, "state": "Running", "node": "h100-01", "gpus": [0],
                     "slice_label": "1 GPU", "started": "2026-11-21T08:05:00Z", "ended": None}],
       "quote": {"id": "h100.exclusive.now", "currency": "USD", "price_per_hour": "3.0400",
                 "estimate_low": "6.08", "estimate_high": "6.08"}}
QUOTE = {"currency": "USD", "expected_duration_hours": "2.00", "unavailable": ["a100: too small"], "options": [
    {"id": "h100.exclusive.now", "sharing": "exclusive", "vendor": "nvidia", "gpu_model": "H100-80GB",
     "pool": "h100", "spot": False, "when": "now", "price_per_hour": "3.0400", "price_per_hour_offpeak": "1.8240",
     "estimate_low": "6.08", "estimate_high": "6.08", "cheapest": True, "tradeoffs": []}]}
COSTS = {"currency": "USD", "as_of": "2026-02-28T23:00:00+00:00", "total": "13.37", "group_by": "job", "page": 1,
         "pages": 1, "rows": [{"job": 11, "job_name": "a", "allocated_gpu_hours": "2.000000",
                               "used_gpu_hours": "1.500000", "idle_gpu_hours": "0.500000", "cost": "13.37"}]}
NOTEBOOK = {"id": 5, "name": "lab", "workspace": "vision-lab", "state": "Running", "slice": "0.5 GPU",
            "idle_s": 600, "cost_so_far": "0.40", "currency": "USD", "url": "http://gpu.test/notebooks/5/"}
SERVICE = {"id": 12, "name": "chat", "workspace": "vision-lab", "queue": "vision-lab", "state": "Running",
           "endpoint": "http://gpu.test/serve/vision-lab/chat/", "min_replicas": 0, "max_replicas": 3,
           "desired_replicas": 2, "running_replicas": 1, "requests_per_second": 2.5, "p95_ms": 180.4,
           "cost_per_1000_requests": "0.4200", "currency": "USD"}


def listing(*items):
    return httpx.Response(200, json={"count": len(items), "next": None, "previous": None, "results": list(items)})


ROUTES = {
    ("GET", "/api/v1/jobs/"): lambda: listing(JOB),
    ("GET", "/api/v1/jobs/7/"): lambda: httpx.Response(200, json=JOB),
    ("GET", "/api/v1/jobs/7/events/"): lambda: httpx.Response(200, json=[
        {"time": "2026-11-21T08:05:00Z", "kind": "started", "state": "Running", "reason": ""}]),
    ("POST", "/api/v1/quotes/"): lambda: httpx.Response(200, json=QUOTE),
    ("GET", "/api/v1/costs/"): lambda: httpx.Response(200, json=COSTS),
    ("GET", "/api/v1/notebooks/"): lambda: listing(NOTEBOOK),
    ("GET", "/api/v1/services/"): lambda: listing(SERVICE),
}


@pytest.fixture
def gpuctl(monkeypatch, tmp_path):
    """Runs gpuctl against canned API answers: (exit code, stdout, stderr)."""

    def run(*argv, **env):
        out, err = io.StringIO(), io.StringIO()
        monkeypatch.setattr("sys.stdout", out)
        monkeypatch.setattr("sys.stderr", err)
        environ = {"GPUCTL_URL": "http://gpu.test", "GPUCTL_TOKEN": "gpt_x", "HOME": str(tmp_path),
                   "GPUCTL_WORKSPACE": "vision-lab", **env}
        code = cli.main(list(argv), env=environ, transport=httpx.MockTransport(
            lambda request: ROUTES[(request.method, request.url.path)]()))
        return code, out.getvalue(), err.getvalue()

    return run


def test_the_job_list_headers_are_chinese_and_the_columns_line_up(gpuctl):
    code, out, err = gpuctl("get", "jobs", "-o", "wide", LANG="zh_CN.UTF-8")
    assert (code, err) == (0, "")
    header, row = out.splitlines()
    assert header.split()[:5] == ["ID", "名称", "工作空间", "队列", "状态"]
    assert "创建时间 (UTC)" in header and "可抢占" in header and "原因" in header
    assert " 是 " in row  # preemptible: true
    # each value starts where its header does, counting a Chinese character as two columns
    assert output.width(header[:header.index("工作空间")]) == row.index("vision-lab")
    code, english, _ = gpuctl("get", "jobs", "-o", "wide", "--lang", "en", LANG="zh_CN.UTF-8")
    assert english.splitlines()[0].split()[:5] == ["ID", "NAME", "WORKSPACE", "QUEUE", "STATE"] and " yes " in english


def test_json_and_yaml_keys_stay_english(gpuctl):
    assert json.loads(gpuctl("get", "jobs", "-o", "json", "--lang", "zh")[1]) == [JOB]
    assert yaml.safe_load(gpuctl("cost", "--month", "2026-02", "-o", "yaml", "--lang", "zh")[1])["rows"] == \
        COSTS["rows"]


def test_a_job_page_in_chinese(gpuctl):
    code, out, _ = gpuctl("--lang", "zh", "describe", "job", "7")
    assert code == 0
    lines = out.splitlines()
    assert lines[0].startswith("作业") and lines[0].endswith("  7")
    assert any(line.startswith("费用") and line.endswith("目前 1.20 USD") for line in lines)
    assert {"副本", "报价", "事件"} <= set(lines)
    assert "选项 h100.exclusive.now，每小时价格 3.0400 USD，估算 6.08 USD" in lines
    assert any(line.split()[:3] == ["角色", "序号", "状态"] for line in lines)


def test_the_quote_table_in_chinese(gpuctl, tmp_path):
    spec = tmp_path / "job.yaml"
    spec.write_text("name: x\n")
    code, out, _ = gpuctl("quote", str(spec), "--lang", "zh")
    assert code == 0
    title, header, row, cheapest, not_offered = out.splitlines()
    assert title == f"{spec} 在工作空间 vision-lab 中的报价，币种 USD，预计时长 2.00 小时"
    assert header.split()[:6] == ["ID", "共享方式", "厂商", "GPU", "型号", "资源池"]
    assert "每小时价格 (USD)" in header and "谷时每小时价格 (USD)" in header and header.endswith("最便宜")
    assert row.split()[5] == "否"  # spot
    assert cheapest == f"最便宜：h100.exclusive.now  （gpuctl submit {spec} --option h100.exclusive.now）"
    assert not_offered == "不提供：a100: too small"


def test_costs_notebooks_and_services_in_chinese(gpuctl):
    code, out, _ = gpuctl("cost", "--month", "2026-02", LANG="zh_CN.UTF-8")
    title, header, row, total = out.splitlines()
    assert title == "vision-lab 在 2026-02 的费用（2026-02-01 至 2026-02-28），按 job 分组，截至 2026-02-28 23:00:00 UTC"
    assert header.split() == ["作业", "名称", "GPU", "小时", "已使用", "GPU", "小时", "空闲", "GPU", "小时", "费用", "(USD)"]
    assert total.split() == ["合计", "13.37"] and output.width(total) == output.width(row)
    code, out, _ = gpuctl("notebook", "list", LANG="zh_CN.UTF-8")
    header, row = out.splitlines()
    assert header.split() == ["ID", "名称", "工作空间", "状态", "切分", "空闲", "费用", "URL"]
    assert "10 分钟" in row
    code, out, _ = gpuctl("serve", "list", LANG="zh_CN.UTF-8")
    header, row = out.splitlines()
    assert header.split() == ["名称", "ID", "状态", "副本", "RPS", "P95", "每千次请求费用", "端点"]


def test_config_view_and_profiles_in_chinese(monkeypatch, tmp_path):
    out = io.StringIO()
    monkeypatch.setattr("sys.stdout", out)
    env = {"HOME": str(tmp_path), "LANG": "zh_CN.UTF-8"}
    path = tmp_path / ".config" / "gpuctl" / "config.toml"
    assert cli.main(["config", "set-profile", "lab", "--url", "http://lab:8000", "--default"], env=env) == 0
    assert out.getvalue() == f"{path} 中的配置档 lab：已设置 url；它是默认配置档\n"
    out.truncate(0)
    out.seek(0)
    assert cli.main(["config", "view"], env=env) == 0
    lines = out.getvalue().splitlines()
    assert lines[0].split() == ["配置文件", str(path)]
    assert lines[2].split() == ["URL", "http://lab:8000", "(配置档", "lab)"]
    assert lines[6].split() == ["默认", "配置档", "URL", "工作空间", "令牌"]
    assert "none yet" not in out.getvalue() and "(profile" not in out.getvalue()
    out.truncate(0)
    out.seek(0)
    assert cli.main(["config", "use-profile", "lab", "--lang", "zh"], env={"HOME": str(tmp_path)}) == 0
    assert out.getvalue() == f"默认配置档：lab（{path}）\n"


def test_a_waiting_job_gives_its_reason_in_the_language_asked_for(gpuctl, monkeypatch):
    waiting = {**JOB, "state": "Pending", "started": None, "cost_so_far": None,
               "pending_reason": "waiting for 1 GPU in h100", "pending_reason_text": "等待 h100 中的 1 个 GPU"}
    monkeypatch.setitem(ROUTES, ("GET", "/api/v1/jobs/"), lambda: listing(waiting))
    monkeypatch.setitem(ROUTES, ("GET", "/api/v1/jobs/7/"), lambda: httpx.Response(200, json=waiting))
    code, out, _ = gpuctl("--lang", "zh", "get", "jobs")
    assert code == 0 and out.splitlines()[1].endswith("等待 h100 中的 1 个 GPU"), out
    code, out, _ = gpuctl("--lang", "zh", "describe", "job", "7")
    assert "等待 h100 中的 1 个 GPU" in out and "waiting for" not in out


def test_the_wide_job_list_shows_a_running_jobs_cost_so_far(gpuctl):
    code, out, _ = gpuctl("get", "jobs", "-o", "wide", "--lang", "en")
    header, row = out.splitlines()
    assert code == 0 and "COST" in header and "1.20 USD" in row
