"""A tenant deploys a model service from the Submit page's Inference tab, calls its endpoint with a token as
`curl` would, and watches its page: the replicas, request rate and requests answered move live."""

import re
import threading

import httpx
import pytest
from playwright.sync_api import expect
from tests_e2e_helpers import login, shot

from tests.world import PASSWORDS


@pytest.fixture(autouse=True)
def off_peak_far_from_now(cluster):
    from datetime import datetime, timedelta
    from zoneinfo import ZoneInfo

    from django.conf import settings

    from billing.models import PriceTable
    from billing.offpeak_sync import write_off_peak_calendars

    hour = min((datetime.now(ZoneInfo(settings.TIME_ZONE)) + timedelta(hours=12)).hour, 22)
    PriceTable.objects.update(offpeak_windows=f"{hour:02d}:00-{hour + 1:02d}:00")
    write_off_peak_calendars()  # a bulk update sends no save signal


@pytest.mark.django_db(transaction=True)
def test_deploy_a_service_from_the_form_call_it_and_see_its_charts_move(live_daphne, cluster, page, settings,
                                                                        scheduler_running):
    from portal.services import create_api_token
    from scheduling.models import Job

    settings.SERVICE_SCALE_INTERVAL_S = 1
    login(page, live_daphne, "alice", PASSWORDS["alice"])
    page.goto(f"{live_daphne.url}/submit/")
    page.click("#spec-tabs [data-tab='image']")
    page.click("#kind-tabs [data-kind='inference']")
    form = page.locator("#inference-form")
    form.locator("[data-field='modelPath']").fill("/models/chat")
    form.locator("[data-field='nodePool']").select_option("h100")
    form.locator("[data-field='minReplicas']").fill("1")
    form.locator("[data-field='maxReplicas']").fill("2")
    expect(page.locator("#form-yaml-preview")).to_contain_text("kind: inference")
    expect(page.locator("#spec-errors li")).to_have_count(0)
    page.locator("#quote-table tbody tr button.submit-option").first.click()
    page.wait_for_url(re.compile(r".*/jobs/\d+/$"))
    job = Job.objects.get(pk=int(page.url.rstrip("/").rsplit("/", 1)[1]))
    assert job.kind == "inference"

    page.goto(f"{live_daphne.url}/services/{job.pk}/")
    expect(page.locator("#curl-example")).to_contain_text(f"/serve/vision-lab/{job.name}/v1/completions")
    expect(page.locator("#service-state")).to_have_text("Running", timeout=30_000)

    token = create_api_token(cluster.alice, "e2e")[1]
    url = f"{live_daphne.url}/serve/vision-lab/{job.name}/v1/completions"
    stop, answers = threading.Event(), []

    def traffic():
        with httpx.Client(timeout=30) as client:
            while not stop.is_set():
                answers.append(client.post(url, json={"model": job.name, "prompt": "hi", "max_tokens": 8},
                                           headers={"Authorization": f"Bearer {token}"}).status_code)

    callers = [threading.Thread(target=traffic, daemon=True) for _ in range(3)]
    for caller in callers:
        caller.start()
    try:
        charts = page.locator("#service-charts")
        expect(charts).to_have_attribute("data-points", re.compile(r"^\d+$"))
        first = int(charts.get_attribute("data-points"))
        expect(page.locator("#stat-requests")).not_to_have_text("0", timeout=30_000)
        expect(charts).not_to_have_attribute("data-points", str(first), timeout=30_000)   # the charts moved
        expect(page.locator("#chart-rps .scatterlayer .trace")).to_have_count(1)
    finally:
        stop.set()
        for caller in callers:
            caller.join(30)
    assert answers and set(answers) == {200}
    shot(page, "service-page")
