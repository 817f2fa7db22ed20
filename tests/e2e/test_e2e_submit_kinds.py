"""The Submit page's image form in the browser, a tab per kind: the Inference tab writes a service's YAML
(previewed under the form), the quote follows it with the service's rate per hour at its min and max
replicas, the advice is linked, and the option is submitted; the Notebook tab is quoted per hour."""

import re

import pytest
from playwright.sync_api import expect
from tests_e2e_helpers import login, shot

from tests.world import PASSWORDS

ROW = "#quote-table tr[data-option='a100-spot.fraction.now']"


@pytest.fixture(autouse=True)
def off_peak_far_from_now(cluster):
    """The live server prices by the wall clock: the world's off-peak window moves 10 to 12 hours away from
    it, so the rates below (the peak price) hold at any hour, as at noon."""
    from datetime import datetime, timedelta
    from zoneinfo import ZoneInfo

    from django.conf import settings

    from billing.models import PriceTable
    from billing.offpeak_sync import write_off_peak_calendars

    hour = min((datetime.now(ZoneInfo(settings.TIME_ZONE)) + timedelta(hours=12)).hour, 22)
    PriceTable.objects.update(offpeak_windows=f"{hour:02d}:00-{hour + 1:02d}:00")
    write_off_peak_calendars()  # a bulk update sends no save signal


def open_image_form(page, server, user="alice"):
    login(page, server, user, PASSWORDS[user])
    page.goto(f"{server.url}/submit/")
    expect(page.locator(".cm-editor")).to_be_visible()
    page.click("#spec-tabs [data-tab='image']")


@pytest.mark.django_db(transaction=True)
def test_the_inference_tab_writes_a_service_and_its_quote_follows(live_daphne, cluster, page):
    open_image_form(page, live_daphne)
    expect(page.locator("#advice-link")).to_be_hidden()
    page.click("#kind-tabs [data-kind='inference']")
    expect(page.locator("#inference-form")).to_be_visible()
    expect(page.locator("#image-form")).to_be_hidden()
    expect(page.locator("#advice-link")).to_be_visible()
    # a vLLM server needs its model: the error names the tab's field
    expect(page.locator("#spec-errors li[data-field='modelPath']")).to_contain_text("model is required")
    expect(page.locator("#inference-form [data-field='port']")).to_be_hidden()  # vLLM has its own

    form = page.locator("#inference-form")
    form.locator("[data-field='modelPath']").fill("/models/llama-3-8b")
    form.locator("[data-field='sharing']").select_option("fraction")
    form.locator("[data-field='gpus']").fill("0.5")
    form.locator("[data-field='gpuMemory']").fill("20Gi")
    form.locator("[data-field='minReplicas']").fill("0")
    form.locator("[data-field='maxReplicas']").fill("3")
    form.locator("[data-field='nodePool']").select_option("a100-spot")
    preview = page.locator("#form-yaml-preview")
    expect(preview).to_contain_text("kind: inference")
    expect(preview).to_contain_text("nodePool: a100-spot")
    expect(preview).to_contain_text("model: {path: /models/llama-3-8b}")
    expect(preview).to_contain_text("replicas: {min: 0, max: 3}")
    expect(page.locator("#spec-errors li")).to_have_count(0)
    # a replica: 0.5 A100 (0.90) + 1 CPU (0.02) + 4 GiB (0.02) = 0.94 / h, spot 60 % off = 0.376 / h
    row = page.locator(ROW)
    expect(row.locator(".rate")).to_contain_text("$0.00 per hour at 0 replicas, $0.376 at 1 replica, $1.128 at 3; for ")
    expect(row.locator(".total")).to_contain_text("$0.00")  # nothing at its minimum of 0
    shot(page, "submit-inference-tab")

    form.locator("[data-field='maxReplicas']").fill("5")
    expect(row.locator(".rate")).to_contain_text("$0.00 per hour at 0 replicas, $0.376 at 1 replica, $1.88 at 5; for ")
    expect(preview).to_contain_text("replicas: {min: 0, max: 5}")

    # a custom server shows its port and health path
    form.locator("[data-field='server']").select_option("custom")
    expect(form.locator("[data-field='port']")).to_be_visible()
    expect(page.locator("#spec-errors li[data-field='port']")).to_contain_text("port is required")
    form.locator("[data-field='server']").select_option("vllm")
    expect(page.locator("#spec-errors li")).to_have_count(0)
    expect(row.locator(".rate")).to_contain_text("$0.00 per hour at 0 replicas, $0.376 at 1 replica, $1.88 at 5; for ")

    page.click("#spec-tabs [data-tab='yaml']")
    expect(page.locator(".cm-content")).to_contain_text("kind: inference")
    page.locator(ROW).locator("button.submit-option").click()
    page.wait_for_url(re.compile(r".*/jobs/\d+/$"))
    from scheduling.models import Job

    job = Job.objects.get(pk=int(page.url.rstrip("/").rsplit("/", 1)[1]))
    assert (job.kind, job.name, job.quote["id"]) == ("inference", "llama-3-8b", "a100-spot.fraction.now")
    assert job.quote["price_per_hour_max"] == "1.8800"


