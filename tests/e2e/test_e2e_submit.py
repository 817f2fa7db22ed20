"""The Submit page in the browser: the editor marks errors at their line, the image form and the YAML
follow each other, the quote follows the spec and the duration, a clone is submitted, and the quote
table fits a 1280-px screen and turns into cards on a phone."""

import re
from decimal import Decimal

import pytest
from playwright.sync_api import expect
from tests_e2e_helpers import login, shot

from tests.world import PASSWORDS

SPEC = """name: notebook
roles:
  - name: main
    image: jupyter/base:latest
    sharing: fraction
    resources: {{gpu: {gpu}, gpuMemory: 10Gi, cpu: 4, memory: 16Gi}}
    gpuModel: A100-80GB
"""
ROW = "#quote-table tr[data-option='a100-spot.fraction.now']"


@pytest.fixture(autouse=True)
def off_peak_far_from_now(cluster):
    """The live server prices by the wall clock: the world's off-peak window moves 10 to 12 hours away from
    it, so the totals below (a few hours at the peak price) hold at any hour, as at noon."""
    from datetime import datetime, timedelta
    from zoneinfo import ZoneInfo

    from django.conf import settings

    from billing.models import PriceTable
    from billing.offpeak_sync import write_off_peak_calendars

    hour = min((datetime.now(ZoneInfo(settings.TIME_ZONE)) + timedelta(hours=12)).hour, 22)
    PriceTable.objects.update(offpeak_windows=f"{hour:02d}:00-{hour + 1:02d}:00")
    write_off_peak_calendars()  # a bulk update sends no save signal


def open_submit(page, server, user="alice", query=""):
    login(page, server, user, PASSWORDS[user])
    page.goto(f"{server.url}/submit/{query}")
    expect(page.locator(".cm-editor")).to_be_visible()  # the vendored editor replaced the textarea


def editor_text(page) -> str:
    """The editor's text, as the form would post it (the hidden textarea follows every change)."""
    return page.input_value("#spec-yaml-source")


@pytest.mark.django_db(transaction=True)
def test_live_quote_follows_the_spec_and_the_duration_and_submits_the_cheapest(live_daphne, cluster, page):
    open_submit(page, live_daphne)
    page.fill("#spec-yaml", SPEC.format(gpu=0.5))
    row = page.locator(ROW)
    # 0.5 A100 + 4 CPU + 16 GiB = 1.06/h, spot 60 % off = 0.424/h; for the assumed 2 h: 0.85, 0.425 an hour
    expect(page.locator("#quote-status")).to_contain_text("assuming 2 h")
    expect(page.locator("#quote-assumption")).to_have_text("assuming 2 h")
    expect(row.locator(".total")).to_have_text("$0.85")
    expect(row.locator(".per-hour")).to_have_text("$0.425")  # the total over the hours, as the page's total reads
    expect(row.locator(".starts")).to_have_text("now")
    expect(row.locator(".saving")).to_contain_text("%")
    page.fill("#spec-yaml", SPEC.format(gpu=0.25))
    expect(row.locator(".total")).to_have_text("$0.49")
    page.fill("#duration-hours", "3")
    expect(page.locator("#quote-assumption")).to_have_text("assuming 3 h")
    expect(row.locator(".total")).to_have_text("$0.73")  # 0.244/h x 3 h
    expect(page.locator("#quote-table tr.cheapest")).to_have_count(1)
    expect(page.locator("#quote-table tr.earliest")).to_have_count(1)
    expect(page.locator("#quote-table tr.earliest .starts")).to_have_text("now")
    shot(page, "submit-quote")

    cheapest = page.locator("#quote-table tr.cheapest")
    option_id = cheapest.get_attribute("data-option")
    total = cheapest.locator(".total").inner_text().split("\n")[0].removeprefix("$")  # the money filter's $0.73
    cheapest.locator("button.submit-option").click()
    page.wait_for_url(re.compile(r".*/jobs/\d+/$"))
    expect(page.locator("#job-state")).to_have_text("Pending")
    expect(page.locator("#job-quote")).to_contain_text(option_id)
    expect(page.locator("#job-quote")).to_contain_text(total)
    from scheduling.models import Job

    job = Job.objects.get(pk=int(page.url.rstrip("/").rsplit("/", 1)[1]))
    assert job.expected_duration_s == 3 * 3600 and job.quote["total"] == total


