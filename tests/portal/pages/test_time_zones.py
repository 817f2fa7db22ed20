"""Each user sees the pages' times in their own time zone (Preferences), the platform's by default, and
the header names the zone. The API keeps the platform's zone whoever asks."""

from datetime import UTC, datetime

import pytest
from django.utils import timezone

from portal.models import UserPreference
from portal.services import set_time_zone
from scheduling.models import Job, JobEvent
from scheduling.services import submit_job
from scheduling.spec.examples import CLEAN_YAML

SUBMITTED = datetime(2026, 3, 1, 23, 30, tzinfo=UTC)


@pytest.fixture(autouse=True)
def platform_zone(settings):
    """A platform zone that is neither UTC nor the users' choice, so a page in the wrong one shows."""
    settings.TIME_ZONE = "America/New_York"


@pytest.fixture
def job(cluster, clock):
    """Alice's job in vision-lab, submitted (and its first event) at 2026-03-01 23:30 UTC."""
    clock.now = SUBMITTED
    job = submit_job(user=cluster.alice, workspace=cluster.vision, spec=CLEAN_YAML)
    Job.objects.filter(pk=job.pk).update(created=SUBMITTED)
    JobEvent.objects.filter(job=job).update(time=SUBMITTED)
    return job


def zone_of(user):
    return UserPreference.objects.filter(user=user).values_list("time_zone", flat=True).first()


# --------------------------------------------------------------------------- the Preferences page


def test_the_page_offers_every_zone_and_the_platform_default(client, tenants):
    client.force_login(tenants.alice)
    response = client.get("/account/preferences/")
    assert response.status_code == 200
    html = response.content.decode()
    assert '<option value="" selected>Platform default (America/New_York)</option>' in html
    assert "<option>Asia/Shanghai</option>" in html and "<option>Europe/Berlin</option>" in html
    assert ">localtime<" not in html  # the server's own clock is no zone to choose
    assert 'id="nav-preferences" aria-current="page"' in html


def test_a_zone_is_saved_and_shown_as_chosen(client, tenants):
    client.force_login(tenants.alice)
    response = client.post("/account/preferences/", {"time_zone": "Asia/Shanghai"})
    assert response.status_code == 302 and response["Location"] == "/account/preferences/"
    assert zone_of(tenants.alice) == "Asia/Shanghai"
    html = client.get("/account/preferences/").content.decode()
    assert "<option selected>Asia/Shanghai</option>" in html and "Preferences saved." in html
    assert '<a href="/account/preferences/" id="time-zone" class="time-zone"' in html
    assert "Times in Asia/Shanghai</a>" in html


def test_the_platform_default_can_be_chosen_again(client, tenants):
    set_time_zone(tenants.alice, "Asia/Shanghai")
    client.force_login(tenants.alice)
    assert client.post("/account/preferences/", {"time_zone": ""}).status_code == 302
    assert zone_of(tenants.alice) == ""
    assert "Times in America/New_York" in client.get("/").content.decode()


@pytest.mark.parametrize(("zone", "message"), [
    ("Mars/Olympus_Mons", "&#x27;Mars/Olympus_Mons&#x27; is not a time zone"),
    ("asia/shanghai", "is not a time zone"),  # names are case-sensitive in the zone database
    ("localtime", "is not a time zone"),
    ("Europe/" + "x" * 5000, "at most 64 characters"),
])
def test_a_bad_zone_is_a_400_with_the_form_and_changes_nothing(client, tenants, zone, message):
    set_time_zone(tenants.alice, "Europe/Paris")
    client.force_login(tenants.alice)
    response = client.post("/account/preferences/", {"time_zone": zone})
    assert response.status_code == 400
    html = response.content.decode()
    assert 'id="preferences-form"' in html and 'data-field="time_zone"' in html and message in html
    assert "<option selected>Europe/Paris</option>" in html  # the form still shows what is saved
    assert zone_of(tenants.alice) == "Europe/Paris"


def test_a_nul_byte_or_no_zone_at_all_is_a_400_and_changes_nothing(client, tenants):
    set_time_zone(tenants.alice, "Europe/Paris")
    client.force_login(tenants.alice)
    assert client.post("/account/preferences/", {"time_zone": "Asia/Shanghai\x00"}).status_code == 400
    missing = client.post("/account/preferences/", {"language": "zh-hans"})
    assert missing.status_code == 400 and "choose a time zone" in missing.content.decode()
    assert zone_of(tenants.alice) == "Europe/Paris"


