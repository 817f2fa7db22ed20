"""The demo's Chinese-speaking team, idempotent: workspace ai-lab, owner chen (password chen-demo),
who reads the interface in Simplified Chinese and times in Asia/Shanghai; ai-lab is billed in CNY on
the demo's yuan table (portal/demo/prices.py: valley-electricity hours 23:00-07:00 in Shanghai)."""

import logging

from django.contrib.auth import get_user_model
from django.db import transaction

from billing.api import CurrencyChangeRefused, set_workspace_currency
from portal.models import Membership, Role, UserPreference, Workspace
from scheduling.models import Queue, QueueAccess

WORKSPACE = ("ai-lab", "AI 实验室")
OWNER = ("chen", "chen-demo")
CURRENCY = "CNY"
TIME_ZONE = "Asia/Shanghai"
QUEUE = "community"  # the team's only queue: shared, preemptible
log = logging.getLogger(__name__)


@transaction.atomic
def load_chinese_team() -> None:
    username, password = OWNER
    user, created = get_user_model().objects.get_or_create(username=username)
    if created:
        user.set_password(password)
        user.email = f"{username}@example.com"
        user.save()
    UserPreference.objects.get_or_create(user=user, defaults={"language": "zh-hans", "time_zone": TIME_ZONE})
    slug, name = WORKSPACE
    workspace, _ = Workspace.objects.get_or_create(slug=slug, defaults={"name": name})
    Membership.objects.get_or_create(user=user, workspace=workspace, defaults={"role": Role.OWNER})
    # the shared preemptible queue, so chen can submit without taking quota from the other teams
    if community := Queue.objects.filter(name=QUEUE).first():
        QueueAccess.objects.get_or_create(queue=community, workspace=workspace, defaults={"is_default": True})
    try:
        set_workspace_currency(workspace, CURRENCY)  # nothing when it already is; needs load_prices first
    except CurrencyChangeRefused as error:  # a database where ai-lab was billed in another currency
        log.warning("ai-lab stays in its currency: %s", error)