@pytest.mark.django_db(transaction=True)
def test_the_editor_marks_an_error_at_its_line(live_daphne, cluster, page):
    open_submit(page, live_daphne)
    page.fill("#spec-yaml", "name: x\npriority: 500\nroles:\n  - name: main\n    image: busybox\n")
    expect(page.locator("#spec-errors")).to_contain_text("line 2, col 11")
    expect(page.locator("#quote-table")).to_be_hidden()
    marked = page.locator(".cm-line", has=page.locator(".cm-lintRange-error"))
    expect(marked).to_have_count(1)
    expect(marked).to_have_text("priority: 500")
    # the gutter's marker stands on the second line
    marker = page.locator(".cm-gutter-lint .cm-gutterElement", has=page.locator(".cm-lint-marker-error"))
    expect(marker).to_have_count(1)
    line_two = page.locator(".cm-lineNumbers .cm-gutterElement", has_text=re.compile(r"^2$"))
    assert abs(marker.bounding_box()["y"] - line_two.bounding_box()["y"]) < 2

    # A YAML syntax error reads as a sentence, not the parser's dump, and is marked where it is.
    page.fill("#spec-yaml", "name: x\nroles:\n  - name: main\n   image: busybox\n")
    expect(page.locator("#spec-errors")).to_contain_text("line 4, col 4: YAML syntax: this line's indentation")
    expect(page.locator("#spec-errors")).not_to_contain_text("<block")
    expect(page.locator(".cm-line", has=page.locator(".cm-lintRange-error"))).to_have_text("   image: busybox")
    shot(page, "submit-error-marker")
    page.locator("#spec-errors a.error-at").click()  # puts the cursor on the error
    expect(page.locator(".cm-activeLine")).to_have_text("   image: busybox")


@pytest.mark.django_db(transaction=True)
def test_the_image_form_and_the_yaml_follow_each_other(live_daphne, cluster, page):
    open_submit(page, live_daphne)
    page.click("#spec-tabs [data-tab='image']")
    page.fill("#image-form [data-field='image']", "registry.io/team/train:1.0")
    page.fill("#image-form [data-field='gpus']", "2")
    expect(page.locator(".cm-content")).to_contain_text("image: registry.io/team/train:1.0", timeout=15000)
    expect(page.locator("#quote-table tbody tr").first).to_be_visible()
    assert "gpu: 2" in editor_text(page) and "expectedDuration: 2h" in editor_text(page)
    shot(page, "submit-image-form")

    page.click("#spec-tabs [data-tab='yaml']")
    page.fill("#spec-yaml", editor_text(page).replace("gpu: 2", "gpu: 4").replace("train:1.0", "train:2.0"))
    expect(page.locator("#image-form [data-field='gpus']")).to_have_value("4")
    expect(page.locator("#image-form [data-field='image']")).to_have_value("registry.io/team/train:2.0")


@pytest.mark.django_db(transaction=True)
def test_examples_are_the_workspaces_and_quote_as_they_are(live_daphne, cluster, page):
    open_submit(page, live_daphne, user="bob")
    page.click("[data-example='single']")
    expect(page.locator(".cm-content")).to_contain_text("queue: nlp-group")
    expect(page.locator("#quote-table tbody tr").first).to_be_visible()
    page.click("[data-example='clean']")
    expect(page.locator(".cm-content")).to_contain_text('env: {EPOCHS: "3"}')  # not &quot;
    expect(page.locator("#quote-table tbody tr").first).to_be_visible()
    expect(page.locator("#spec-errors li")).to_have_count(0)


@pytest.mark.django_db(transaction=True)
def test_a_clone_is_submitted(live_daphne, cluster, page):
    from billing.services import submit_quoted_job
    from scheduling.models import Job

    spec = SPEC.format(gpu=0.5).replace("name: notebook", "name: first-run")
    original = submit_quoted_job(user=cluster.alice, workspace=cluster.vision, spec=spec, duration_hours=Decimal(3))
    login(page, live_daphne, "alice", PASSWORDS["alice"])
    page.goto(f"{live_daphne.url}/jobs/{original.pk}/")
    page.click("#clone-job")  # the job page's "Clone and edit"
    page.wait_for_url(f"{live_daphne.url}/submit/?from={original.pk}")
    expect(page.locator(".cm-editor")).to_be_visible()
    expect(page.locator("#clone-note")).to_contain_text("first-run")
    expect(page.locator("#submit-workspace")).to_have_text("Vision Lab")
    expect(page.locator("#duration-hours")).to_have_value("3")
    assert editor_text(page) == spec
    expect(page.locator("#quote-assumption")).to_have_text("assuming 3 h")

    page.fill("#spec-yaml", spec.replace("name: first-run", "name: second-run"))
    expect(page.locator("#image-form [data-field='name']")).to_have_value("second-run")
    page.locator(ROW).locator("button.submit-option").click()
    page.wait_for_url(re.compile(r".*/jobs/\d+/$"))
    clone = Job.objects.exclude(pk=original.pk).get()
    assert (clone.name, clone.workspace, clone.quote["id"]) == ("second-run", cluster.vision, "a100-spot.fraction.now")
    assert clone.spec_text == spec.replace("first-run", "second-run") and clone.expected_duration_s == 3 * 3600
    expect(page.locator("#job-state")).to_have_text("Pending")


