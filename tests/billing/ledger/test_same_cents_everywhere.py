"""A month of awkward usage gives the same cents on every surface: the costs API for each group_by,
the reports page, the dashboard, the job pages summed, CSV, XLSX, the statement and the budget.

The month (UTC, the billing tests' platform zone) for vision-lab:
- job A: a whole H100 from 10:20 to 13:40 on the 2nd (thirds of an hour);
- job B: 0.33 of a spot A100 from 06:40 to 09:20 on the 10th (across the 08:00 off-peak end);
- a new price table from the 15th, 00:00: H100 at 3.30 and off-peak ending at 07:30;
- job C: a whole H100 from 23:20 on the 14th to 00:40 on the 15th (across the price change);
- job D: a whole H100 from 07:10 to 08:50 on the 20th (off-peak ends in the middle of an hour);
- finance's credit of -1.23;
- a volume holding 3 GiB (of 100 requested), sampled at three hours of the 14th and 15th (across the price
  change; standard storage at 14.60 per GiB-month, then 29.20).
nlp-group runs job E and keeps a volume in the same month: none of it may show in vision-lab's figures.
"""

import csv
import io
import re
from datetime import UTC, datetime
from decimal import Decimal

import openpyxl
import pytest
from asgiref.sync import async_to_sync

from billing.ledger.jobs import finalize_job_cost
from billing.ledger.posting import post_ledger
from billing.ledger.services import add_adjustment
from billing.metering.storage import sample_storage
from billing.models import ChargeLine, GpuRate, PriceTable, StorageRate
from billing.reports.dashboard import tenant_dashboard
from billing.reports.services import budget_status, set_budget
from billing.reports.tasks import build_excel_export, export_dir
from billing.services import submit_quoted_job
from scheduling import storage
from scheduling.models import JobState, Node, Replica

pytestmark = pytest.mark.django_db
CENT = Decimal("0.01")
GROUPS = ("day", "queue", "job", "user", "gpu_model", "pool", "workspace", "resource")
WHOLE = """name: {name}
roles:
  - name: main
    image: busybox
    resources: {{gpu: 1, cpu: 1, memory: 4Gi}}
    nodePool: h100
"""
THIRD = """name: {name}
roles:
  - name: main
    image: busybox
    resources: {{gpu: 0.33, gpuMemory: 10Gi, cpu: 1, memory: 4Gi}}
    nodePool: a100-spot
"""
RANGE = {"workspace": "vision-lab", "start": "2026-03-01", "end": "2026-03-31"}


def at(day, hour, minute=0):
    return datetime(2026, 3, day, hour, minute, tzinfo=UTC)


def run_job(user, workspace, name, start, end, *, spec=WHOLE, node="h100-01", slice_=None):
    job = submit_quoted_job(user=user, workspace=workspace, spec=spec.format(name=name))
    Replica.objects.create(job=job, role="main", index=0, state=JobState.SUCCEEDED, node=Node.objects.get(name=node),
                           gpu_indices=[0], slice=slice_ or {"kind": "whole", "gpu_milli": 1000},
                           started=start, ended=end)
    job.state, job.started, job.finished = JobState.SUCCEEDED, start, end
    job.save(update_fields=["state", "started", "finished"])
    return job


