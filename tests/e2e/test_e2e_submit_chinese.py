"""The Submit page in Chinese for a workspace billed in CNY: bob (nlp-group, billed in yuan on a table
that prices only the H100) picks 简体中文 in the header, quotes a spec and reads it in yuan with
Chinese words, written by submit.js from the page's words and the API's *_text; the pools his table
does not price are not offered and say why; he submits and reads the job page in Chinese."""

import re
from datetime import datetime, timedelta
from decimal import Decimal
from zoneinfo import ZoneInfo

import pytest
from playwright.sync_api import expect
from tests_e2e_helpers import login, shot

from billing.currency import set_workspace_currency
from billing.models import PriceTable
from scheduling.models import Job
from tests.factories import GpuRateFactory, PriceTableFactory
from tests.world import PASSWORDS

SPEC = """name: yuan-train
roles:
  - name: main
    image: busybox
    resources: {gpu: 1, cpu: 1, memory: 4Gi}
"""
NOW_ROW = "#quote-table tr[data-option='h100.exclusive.now']"
OFF_PEAK_ROW = "#quote-table tr[data-option='h100.exclusive.off-peak']"


def far_from_now(zone: str) -> str:
    """A one-hour window 10 to 12 hours from the wall clock (the live server prices by it), so the totals
    below are the peak price at any hour, as in test_e2e_submit's off-peak fixture."""
    hour = min((datetime.now(ZoneInfo(zone)) + timedelta(hours=12)).hour, 22)
    return f"{hour:02d}:00-{hour + 1:02d}:00"


@pytest.fixture
def yuan_workspace(cluster):
    """nlp-group billed in CNY from its first month on a table that prices the H100 only; its 谷电
    window in Asia/Shanghai."""
    PriceTable.objects.update(offpeak_windows=far_from_now("UTC"))
    table = PriceTableFactory(name="人民币价目表", currency="CNY", cpu_core_hour=Decimal("0.15"),
                              memory_gib_hour=Decimal("0.036"), offpeak_windows=far_from_now("Asia/Shanghai"),
                              offpeak_time_zone="Asia/Shanghai", offpeak_discount=Decimal("0.50"))
    GpuRateFactory(table=table, vendor="nvidia", gpu_model="H100-80GB", per_gpu_hour=Decimal("21.60"))
    set_workspace_currency(cluster.nlp, "CNY")
    return cluster.nlp


@pytest.mark.django_db(transaction=True)
def test_a_cny_workspace_quotes_and_submits_in_chinese(live_daphne, cluster, yuan_workspace, browser):
    context = browser.new_context(locale="en-US", viewport={"width": 1280, "height": 900})
    page = context.new_page()
    try:
        login(page, live_daphne, "bob", PASSWORDS["bob"])
        expect(page.locator("h1")).to_have_text("Dashboard")
        page.wait_for_load_state("load", timeout=60_000)   # the switcher's script runs after the others load
        page.select_option("#language-select", "zh-hans")
        expect(page.locator("h1")).to_have_text("仪表盘")

        page.goto(f"{live_daphne.url}/submit/")
        expect(page.locator("html")).to_have_attribute("lang", "zh-hans")
        expect(page.locator("h1")).to_have_text("提交作业")
        expect(page.locator(".cm-editor")).to_be_visible()  # submit.js runs
        page.fill("#spec-yaml", SPEC)

        row = page.locator(NOW_ROW)
        # 21.60 + 1 CPU x 0.15 + 4 GiB x 0.036 = 21.894 yuan an hour; the assumed 2 h: 43.788, rounded once
        expect(row.locator(".total")).to_have_text("¥43.79")
        expect(row.locator(".starts")).to_have_text("现在")
        expect(row.locator("button.submit-option")).to_have_text("提交")
        expect(row.locator(".option .badge.flag-earliest")).to_have_text("最早")
        expect(page.locator("#quote-status")).to_have_text("2 个选项，按 2 小时计，币种 CNY。")
        expect(page.locator("#quote-assumption")).to_have_text("按 2 小时计")
        expect(row.locator("td.total")).to_have_attribute("data-label", "合计")
        off_peak = page.locator(OFF_PEAK_ROW)
        expect(off_peak.locator(".badge.offpeak")).to_have_text("谷时")
        expect(off_peak.locator(".tradeoffs li")).to_contain_text(re.compile(r"^等待 .*谷时窗口开始$"))
        # the pools the CNY table does not price are not offered, and say why in Chinese
        expect(page.locator("#quote-unavailable summary")).to_have_text("不提供（5）")
        expect(page.locator("#quote-unavailable")).to_contain_text("rtx4090: CNY 价目表没有 nvidia RTX-4090-24GB 的价格")
        expect(page.locator("#quote-table tr[data-option^='rtx4090']")).to_have_count(0)
        expect(page.locator("#quote-table tr[data-option^='a100-spot']")).to_have_count(0)
        visible = page.locator("#quote-panel").inner_text()
        assert not re.search(r"\b(option|assuming|Total|Starts|now|Submit|Not offered|up to)\b", visible), visible
        shot(page, "submit-chinese-cny")

        row.locator("button.submit-option").click()
        page.wait_for_url(re.compile(r".*/jobs/\d+/$"))
        expect(page.locator("html")).to_have_attribute("lang", "zh-hans")
        quote = page.locator("#job-quote")
        expect(quote.locator("h2")).to_have_text("提交时的报价")
        expect(quote).to_contain_text("¥21.894/h")
        expect(quote).to_contain_text("预计 ¥43.79–¥43.79，共 2.00 小时。")
        expect(page.locator("#job-detail")).to_contain_text("状态：")
        job = Job.objects.get(pk=int(page.url.rstrip("/").rsplit("/", 1)[1]))
        assert (job.workspace, job.quote["pool"], job.quote["currency"], job.quote["total"]) == (
            yuan_workspace, "h100", "CNY", "43.79")
    finally:
        context.close()
