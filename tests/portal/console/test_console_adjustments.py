"""The console's adjustments page: operators only; a credit or debit against a job or a billing month is
shown for confirmation, then booked as a ledger line of its own with its author and an audit entry; bad
input is a 400 with the error beside its field and books nothing."""

from datetime import UTC, date, datetime, timedelta
from decimal import Decimal

import pytest

from billing.ledger.services import close_period
from billing.models import ChargeLine
from portal.console.models import AuditEntry

pytestmark = pytest.mark.django_db
URL = "/console/adjustments/"
NOON = datetime(2026, 3, 10, 12, tzinfo=UTC)


def form(**values):
    data = {"workspace": "vision-lab", "kind": "credit", "amount": "12.50", "applies_to": "period",
            "period": "2026-03", "job": "", "reason": "GPU h100-01 was throttled"}
    data.update(values)
    return data


@pytest.fixture
def march(clock, cluster):
    clock.now = NOON
    return clock


def test_operators_only(client, cluster, march):
    assert client.get(URL).status_code == 302  # anonymous: to the login page
    client.force_login(cluster.finance)  # finance adjusts on its statements, not in the console
    assert client.get(URL).status_code == 403
    assert client.post(URL, form(confirm="1")).status_code == 403
    assert not ChargeLine.objects.exists()


def test_review_then_confirm_books_a_credit_in_the_month(admin_client, march):
    review = admin_client.post(URL, form())
    page = review.content.decode()
    assert review.status_code == 200 and 'id="confirm-adjustment"' in page
    assert "-$12.50" in page and "March 2026" in page and "GPU h100-01 was throttled" in page
    assert not ChargeLine.objects.exists()  # nothing is booked before the confirmation

    done = admin_client.post(URL, form(confirm="1"), follow=True)
    line = ChargeLine.objects.get()
    assert (line.category, line.cost, line.period, line.job, line.author.username, line.reason) == (
        "Credit", Decimal("-12.50"), date(2026, 3, 1), None, "admin", "GPU h100-01 was throttled")
    assert "Credit of -$12.50 recorded for vision-lab (March 2026)." in done.content.decode()
    assert f'data-adjustment="{line.pk}"' in done.content.decode()  # listed among the latest
    entry = AuditEntry.objects.get(action="adjust")
    assert entry.username == "admin" and entry.target_id == str(line.pk) and "throttled" in entry.message


def test_edit_goes_back_to_the_filled_form(admin_client, march):
    back = admin_client.post(URL, form(edit="1"))
    assert back.status_code == 200 and 'id="adjustment-form"' in back.content.decode()
    assert 'value="12.50"' in back.content.decode()
    assert not ChargeLine.objects.exists()


def test_a_debit_against_a_job_is_part_of_its_cost(admin_client, march, cluster, submit):
    job = submit(cluster, "finetune")
    ChargeLine.objects.create(hour=NOON, day=NOON.date(), period=date(2026, 3, 1), charge_start=NOON,
                              charge_end=NOON + timedelta(hours=1), workspace=cluster.vision, job=job,
                              job_name=job.name, cost=Decimal("3.00"), currency="USD", provisional=False,
                              computed_at=NOON)
    type(job).objects.filter(pk=job.pk).update(final_cost=Decimal("3.00"), currency="USD")
    response = admin_client.post(URL, form(kind="debit", amount="1.25", applies_to="job", job=str(job.pk),
                                           period="", confirm="1"))
    assert response.status_code == 302
    line = ChargeLine.objects.get(category="Adjustment")
    assert (line.job, line.job_name, line.queue, line.cost, line.period) == (
        job, "finetune", "vision-lab", Decimal("1.25"), date(2026, 3, 1))
    job.refresh_from_db()
    assert job.final_cost == Decimal("4.25")  # a job's cost is the sum of its lines


def test_an_earlier_open_month_takes_the_line_at_its_end(admin_client, march):
    assert admin_client.post(URL, form(period="2026-02", confirm="1")).status_code == 302
    line = ChargeLine.objects.get()
    assert (line.period, line.day) == (date(2026, 2, 1), date(2026, 2, 28))


@pytest.mark.parametrize(("values", "field", "message"), [
    ({"amount": "0"}, "amount", "greater than or equal to 0.0001"),
    ({"amount": "-5"}, "amount", "greater than or equal to"),
    ({"amount": "1000000000000"}, "amount", "less than or equal to"),
    ({"amount": "12.345"}, "amount", "at most 2 decimal places"),
    ({"amount": "abc"}, "amount", "Enter a number"),
    ({"reason": "   "}, "reason", "This field is required"),
    ({"reason": "x" * 501}, "reason", "at most 500 characters"),
    ({"workspace": "nope"}, "workspace", "no such workspace"),
    ({"kind": "gift"}, "kind", "Select a valid choice"),
    ({"applies_to": "job", "job": ""}, "job", "name the job"),
    ({"applies_to": "job", "job": "999999"}, "job", "is not a job of vision-lab"),
    ({"period": "2026-13"}, "period", "YYYY-MM"),
    ({"period": "March"}, "period", "YYYY-MM"),
    ({"period": "2026-04"}, "period", "2026-04 has not started"),
])
def test_bad_input_is_refused_beside_its_field(admin_client, march, values, field, message):
    response = admin_client.post(URL, form(confirm="1", **values))
    page = response.content.decode()
    assert response.status_code == 400, page[-2000:]
    errors = page.split(f'data-field="{field}"', 1)
    assert len(errors) == 2 and message in errors[1].split("</ul>", 1)[0], page[-3000:]
    assert not ChargeLine.objects.exists() and not AuditEntry.objects.filter(action="adjust").exists()


def test_another_workspaces_job_is_refused(admin_client, march, cluster, submit):
    theirs = submit(cluster, "bob-job", workspace="nlp", queue="nlp-group")
    response = admin_client.post(URL, form(applies_to="job", job=str(theirs.pk), confirm="1"))
    assert response.status_code == 400 and f"#{theirs.pk} is not a job of vision-lab" in response.content.decode()
    assert not ChargeLine.objects.exists()


def test_a_closed_month_takes_no_adjustment(admin_client, march, cluster):
    march.now = datetime(2026, 4, 2, 12, tzinfo=UTC)
    close_period(user=cluster.finance, workspace=cluster.vision, month=date(2026, 3, 1))
    response = admin_client.post(URL, form(confirm="1"))
    assert response.status_code == 400 and "2026-03 is closed for vision-lab" in response.content.decode()
    assert not ChargeLine.objects.filter(category="Credit").exists()


def test_a_month_closed_between_review_and_confirmation_is_refused_beside_the_period(admin_client, march, cluster,
                                                                                      monkeypatch):
    from portal.console import adjustments

    # the form's own check passes; the service finds the month closed (another operator was quicker)
    monkeypatch.setattr(adjustments.AdjustmentForm, "_clean_period",
                        lambda self, workspace, data: data.update(job_obj=None))
    march.now = datetime(2026, 4, 2, 12, tzinfo=UTC)
    close_period(user=cluster.finance, workspace=cluster.vision, month=date(2026, 3, 1))
    response = admin_client.post(URL, form(confirm="1"))
    page = response.content.decode()
    assert response.status_code == 400 and "2026-03 is closed for vision-lab" in page.split('data-field="period"')[1]
    assert not ChargeLine.objects.filter(category="Credit").exists()