@pytest.fixture
def month(cluster, clock, settings, tmp_path):
    clock.now = at(2, 9)
    table = PriceTable.objects.create(name="March rise", currency="USD", effective_from=at(15, 0),
                                      cpu_core_hour=Decimal("0.02"), memory_gib_hour=Decimal("0.005"),
                                      offpeak_windows="00:00-07:30")
    for rate in GpuRate.objects.filter(table__name="Test prices"):
        GpuRate.objects.create(table=table, vendor=rate.vendor, gpu_model=rate.gpu_model,
                               per_gpu_hour=Decimal("3.30") if rate.gpu_model == "H100-80GB" else rate.per_gpu_hour)
    c = cluster
    jobs = [
        run_job(c.alice, c.vision, "a-thirds", at(2, 10, 20), at(2, 13, 40)),
        run_job(c.carol, c.vision, "b-third-gpu", at(10, 6, 40), at(10, 9, 20), spec=THIRD, node="a100-spot-01",
                slice_={"kind": "fraction", "gpu_milli": 330, "gpu_mem_mib": 10240}),
        run_job(c.alice, c.vision, "c-price-change", at(14, 23, 20), at(15, 0, 40)),
        run_job(c.alice, c.vision, "d-offpeak-mid-hour", at(20, 7, 10), at(20, 8, 50)),
    ]
    run_job(c.bob, c.nlp, "e-other-tenant", at(12, 1), at(12, 5), node="h100-02")
    settings.VOLUMES_DIR, settings.DATASETS_DIR = tmp_path / "volumes", tmp_path / "datasets"
    settings.SCHEDULER_BACKEND = "simulated"
    StorageRate.objects.create(table=PriceTable.objects.get(name="Test prices"), storage_class="standard",
                               per_gib_month=Decimal("14.60"))
    StorageRate.objects.create(table=table, storage_class="standard", per_gib_month=Decimal("29.20"))
    for user, workspace, size in ((c.alice, c.vision, 3 * 2**30), (c.bob, c.nlp, 5 * 2**30)):
        storage.create_volume(user, workspace, name="data", size_gib=100)
        folder = storage.volume_dir(workspace.slug, "data")
        folder.mkdir(parents=True, exist_ok=True)
        with open(folder / "blob", "wb") as blob:
            blob.truncate(size)
    for sampled in (at(14, 22, 10), at(14, 23, 59), at(15, 0, 30)):
        sample_storage(now=sampled)
    clock.now = at(31, 12)
    post_ledger(now=clock.now)
    for job in jobs:
        finalize_job_cost(job.pk)
    credit = add_adjustment(user=c.finance, workspace=c.vision, amount="-1.23", reason="goodwill for the outage")
    return jobs, credit


async def read_stream(response) -> bytes:
    return b"".join([chunk async for chunk in response.streaming_content])


def money(text: str) -> Decimal:
    return Decimal(re.sub(r"[^0-9.\-]", "", text))


def test_lines_are_what_the_hand_works_out(month):
    jobs, credit = month
    a, b, c, d = (list(ChargeLine.objects.filter(job=j).order_by("hour", "charge_start")) for j in jobs)
    # 3.04/h (H100 3.00 + 1 core 0.02 + 4 GiB 0.02): 40 min, 1 h, 1 h, 40 min
    assert [x.cost for x in a] == [Decimal("2.03"), Decimal("3.04"), Decimal("3.04"), Decimal("2.03")]
    # 0.33 GPU: a third of a GPU-hour per hour held, 2h40m in all
    assert sum(x.allocated_gpu_hours for x in b) == Decimal("0.33") * Decimal(8) / 3
    assert [x.offpeak for x in b] == [True, True, False, False]  # 06:40-07, 07-08 off-peak; 08-09, 09-09:20
    # the price change at midnight: the old table before, the new one after
    assert [x.price_table.name for x in c] == ["Test prices", "March rise"]
    assert [x.list_unit_price for x in c] == [Decimal("3.0000"), Decimal("3.3000")]
    # 07:10-07:30 off-peak and 07:30-08:00 peak on the new table: two lines in the 07:00 hour
    seven = [x for x in d if x.hour == at(20, 7)]
    assert [(x.offpeak, x.charge_start, x.charge_end) for x in seven] == [
        (True, at(20, 7, 10), at(20, 7, 30)), (False, at(20, 7, 30), at(20, 8))]
    assert credit.cost == Decimal("-1.23") and credit.category == "Credit"
    # 3 GiB an hour: 0.06 at 14.60 per GiB-month, 0.12 at 29.20 from the 15th
    stored = ChargeLine.objects.filter(workspace__slug="vision-lab", resource="storage").order_by("hour")
    assert [(x.hour, x.storage_gib_hours, x.cost) for x in stored] == [
        (at(14, 22), Decimal(3), Decimal("0.06")), (at(14, 23), Decimal(3), Decimal("0.06")),
        (at(15, 0), Decimal(3), Decimal("0.12"))]
    for line in ChargeLine.objects.all():
        assert line.cost == line.cost.quantize(CENT)
        assert not line.provisional  # every hour of the month has closed