def _layout(page) -> dict:
    return page.evaluate("""() => {
        const table = document.getElementById('quote-table');
        const card = document.getElementById('quote-panel');
        const chips = [...table.querySelectorAll('.chip')];
        return {
            pageWidth: document.documentElement.scrollWidth,
            viewport: window.innerWidth,
            tableRight: table.getBoundingClientRect().right,
            cardRight: card.getBoundingClientRect().right,
            wrappedChips: chips.filter((c) => c.getClientRects().length !== 1
                || c.getBoundingClientRect().height > 1.8 * parseFloat(getComputedStyle(c).fontSize)).length,
            chips: chips.length,
            // a row's trade-off names on more than one line
            wrappedRows: [...table.querySelectorAll('.tradeoffs summary')].filter((s) => {
                const tops = new Set([...s.querySelectorAll('.chip')].map((c) => Math.round(c.getBoundingClientRect().top)));
                return tops.size > 1;
            }).length,
            rowDisplay: getComputedStyle(table.querySelector('tbody tr')).display,
            headVisible: table.querySelector('thead').getBoundingClientRect().height > 2,
            labels: [...table.querySelector('tbody tr').querySelectorAll('td[data-label]')].map(
                (td) => getComputedStyle(td, '::before').content),
        };
    }""")


# Every kind of option: whole, fraction, MIG, time-sliced, spot, AMD, off-peak, with a replica range.
EVERY_KIND = """name: sweep
roles:
  - name: main
    image: busybox
    replicas: {min: 1, max: 2}
    sharing: fraction
    resources: {gpu: 0.25, gpuMemory: 8Gi}
    vendor: any
"""


@pytest.mark.django_db(transaction=True)
def test_the_quote_table_at_1280_px_and_at_390_px(live_daphne, cluster, page):
    open_submit(page, live_daphne)
    page.fill("#spec-yaml", EVERY_KIND)
    expect(page.locator("#quote-table tr[data-option='l40s-shared.timeslice.now']")).to_be_visible()
    expect(page.locator("#quote-table tr[data-option='mi300x.fraction.now']")).to_be_visible()
    wide = _layout(page)
    shot(page, "submit-quote-every-kind-1280")
    assert wide["pageWidth"] <= 1280 and wide["tableRight"] <= wide["cardRight"], wide
    assert wide["chips"] > 0 and wide["wrappedChips"] == 0 and wide["wrappedRows"] == 0, wide
    assert wide["rowDisplay"] == "table-row" and wide["headVisible"], wide
    shot(page, "submit-quote-every-kind-1280")

    page.click("[data-example='clean']")  # pytorch with replicas 1-4, trade-offs on every row
    expect(page.locator(".cm-content")).to_contain_text("bert-finetune")
    expect(page.locator("#quote-table tr[data-option='a100-spot.fraction.now']")).to_be_visible()
    wide = _layout(page)
    assert wide["pageWidth"] <= 1280 and wide["tableRight"] <= wide["cardRight"], wide
    assert wide["chips"] > 0 and wide["wrappedChips"] == 0 and wide["wrappedRows"] == 0, wide
    shot(page, "submit-quote-1280")

    page.set_viewport_size({"width": 390, "height": 844})
    phone = _layout(page)
    assert phone["pageWidth"] <= 390 and phone["tableRight"] <= phone["cardRight"], phone
    assert phone["rowDisplay"] == "block" and not phone["headVisible"], phone
    assert '"Starts"' in phone["labels"] and '"Total"' in phone["labels"], phone
    assert phone["wrappedChips"] == 0, phone
    shot(page, "submit-quote-390")


@pytest.mark.django_db(transaction=True)
def test_without_javascript_the_page_is_a_plain_form(live_daphne, cluster, browser):
    context = browser.new_context(java_script_enabled=False, viewport={"width": 1280, "height": 900})
    page = context.new_page()
    try:
        login(page, live_daphne, "alice", PASSWORDS["alice"])
        page.goto(f"{live_daphne.url}/submit/")
        expect(page.locator("textarea#spec-yaml")).to_be_visible()
        page.fill("textarea#spec-yaml", SPEC.format(gpu=0.5))
        page.fill("#duration-hours", "3")
        page.click("#quote-button")
        row = page.locator(ROW)
        expect(row.locator(".total")).to_have_text("$1.27")  # 0.424/h x 3 h
        expect(page.locator("#quote-assumption")).to_have_text("assuming 3 h")
        row.locator("button.submit-option").click()
        page.wait_for_url(re.compile(r".*/jobs/\d+/$"))
        expect(page.locator("#job-quote")).to_contain_text("a100-spot.fraction.now")
    finally:
        context.close()