def test_the_service_refuses_what_the_page_refuses(tenants):
    from scheduling.errors import DomainError

    for zone in ("Nowhere/Land", "Asia/Shanghai\x00", "x" * 65):
        with pytest.raises(DomainError) as refused:
            set_time_zone(tenants.alice, zone)
        assert refused.value.errors.keys() == {"time_zone"}
    assert not UserPreference.objects.exists()
    assert set_time_zone(tenants.alice, "  Asia/Tokyo ").time_zone == "Asia/Tokyo"


def test_anonymous_is_sent_to_log_in(client, tenants):
    for response in (client.get("/account/preferences/"),
                     client.post("/account/preferences/", {"time_zone": "Asia/Shanghai"})):
        assert response.status_code == 302
        assert response["Location"] == "/login/?next=/account/preferences/"
    assert not UserPreference.objects.exists()


def test_a_user_changes_only_their_own_zone(client, tenants):
    set_time_zone(tenants.bob, "Europe/London")
    client.force_login(tenants.alice)
    client.post("/account/preferences/", {"time_zone": "Asia/Shanghai", "user": tenants.bob.pk})
    assert (zone_of(tenants.alice), zone_of(tenants.bob)) == ("Asia/Shanghai", "Europe/London")


# --------------------------------------------------------------------------- times on the pages


def test_the_job_list_and_page_show_the_users_zone(client, cluster, job):
    set_time_zone(cluster.alice, "Asia/Shanghai")
    client.force_login(cluster.alice)
    listing = client.get("/jobs/").content.decode()
    assert "<td>2026-03-02 07:30:00</td>" in listing and "2026-03-01 23:30" not in listing
    assert '<body data-tz="Asia/Shanghai">' in listing and "Times in Asia/Shanghai" in listing
    detail = client.get(f"/jobs/{job.pk}/").content.decode()
    assert '<time datetime="2026-03-02T07:30:00+08:00">2026-03-02 07:30:00</time>' in detail


def test_a_user_without_a_preference_sees_the_platform_zone(client, cluster, job):
    set_time_zone(cluster.alice, "Asia/Shanghai")
    client.force_login(cluster.carol)  # alice's workspace, no preference of her own
    listing = client.get("/jobs/").content.decode()
    assert "<td>2026-03-01 18:30:00</td>" in listing  # 23:30 UTC is 18:30 in New York
    assert '<body data-tz="America/New_York">' in listing and "Times in America/New_York" in listing


def test_one_users_zone_never_leaks_into_the_next_request(client, cluster, job):
    set_time_zone(cluster.alice, "Asia/Shanghai")
    client.force_login(cluster.alice)
    assert "2026-03-02 07:30:00" in client.get("/jobs/").content.decode()
    assert timezone.get_current_timezone_name() == "America/New_York"  # reset once the response is made
    client.force_login(cluster.carol)
    assert "2026-03-01 18:30:00" in client.get("/jobs/").content.decode()
    client.logout()
    assert '<body data-tz="America/New_York">' in client.get("/login/").content.decode()


def test_a_zone_dropped_from_the_zone_database_falls_back_to_the_platforms(client, cluster, job):
    UserPreference.objects.create(user=cluster.alice, time_zone="Atlantis/Capital")  # saved before a tzdata update
    client.force_login(cluster.alice)
    assert "<td>2026-03-01 18:30:00</td>" in client.get("/jobs/").content.decode()


def test_the_api_keeps_the_platform_zone_whoever_asks(client, cluster, job):
    client.force_login(cluster.carol)
    platform = client.get(f"/api/v1/jobs/{job.pk}/").json()["created"]
    set_time_zone(cluster.alice, "Asia/Shanghai")
    client.force_login(cluster.alice)
    created = client.get(f"/api/v1/jobs/{job.pk}/").json()["created"]
    assert created == platform and datetime.fromisoformat(created) == SUBMITTED
    assert "+08:00" not in created


def test_statement_days_stay_the_platforms(client, cluster, clock, settings):
    """A credit at 20:00 UTC on 31 March is March's in a UTC platform, also for a user in Shanghai
    (where it is already 1 April): billing months and days are the platform's."""
    from billing.ledger.services import add_adjustment

    settings.TIME_ZONE = "UTC"
    clock.now = datetime(2026, 3, 31, 20, 0, tzinfo=UTC)
    add_adjustment(user=cluster.finance, workspace=cluster.vision, amount="-5", reason="goodwill")
    set_time_zone(cluster.finance, "Asia/Shanghai")
    client.force_login(cluster.finance)
    html = client.get("/reports/statements/vision-lab/2026-03/").content.decode()
    assert "2026-03-31 by finance" in html and "(the platform's time zone, UTC)" in html
    assert "Times in Asia/Shanghai" in html
