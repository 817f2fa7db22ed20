"""Per-person idle share: each workspace's posted idle-share lines split among its people by their allocated
GPU-hours in that workspace and month, in cents by largest remainders, so per-person reports (the costs API's
group_by=user, /reports/users/ and its exports) still add up to every line, idle share included; a person
with no GPU-hours gets none; another tenant's shares never show."""

import csv
import io
import re
from collections import defaultdict
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal

import pytest
from django.test import Client
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from billing import chargeback
from billing.exchange_rates import add_rate
from billing.models import ChargeLine, LedgerCursor
from billing.reports.consolidation import consolidated_total
from billing.reports.selectors import person_idle_shares
from scheduling.models import NodePool
from tests.factories import JobFactory, MembershipFactory, UserFactory, WorkspaceFactory

pytestmark = pytest.mark.django_db
MARCH = date(2026, 3, 1)
RANGE = {"start": "2026-03-01", "end": "2026-03-31"}
CENT = Decimal("0.01")


@pytest.fixture
def posted(cluster, clock, line):
    """March on the h100 pool, charged back proportionally and posted: alice 3 GPU-hours and carol 1 in
    vision-lab (erin a CPU-only job there, no GPU-hour), bob 7 in nlp-group, dana 8 in a second tenant."""
    clock.now = datetime(2026, 4, 5, 12, tzinfo=UTC)
    other = WorkspaceFactory(slug="other-co", name="Other Co")
    dana, erin = UserFactory(username="dana"), UserFactory(username="erin")
    MembershipFactory(user=dana, workspace=other, role="owner")
    MembershipFactory(user=erin, workspace=cluster.vision, role="member")
    for user, workspace, day, hours, cost in [
        (cluster.alice, cluster.vision, 2, "2", "6.00"), (cluster.alice, cluster.vision, 9, "1", "3.00"),
        (cluster.carol, cluster.vision, 3, "1", "3.00"), (erin, cluster.vision, 4, "0", "0.40"),
        (cluster.bob, cluster.nlp, 3, "7", "21.00"), (dana, other, 3, "8", "24.00"),
    ]:
        job = JobFactory(workspace=workspace, submitted_by=user)
        line(workspace=workspace, job=job, job_name=job.name, submitter=user.username, day=date(2026, 3, day),
             allocated_gpu_hours=Decimal(hours), exclusive_gpu_hours=Decimal(hours), cost=Decimal(cost))
    line(workspace=cluster.vision, resource=ChargeLine.Resource.STORAGE, pool="", gpu_model="", sku_id="storage/standard",
         allocated_gpu_hours=Decimal(0), cost=Decimal("1.25"))  # no person's: the workspace's own
    chargeback.save_policy(NodePool.objects.get(name="h100"), "proportional")
    LedgerCursor.objects.update_or_create(pk=1, defaults={"closed_until": datetime(2026, 4, 1, 1, tzinfo=UTC),
                                                         "posted_until": datetime(2026, 4, 1, 1, tzinfo=UTC)})
    chargeback.post_chargeback(MARCH)
    return cluster


