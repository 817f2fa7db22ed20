"""A new user's whole path with data, from the UI alone: alice creates a volume on the Volumes page, uploads
a file to it and snapshots it as a dataset (data@v1); on the Secrets page she adds a secret and a registry
credential; she submits a job that mounts the dataset and takes the secret in its env, and its log (the job
page) shows the mount path and the variable's name, never the secret's value; an hour of platform time later
the reports page shows what storing the volume and the dataset cost.

The scheduling cycle and the hourly posting (billing.tasks.post_usage: storage sampled, the ledger posted)
run in a background thread, as Celery beat would, on the platform clock, which follows the wall clock until
the test moves it an hour on. Training replicas run their real process (the live server reads its log)."""

import re
import threading
from decimal import Decimal

import pytest
from django.db import connection
from django.utils import timezone
from playwright.sync_api import expect
from tests_e2e_helpers import login, shot

from billing.models import PriceTable, StorageRate
from billing.tasks import post_usage
from scheduling.backends.simulated.backend import SimulatedBackend
from scheduling.cycle.run import run_scheduling_cycle
from tests.world import PASSWORDS

MIB = 2**20
# one MiB stored for an hour costs 0.10: 102.40 per GiB-hour, 730 hours to the month
PER_GIB_MONTH = Decimal("74752")
COST_COLUMN = 14  # of the reports page's ledger lines
SECRET_VALUE = "tok-7f2c-never-shown"
REGISTRY_PASSWORD = "reg-91ab-never-shown"
SPEC = """name: train-on-data
roles:
  - name: main
    image: registry.example.com/team/train:1.0
    resources: {gpu: 1}
    nodePool: h100
    env:
      EPOCHS: "3"
      API_TOKEN: {secret: api-token}
    volumes:
      - {dataset: data@v1, mountPath: /data}
"""


@pytest.fixture
def storage_priced(cluster):
    StorageRate.objects.create(table=PriceTable.objects.get(name="Test prices"), storage_class="standard",
                               per_gib_month=PER_GIB_MONTH)


class Beat:
    """The scheduling cycle on the simulated cluster (training replicas with their process, 1 s of the
    platform a second) and the hourly posting, every 0.3 s in a thread, the platform clock set to the wall
    clock each time."""

    def __init__(self, clock):
        self.clock, self.stop, self.errors = clock, threading.Event(), []
        self.thread = threading.Thread(target=self._loop, daemon=True)

    def _loop(self):
        backend = SimulatedBackend(speedup=1, failure_rate=0, training_processes=True)
        try:
            while not self.stop.wait(0.3):
                self.clock.now = timezone.now()
                run_scheduling_cycle(backend, now=self.clock.now)
                post_usage()
        except Exception as error:  # surfaced when the beat ends
            self.errors.append(error)
        finally:
            connection.close()

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.stop.set()
        self.thread.join(timeout=30)
        assert not self.thread.is_alive() and not self.errors, self.errors


def flash(page):
    return page.locator(".flash.success")


@pytest.mark.django_db(transaction=True)
def test_a_new_user_goes_from_a_volume_to_a_job_on_its_dataset_and_sees_what_storage_cost(
        live_daphne_with_training_processes, cluster, storage_priced, clock, page):
    server = live_daphne_with_training_processes
    clock.now = timezone.now()
    login(page, server, "alice", PASSWORDS["alice"])
    page.get_by_role("link", name="Vision Lab", exact=True).first.click()  # the dashboard lists her workspaces
    page.click("#volumes-link")

    # 1. a volume, and a file uploaded to it
    page.fill("#f-volume-name", "data")
    page.fill("#f-volume-size", "5")
    page.click("#create-volume-button")
    expect(flash(page)).to_contain_text("Volume data created.")
    row = page.locator('#volumes tr[data-volume="data"]')
    expect(row.locator('[data-field="size"]')).to_have_text("5 GiB")
    row.locator("#file-data").set_input_files(
        {"name": "train.csv", "mimeType": "text/csv", "buffer": b"x" * MIB})
    row.locator("#upload-data").click()
    expect(flash(page)).to_contain_text("uploaded to volume data.")
    expect(flash(page)).to_contain_text("train.csv")

    # 2. its snapshot, the dataset data@v1
    page.locator('#volumes tr[data-volume="data"] #snapshot-data').click()
    expect(flash(page)).to_contain_text("data@v1 made: a read-only snapshot of volume data.")
    expect(page.locator('#datasets tr[data-dataset="data@v1"]')).to_contain_text(str(MIB))
    shot(page, "data-walk-volumes")

    # 3. a secret and a registry credential
    page.get_by_role("link", name="Vision Lab", exact=True).first.click()
    page.click("#secrets-link")
    page.fill("#f-secret-name", "api-token")
    page.fill("#f-secret-value", SECRET_VALUE)
    page.click("#set-secret-button")
    expect(flash(page)).to_contain_text("Secret api-token added.")
    page.fill("#f-registry-server", "registry.example.com")
    page.fill("#f-registry-username", "ci-bot")
    page.fill("#f-registry-password", REGISTRY_PASSWORD)
    page.click("#set-registry-button")
    expect(flash(page)).to_contain_text("Credential for registry.example.com added.")
    expect(page.locator('#secrets tr[data-secret="api-token"]')).to_be_visible()
    expect(page.locator('#registries tr[data-registry="registry.example.com"]')).to_contain_text("ci-bot")
    assert SECRET_VALUE not in page.content() and REGISTRY_PASSWORD not in page.content()

    with Beat(clock):
        # 4. a job that mounts the dataset and takes the secret in its env
        page.click("#nav-submit")
        expect(page.locator(".cm-editor")).to_be_visible()
        page.fill("#spec-yaml", SPEC)
        expect(page.locator("#quote-table tbody tr").first).to_be_visible()
        expect(page.locator("#spec-errors li")).to_have_count(0)
        page.locator("#quote-table tr.earliest button.submit-option").click()
        page.wait_for_url(re.compile(r".*/jobs/\d+/$"))
        expect(page.locator("#job-state")).to_have_text("Running", timeout=30000)
        log = page.locator("#job-log")
        expect(log).to_contain_text("mount /data: directory", timeout=30000)  # the page polls the log
        expect(log).to_contain_text(re.compile(r"environment: .*\bAPI_TOKEN\b"))
        expect(log).to_contain_text("EPOCHS")
        assert SECRET_VALUE not in page.content() and REGISTRY_PASSWORD not in page.content()
        shot(page, "data-walk-job-log")

    # 5. an hour of the platform later, storing the volume and its snapshot shows on the report
    clock.advance(3600)
    post_usage()
    page.click("nav >> text=Reports")
    for stored in ("volume/data", "dataset/data@v1"):
        line = page.locator(f'#rows tr[data-storage="{stored}"]').first  # the first hour: sampled whole
        expect(line).to_contain_text(f"Storage (standard): {stored}")
        expect(line.locator("td").nth(COST_COLUMN)).to_have_text("0.10")
    shot(page, "data-walk-report")