def test_every_surface_gives_the_same_cents(month, client, cluster, clock):
    jobs, _ = month
    ledger_total = sum(ChargeLine.objects.filter(workspace=cluster.vision).values_list("cost", flat=True))
    other = sum(ChargeLine.objects.filter(workspace=cluster.nlp).values_list("cost", flat=True))
    assert ledger_total and other
    client.force_login(cluster.finance)
    surfaces = {}

    for group in GROUPS:
        body = client.get("/api/v1/costs/", {**RANGE, "group_by": group}).json()
        assert body["currency"] == "USD" and body["as_of"]
        assert re.fullmatch(r"-?\d+\.\d\d", body["total"]) and all(re.fullmatch(r"-?\d+\.\d\d", r["cost"])
                                                                    for r in body["rows"])
        assert sum(Decimal(r["cost"]) for r in body["rows"]) == Decimal(body["total"]), group
        surfaces[f"api group_by={group}"] = Decimal(body["total"])

    page = client.get("/reports/", RANGE).content.decode()
    surfaces["reports page"] = money(re.search(r'data-total="cost">([^<]+)<', page).group(1))
    assert 'id="as-of"' in page

    client.force_login(cluster.alice)
    surfaces["dashboard"] = tenant_dashboard(cluster.alice, cluster.vision, now=clock.now).totals.cost
    job_pages = Decimal(0)
    for job in jobs:
        html = client.get(f"/jobs/{job.pk}/").content.decode()
        job_pages += money(re.search(r'id="final-cost">([^<]+)<', html).group(1))
    credits = sum(ChargeLine.objects.filter(workspace=cluster.vision, job__isnull=True).values_list("cost", flat=True))
    surfaces["job pages + credit"] = job_pages + credits

    client.force_login(cluster.finance)
    response = client.get("/reports/export.csv", RANGE)
    assert response["Content-Type"] == "text/csv; charset=utf-8"
    text = async_to_sync(read_stream)(response).decode("utf-8")
    rows = list(csv.DictReader(io.StringIO(text)))
    assert all(re.fullmatch(r"-?\d+\.\d\d", r["BilledCost"]) for r in rows)
    assert {r["BillingAccountId"] for r in rows} == {"vision-lab"}
    surfaces["csv"] = sum(Decimal(r["BilledCost"]) for r in rows)

    export = client.post("/reports/exports/", RANGE, HTTP_ACCEPT="application/json").json()
    name = build_excel_export(export["id"])
    sheet = openpyxl.load_workbook(export_dir() / name, read_only=True)["Costs"]
    values = list(sheet.iter_rows(values_only=True))
    column = values[0].index("BilledCost")
    surfaces["xlsx"] = sum(Decimal(str(row[column])).quantize(CENT) for row in values[1:])

    statement = client.get("/reports/statements/vision-lab/2026-03/").content.decode()
    surfaces["statement"] = money(re.search(r'id="statement-total">([^<]+)<', statement).group(1))
    statement_csv = client.get("/reports/statements/vision-lab/2026-03/statement.csv").content.decode()
    surfaces["statement csv"] = sum(Decimal(r["BilledCost"]) for r in csv.DictReader(io.StringIO(statement_csv)))

    set_budget(user=cluster.finance, workspace=cluster.vision, amount="1000")
    surfaces["budget"] = budget_status(cluster.vision, now=clock.now).spent

    assert set(surfaces.values()) == {ledger_total}, surfaces