def client_of(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def idle_line(slug: str) -> Decimal:
    return sum(ChargeLine.objects.filter(workspace__slug=slug, charge_kind=chargeback.IDLE_SHARE)
               .values_list("cost", flat=True), Decimal(0))


def own_lines(slugs) -> dict[str, Decimal]:
    """Per person: the sum of their own lines (not idle shares), worked out from the lines."""
    out: dict[str, Decimal] = defaultdict(Decimal)
    for x in ChargeLine.objects.filter(workspace__slug__in=slugs).exclude(charge_kind=chargeback.IDLE_SHARE):
        out[x.submitter] += x.cost
    return out


def test_each_workspaces_idle_share_is_split_by_its_peoples_gpu_hours_to_the_cent(posted):
    body = client_of(posted.finance).get("/api/v1/costs/", {**RANGE, "group_by": "user"}).json()
    rows = {r["user"]: r for r in body["rows"]}
    vision, nlp = idle_line("vision-lab"), idle_line("nlp-group")
    assert vision > 0 and nlp > 0
    shares = {user: Decimal(r["idle_share"]) for user, r in rows.items()}
    # alice held 3 of vision-lab's 4 GPU-hours, carol 1; bob all of nlp-group's
    assert shares["alice"] + shares["carol"] == vision and shares["bob"] == nlp
    assert abs(shares["alice"] - vision * 3 / 4) < CENT and abs(shares["carol"] - vision / 4) < CENT
    assert shares["erin"] == 0 and shares[""] == 0  # no GPU-hour: no share
    own = own_lines(["vision-lab", "nlp-group"])
    for user, row in rows.items():
        assert Decimal(row["cost"]) == own[user] + shares[user], user
    every_line = sum(ChargeLine.objects.filter(workspace__slug__in=["vision-lab", "nlp-group"])
                     .values_list("cost", flat=True), Decimal(0))
    assert Decimal(body["total"]) == sum(Decimal(r["cost"]) for r in body["rows"]) == every_line


def test_another_tenants_shares_never_appear(posted):
    body = client_of(posted.finance).get("/api/v1/costs/", {**RANGE, "group_by": "user"}).json()
    assert "dana" not in {r["user"] for r in body["rows"]}
    assert sum(Decimal(r["idle_share"]) for r in body["rows"]) == idle_line("vision-lab") + idle_line("nlp-group")
    operator = client_of(posted.admin).get("/api/v1/costs/", {**RANGE, "group_by": "user"}).json()
    assert {r["user"]: Decimal(r["idle_share"]) for r in operator["rows"]}["dana"] == idle_line("other-co") > 0
    alone = client_of(posted.finance).get("/api/v1/costs/", {**RANGE, "group_by": "user", "workspace": "nlp-group"}
                                          ).json()
    assert {r["user"]: r["idle_share"] for r in alone["rows"]} == {"bob": str(idle_line("nlp-group"))}


def test_a_range_without_the_months_last_day_has_no_idle_share_and_one_that_misses_a_persons_lines_still_gives_it(
        posted):
    early = client_of(posted.finance).get("/api/v1/costs/", {"start": "2026-03-01", "end": "2026-03-30",
                                                             "group_by": "user"}).json()
    assert {r["idle_share"] for r in early["rows"]} == {"0.00"}
    late = client_of(posted.finance).get("/api/v1/costs/", {"start": "2026-03-31", "end": "2026-03-31",
                                                            "group_by": "user"}).json()
    rows = {r["user"]: r for r in late["rows"]}
    assert set(rows) == {"alice", "carol", "bob"}  # their own lines are earlier; the month's shares are theirs
    assert rows["alice"]["jobs"] == 0 and rows["alice"]["cost"] == rows["alice"]["idle_share"]
    assert Decimal(late["total"]) == idle_line("vision-lab") + idle_line("nlp-group")


def test_the_page_and_its_exports_show_each_persons_idle_share(posted):
    client = client_of(posted.finance)
    api = {r["user"]: r for r in client.get("/api/v1/costs/", {**RANGE, "group_by": "user"}).json()["rows"]}
    page = client.get("/reports/users/", RANGE).content.decode()
    shown = dict(re.findall(r'data-user="(\w*)" data-month="2026-03">.*?data-field="idle-share">\$?([\d,.]+)<', page,
                            re.S))
    assert {user: value.replace(",", "") for user, value in shown.items()} == {
        user: r["idle_share"] for user, r in api.items()}
    exported = list(csv.DictReader(io.StringIO(client.get("/reports/users/", {**RANGE, "format": "csv"}).content.decode())))
    assert {r["user"]: (r["cost"], r["idle_share"]) for r in exported} == {
        user: (r["cost"], r["idle_share"]) for user, r in api.items()}


def test_a_consolidated_report_splits_each_converted_idle_line_and_adds_up(posted):
    for n in range(31):
        add_rate(base="USD", quote="CNY", day=MARCH + timedelta(days=n), rate=Decimal("7.1") + Decimal(n) / 100)
    body = client_of(posted.finance).get("/api/v1/costs/", {**RANGE, "group_by": "user", "currency": "CNY"}).json()
    rows = {r["user"]: r for r in body["rows"]}
    mine = ChargeLine.objects.filter(workspace__slug__in=["vision-lab", "nlp-group"])
    assert Decimal(body["total"]) == consolidated_total(mine, "CNY") == sum(Decimal(r["cost"]) for r in body["rows"])
    idle_vision = consolidated_total(mine.filter(workspace__slug="vision-lab", charge_kind=chargeback.IDLE_SHARE), "CNY")
    assert Decimal(rows["alice"]["idle_share"]) + Decimal(rows["carol"]["idle_share"]) == idle_vision
    assert Decimal(rows["alice"]["x_OriginalCost"]) == own_lines(["vision-lab"])["alice"] + sum(
        Decimal(r["idle_share"]) for r in client_of(posted.finance).get(
            "/api/v1/costs/", {**RANGE, "group_by": "user"}).json()["rows"] if r["user"] == "alice")
    assert rows["erin"]["idle_share"] == "0.00"


def test_a_workspace_charged_with_nobodys_gpu_hours_keeps_its_share_unattributed(posted):
    LedgerCursor.objects.update(closed_until=datetime(2026, 5, 1, 1, tzinfo=UTC))
    ChargeLine.objects.create(  # only storage in April: the month's idle capacity still goes to its workspaces
        category=ChargeLine.Category.USAGE, resource=ChargeLine.Resource.STORAGE, hour=datetime(2026, 4, 2, tzinfo=UTC),
        day=date(2026, 4, 2), period=date(2026, 4, 1), charge_start=datetime(2026, 4, 2, tzinfo=UTC),
        charge_end=datetime(2026, 4, 2, 1, tzinfo=UTC), workspace=posted.vision, cost=Decimal("2.00"), currency="USD",
        provisional=False, computed_at=datetime(2026, 4, 2, 1, tzinfo=UTC), sku_id="storage/standard")
    chargeback.post_chargeback(date(2026, 4, 1), now=datetime(2026, 5, 5, tzinfo=UTC))
    body = client_of(posted.finance).get("/api/v1/costs/", {"start": "2026-04-01", "end": "2026-04-30",
                                                             "group_by": "user"}).json()
    shares = {r["user"]: r["idle_share"] for r in body["rows"]}
    april = sum(ChargeLine.objects.filter(period=date(2026, 4, 1), charge_kind=chargeback.IDLE_SHARE,
                                          workspace__slug__in=["vision-lab", "nlp-group"]).values_list("cost", flat=True))
    assert april > 0 and set(shares) == {""} and Decimal(shares[""]) == april


def test_my_usage_shows_my_own_idle_share_only(posted):
    api = {r["user"]: r for r in client_of(posted.finance).get("/api/v1/costs/", {**RANGE, "group_by": "user"}
                                                                ).json()["rows"]}
    for person in (posted.alice, posted.carol):
        (row,) = client_of(person).get("/account/usage/").context["rows"]
        mine = api[person.username]
        assert (str(row["idle_share"]), str(row["cost"])) == (mine["idle_share"], mine["cost"])
    assert api["alice"]["idle_share"] != api["carol"]["idle_share"]


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(hours=st.lists(st.decimals("0", "50", places=3), max_size=6),
       idle=st.lists(st.decimals("-900", "90000", places=2), min_size=1, max_size=3))
def test_the_peoples_shares_add_up_to_the_idle_lines_for_any_gpu_hours(tenants, line, hours, idle):
    ChargeLine.objects.all().delete()
    people = [f"person-{n}" for n in range(len(hours))]
    for person, held in zip(people, hours, strict=True):
        line(workspace=tenants.vision, submitter=person, allocated_gpu_hours=held, cost=Decimal("1.00"))
    for amount in idle:
        line(workspace=tenants.vision, submitter="", charge_kind=chargeback.IDLE_SHARE, allocated_gpu_hours=0,
             day=date(2026, 3, 31), cost=amount)
    shares = person_idle_shares(ChargeLine.objects.filter(charge_kind=chargeback.IDLE_SHARE))
    got = {person: share.amount for (person, _, _), share in shares.items()}
    assert sum(got.values()) == sum(idle) and all(v == v.quantize(CENT) for v in got.values())
    total_hours = sum(hours)
    if total_hours == 0:
        assert set(got) == {""}
        return
    for person, held in zip(people, hours, strict=True):
        if held == 0:
            assert got.get(person, Decimal(0)) == 0
        else:
            assert abs(got[person] - sum(idle) * held / total_hours) < CENT
