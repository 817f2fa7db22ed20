"""Storage billed by use: each hour of platform time the bytes a volume (or dataset version) holds are
sampled, and the ledger bills the used GiB-hours at the storage class's price per GiB-month (730 hours
to a month), never the size requested. Storage lines reach the costs API, the FOCUS export, budgets and
statements as every other line does; another tenant sees none of them."""

import csv
import io
import re
from datetime import UTC, date, datetime
from decimal import Decimal

import pytest
from asgiref.sync import async_to_sync

from billing.ledger.posting import post_ledger
from billing.metering.storage import sample_storage
from billing.models import ChargeLine, PriceTable, StorageRate, StorageSample, WorkspaceCurrency
from billing.pricing import PricedStorage, PricedWorkspace, PriceWindow, fold_storage, storage_cost
from billing.reports.exports import HEADER, line_rows
from billing.reports.services import budget_status, set_budget
from scheduling import storage
from tests.world import world_price_table, world_rates

pytestmark = pytest.mark.django_db
GIB = 2**30
CENT = Decimal("0.01")
STANDARD = Decimal("14.60")  # per GiB-month: 0.02 per GiB-hour
RANGE = {"workspace": "vision-lab", "start": "2026-03-01", "end": "2026-03-31"}


def at(day, hour, minute=0):
    return datetime(2026, 3, day, hour, minute, tzinfo=UTC)


@pytest.fixture
def folders(settings, tmp_path):
    settings.VOLUMES_DIR, settings.DATASETS_DIR = tmp_path / "volumes", tmp_path / "datasets"
    settings.SCHEDULER_BACKEND = "simulated"


@pytest.fixture
def priced(cluster, folders):
    StorageRate.objects.create(table=PriceTable.objects.get(name="Test prices"), storage_class="standard",
                               per_gib_month=STANDARD)


def volume_with(cluster, name: str, size_bytes: int, *, workspace=None, user=None, size_gib=100):
    """A volume of `size_gib` requested that holds one file of `size_bytes` (sparse: nothing is written)."""
    workspace, user = workspace or cluster.vision, user or cluster.alice
    volume = storage.create_volume(user, workspace, name=name, size_gib=size_gib)
    folder = storage.volume_dir(workspace.slug, name)
    folder.mkdir(parents=True, exist_ok=True)
    if size_bytes:
        with open(folder / "weights.bin", "wb") as file:
            file.truncate(size_bytes)
    return volume


def storage_lines(workspace=None):
    lines = ChargeLine.objects.filter(resource=ChargeLine.Resource.STORAGE).order_by("hour", "charge_start")
    return list(lines.filter(workspace=workspace) if workspace is not None else lines)