@pytest.mark.django_db(transaction=True)
def test_the_notebook_tab_is_quoted_per_hour_and_follows_the_yaml(live_daphne, cluster, page):
    open_image_form(page, live_daphne)
    page.click("#kind-tabs [data-kind='notebook']")
    form = page.locator("#notebook-form")
    expect(form.locator("[data-field='gpus']")).to_have_value("0.5")
    form.locator("[data-field='gpuMemory']").fill("10Gi")
    form.locator("[data-field='nodePool']").select_option("a100-spot")
    preview = page.locator("#form-yaml-preview")
    expect(preview).to_contain_text("kind: notebook")
    expect(preview).to_contain_text("nodePool: a100-spot")
    expect(preview).to_contain_text("gpuMemory: 10Gi")
    expect(page.locator("#duration-hours")).to_have_value("1")   # quoted for one hour: its price per hour
    expect(page.locator("#quote-table tbody tr")).to_have_count(2)  # the pool's fraction and whole GPU
    row = page.locator(ROW)
    expect(row.locator(".rate")).to_have_text("$0.376 per hour")
    expect(row.locator(".total")).to_contain_text("$0.38")
    shot(page, "submit-notebook-tab")

    # edited as YAML, the tab follows; a training spec takes the training tab back
    page.click("#spec-tabs [data-tab='yaml']")
    text = page.input_value("#spec-yaml-source")
    page.fill("#spec-yaml", text.replace("home: {size: 10Gi}", "home: {size: 30Gi}"))
    expect(page.locator("#notebook-form [data-field='homeSize']")).to_have_value("30Gi")
    page.click("[data-example='single']")
    expect(page.locator("#image-form [data-field='gpus']")).to_have_value("1")
    page.click("#spec-tabs [data-tab='image']")
    expect(page.locator("#kind-tabs [data-kind='training']")).to_have_attribute("aria-selected", "true")
    expect(page.locator("#image-form")).to_be_visible()


@pytest.mark.django_db(transaction=True)
def test_the_advice_is_reached_from_the_inference_tab(live_daphne, cluster, page):
    open_image_form(page, live_daphne)
    page.click("#kind-tabs [data-kind='inference']")
    page.click("#advice-link")
    page.wait_for_url(f"{live_daphne.url}/advice/inference/")
    page.fill("#id_params_b", "7")
    page.fill("#id_context", "4096")
    page.click("#advise")
    expect(page.locator("#need-gib")).to_have_text("16.2")
    expect(page.locator("#advice-pools tr[data-pool='h100-mig'] .mig")).to_have_text("2g.20gb")
    expect(page.locator("#advice-pools tr[data-pool='h100'] .fraction")).to_have_text("0.21 GPU")
    shot(page, "advice-inference")
    page.set_viewport_size({"width": 390, "height": 844})   # the pools' table scrolls in its card, the page does not
    wide = page.evaluate("""() => [...document.querySelectorAll('body *')].filter((e) => e.getBoundingClientRect().right > 391
        && !e.closest('.table-scroll')).map((e) => e.tagName + '#' + e.id + '.' + e.className).slice(0, 8)""")
    assert page.evaluate("document.documentElement.scrollWidth") <= 390, wide