def test_an_hour_of_a_volume_is_billed_on_its_used_gib_hours_not_its_requested_size(cluster, priced, clock):
    clock.now = at(2, 10, 5)
    volume_with(cluster, "weights", 3 * GIB // 2)  # 1.5 GiB used of 100 requested
    assert sample_storage(now=clock.now) == 1
    post_ledger(now=at(2, 12))

    [line] = storage_lines(cluster.vision)
    assert line.hour == at(2, 10) and (line.charge_start, line.charge_end) == (at(2, 10), at(2, 11))
    assert line.storage_gib_hours == Decimal("1.5")
    assert line.cost == Decimal("0.03")  # 1.5 GiB-hours x 14.60 / 730
    assert line.cost != (100 * STANDARD / 730).quantize(CENT)  # what the requested size would cost: 2.00
    assert (line.category, line.job, line.sku_id, line.resource_name) == ("Usage", None, "storage/standard",
                                                                          "volume/weights")
    assert line.list_unit_price == STANDARD and line.currency == "USD" and not line.provisional


def test_used_bytes_count_the_volumes_own_files_not_what_a_link_points_to(cluster, folders, tmp_path):
    volume_with(cluster, "mixed", 1000)
    folder = storage.volume_dir("vision-lab", "mixed")
    (folder / "nested" / "deeper").mkdir(parents=True)
    (folder / "nested" / "deeper" / "part").write_bytes(b"x" * 24)
    outside = tmp_path / "outside.bin"
    outside.write_bytes(b"y" * 5000)
    (folder / "link").symlink_to(outside)
    (folder / "dir-link").symlink_to(tmp_path, target_is_directory=True)
    assert storage.folder_used_bytes(folder) == 1024
    assert storage.folder_used_bytes(tmp_path / "no-such-volume") == 0


def test_a_volume_is_sampled_once_an_hour_and_an_hour_without_a_sample_is_not_billed(cluster, priced, clock):
    volume_with(cluster, "weights", GIB)
    assert sample_storage(now=at(2, 10, 5)) == 1
    with open(storage.volume_dir("vision-lab", "weights") / "more.bin", "wb") as file:
        file.truncate(9 * GIB)
    assert sample_storage(now=at(2, 10, 50)) == 0  # the hour keeps its first reading
    assert sample_storage(now=at(2, 12, 1)) == 1  # 11:00 went unsampled (the platform was down)
    post_ledger(now=at(2, 14))
    assert [(x.hour, x.storage_gib_hours, x.cost) for x in storage_lines()] == [
        (at(2, 10), Decimal(1), Decimal("0.02")), (at(2, 12), Decimal(10), Decimal("0.20"))]


def test_a_volume_created_after_the_hours_sampling_is_sampled_in_that_hour(cluster, priced, clock):
    volume_with(cluster, "first", GIB)
    assert sample_storage(now=at(2, 10, 5)) == 1
    volume_with(cluster, "second", 2 * GIB)
    assert sample_storage(now=at(2, 10, 40)) == 1  # only the new one; the first keeps its reading
    assert sample_storage(now=at(2, 10, 50)) == 0
    assert sorted(StorageSample.objects.values_list("name", "used_bytes", "ts")) == [
        ("first", GIB, at(2, 10, 5)), ("second", 2 * GIB, at(2, 10, 40))]


def test_the_open_hour_is_billed_up_to_now_and_provisional(cluster, priced, clock):
    volume_with(cluster, "weights", 3 * GIB)
    sample_storage(now=at(2, 10, 0))
    post_ledger(now=at(2, 10, 30))
    [line] = storage_lines()
    assert line.provisional and line.storage_gib_hours == Decimal("1.5") and line.cost == Decimal("0.03")
    post_ledger(now=at(2, 11, 30))  # the hour closed: the whole hour, once
    [line] = storage_lines()
    assert not line.provisional and line.storage_gib_hours == Decimal(3) and line.cost == Decimal("0.06")


def test_an_empty_volume_costs_nothing(cluster, priced, clock, client):
    volume_with(cluster, "empty", 0, size_gib=500)
    sample_storage(now=at(2, 10, 5))
    assert StorageSample.objects.get().used_bytes == 0
    post_ledger(now=at(2, 12))
    assert storage_lines() == []
    client.force_login(cluster.alice)
    body = client.get("/api/v1/costs/", {**RANGE, "group_by": "resource"}).json()
    assert body["total"] == "0.00" and body["rows"] == []


def test_dataset_versions_are_billed_as_standard_storage(cluster, priced, clock):
    volume_with(cluster, "imagenet", 2 * GIB)
    storage.snapshot(cluster.alice, cluster.vision, "imagenet")
    sample_storage(now=at(2, 10, 5))
    post_ledger(now=at(2, 12))
    assert sorted((x.resource_name, x.storage_gib_hours, x.cost) for x in storage_lines()) == [
        ("dataset/imagenet@v1", Decimal(2), Decimal("0.04")), ("volume/imagenet", Decimal(2), Decimal("0.04"))]


def test_a_storage_class_without_a_price_is_not_billed(cluster, priced, clock):
    volume = volume_with(cluster, "fast", GIB)
    volume.storage_class = "premium-nvme"
    volume.save(update_fields=["storage_class"])
    sample_storage(now=at(2, 10, 5))
    post_ledger(now=at(2, 12))
    assert StorageSample.objects.get().storage_class == "premium-nvme" and storage_lines() == []


def test_storage_in_a_currency_without_prices_is_not_billed_and_stops_no_posting(cluster, priced, clock):
    WorkspaceCurrency.objects.create(workspace=cluster.nlp, period=date(2026, 3, 1), currency="EUR", set_at=at(1, 0))
    volume_with(cluster, "theirs", GIB, workspace=cluster.nlp, user=cluster.bob)
    volume_with(cluster, "ours", GIB)
    sample_storage(now=at(2, 10, 5))
    post_ledger(now=at(2, 12))
    assert [(x.workspace, x.resource_name) for x in storage_lines()] == [(cluster.vision, "volume/ours")]


def test_a_new_price_mid_day_bills_each_part_of_the_hour_at_its_own_price(cluster, priced, clock):
    later = PriceTable.objects.create(name="Storage rise", currency="USD", effective_from=at(2, 12, 30),
                                      cpu_core_hour=Decimal("0.02"), memory_gib_hour=Decimal("0.005"))
    StorageRate.objects.create(table=later, storage_class="standard", per_gib_month=Decimal("29.20"))  # 0.04/GiB-h
    volume_with(cluster, "weights", 5 * GIB)
    for hour in (11, 12, 13):
        sample_storage(now=at(2, hour, 1))
    post_ledger(now=at(2, 15))
    assert [(x.charge_start, x.charge_end, x.price_table.name, x.storage_gib_hours, x.cost)
            for x in storage_lines()] == [
        (at(2, 11), at(2, 12), "Test prices", Decimal(5), Decimal("0.10")),
        (at(2, 12), at(2, 12, 30), "Test prices", Decimal("2.5"), Decimal("0.05")),
        (at(2, 12, 30), at(2, 13), "Storage rise", Decimal("2.5"), Decimal("0.10")),
        (at(2, 13), at(2, 14), "Storage rise", Decimal(5), Decimal("0.20")),
    ]


def test_costs_api_groups_by_resource_and_agrees_with_the_ledger_budget_and_statement(cluster, priced, clock,
                                                                                      client):
    volume_with(cluster, "weights", 7 * GIB)
    volume_with(cluster, "their-data", 50 * GIB, workspace=cluster.nlp, user=cluster.bob)
    for hour in range(9, 17):
        sample_storage(now=at(2, hour, 2))
    clock.now = at(3, 12)
    post_ledger(now=clock.now)
    vision = storage_lines(cluster.vision)
    assert len(vision) == 8 and all(x.cost == Decimal("0.14") for x in vision)

    client.force_login(cluster.alice)
    body = client.get("/api/v1/costs/", {**RANGE, "group_by": "resource"}).json()
    assert [(r["resource"], r["storage_gib_hours"], r["cost"]) for r in body["rows"]] == [
        ("storage", "56.000000", "1.12")]
    assert body["total"] == "1.12"

    set_budget(user=cluster.alice, workspace=cluster.vision, amount="100")
    assert budget_status(cluster.vision, now=clock.now).spent == Decimal("1.12")
    client.force_login(cluster.finance)
    statement = client.get("/reports/statements/vision-lab/2026-03/statement.csv").content.decode()
    assert sum(Decimal(r["BilledCost"]) for r in csv.DictReader(io.StringIO(statement))) == Decimal("1.12")
    page = client.get("/reports/statements/vision-lab/2026-03/").content.decode()
    assert re.search(r'id="statement-total">\$1\.12<', page)
    assert re.search(r'data-storage="standard"><td colspan="7">Storage \(standard\): 56\.00 GiB-hours used</td>\s*'
                     r'<td class="num">\$1\.12</td>', page)


def test_the_report_pages_ledger_lines_say_what_each_storage_line_stored(cluster, priced, clock, client):
    volume_with(cluster, "weights", 3 * GIB)
    volume_with(cluster, "their-data", 5 * GIB, workspace=cluster.nlp, user=cluster.bob)
    storage.snapshot(cluster.alice, cluster.vision, "weights", None)
    sample_storage(now=at(2, 10, 5))
    clock.now = at(2, 12)
    post_ledger(now=clock.now)
    client.force_login(cluster.alice)
    page = client.get("/reports/", {"start": "2026-03-01", "end": "2026-03-31"}).content.decode()
    rows = re.findall(r'<tr data-storage="([^"]+)"><td>[^<]*</td><td>vision-lab</td><td>Usage</td><td></td>\s*'
                      r'<td>Storage \(standard\): \1</td>.*?<td>(\d+\.\d\d)</td><td>USD</td></tr>', page, re.S)
    assert sorted(rows) == [("dataset/weights@v1", "0.06"), ("volume/weights", "0.06")]
    assert "their-data" not in page  # another tenant's storage


def test_focus_export_marks_storage_lines(cluster, priced, clock, client):
    volume_with(cluster, "weights", 3 * GIB)
    sample_storage(now=at(2, 10, 5))
    post_ledger(now=at(2, 12))
    [row] = [dict(zip(HEADER, r, strict=True)) for r in line_rows(ChargeLine.objects.filter(resource="storage"))]
    assert (row["ServiceCategory"], row["ConsumedUnit"], row["ResourceType"]) == ("Storage", "GiB-Hours", "Volume")
    assert (row["ConsumedQuantity"], row["BilledCost"], row["ListUnitPrice"]) == ("3.000000", "0.06", "14.6000")
    assert (row["PricingUnit"], row["PricingQuantity"]) == ("GiB-Months", str((Decimal(3) / 730).quantize(
        Decimal("0.000001"))))
    assert (row["ResourceId"], row["ResourceName"], row["SkuId"]) == ("vision-lab/volume/weights", "volume/weights",
                                                                      "storage/standard")
    assert row["x_StorageGibHours"] == "3.000000" and row["x_JobId"] == ""

    client.force_login(cluster.alice)
    response = client.get("/reports/export.csv", RANGE)
    text = b"".join(async_to_sync(_read)(response)).decode()
    [exported] = list(csv.DictReader(io.StringIO(text)))
    assert exported["ServiceCategory"] == "Storage" and exported["BilledCost"] == "0.06"


async def _read(response):
    return [chunk async for chunk in response.streaming_content]


def test_another_tenant_sees_none_of_it(cluster, priced, clock, client):
    volume_with(cluster, "weights", 3 * GIB)
    sample_storage(now=at(2, 10, 5))
    post_ledger(now=at(2, 12))
    assert storage_lines(cluster.vision)
    client.force_login(cluster.bob)
    body = client.get("/api/v1/costs/", {"start": "2026-03-01", "end": "2026-03-31", "group_by": "resource"}).json()
    assert body["rows"] == [] and body["total"] == "0.00"
    assert client.get("/api/v1/costs/", {**RANGE, "group_by": "resource"}).status_code == 404
    text = b"".join(async_to_sync(_read)(client.get("/reports/export.csv", {"start": "2026-03-01",
                                                                             "end": "2026-03-31"}))).decode()
    assert "weights" not in text and "vision-lab" not in text


def test_the_storage_rule_is_in_the_rules_list_and_prices_used_gib_only():
    rates = world_rates(storage={"standard": Decimal("7.30")})
    price, adjustments = fold_storage(rates.rules, rates, PricedStorage("standard", Decimal("2")), *_window())
    assert price == Decimal("0.02") and [a.code for a in adjustments] == ["storage"]
    assert fold_storage(rates.rules, rates, PricedStorage("fast", Decimal("2")), *_window()) is None
    table = world_price_table(storage={"standard": Decimal("7.30")})
    [seg] = storage_cost(PricedStorage("standard", Decimal("0.25")), at(2, 10), at(2, 10, 30), [table], tz="UTC")
    assert (seg.gib_hours, seg.amount) == (Decimal("0.125"), Decimal("0.00125"))  # unrounded: the line rounds
    with pytest.raises(ValueError, match="storage rate"):
        world_rates(storage={"standard": Decimal("-1")})


def _window():
    return PriceWindow(at(2, 10), at(2, 11)), PricedWorkspace("UTC")
