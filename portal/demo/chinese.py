"""The demo's Chinese-speaking team, idempotent: workspace ai-lab, owner chen (password chen-demo),
who reads the interface in Simplified Chinese and times in Asia/Shanghai."""

from django.contrib.auth import get_user_model
from django.db import transaction

from portal.models import Membership, Role, UserPreference, Workspace
from scheduling.models import Queue, QueueAccess

WORKSPACE = ("ai-lab", "AI 实验室")
OWNER = ("chen", "chen-demo")


@transaction.atomic
def load_chinese_team() -> None:
    username, password = OWNER
    user, created = get_user_model().objects.get_or_create(username=username)
    if created:
        user.set_password(password)
        user.email = f"{username}@example.com"
        user.save()
    UserPreference.objects.get_or_create(user=user, defaults={"language": "zh-hans", "time_zone": "Asia/Shanghai"})
    slug, name = WORKSPACE
    workspace, _ = Workspace.objects.get_or_create(slug=slug, defaults={"name": name})
    Membership.objects.get_or_create(user=user, workspace=workspace, defaults={"role": Role.OWNER})
    # the shared preemptible queue, so chen can submit without taking quota from the other teams
    if community := Queue.objects.filter(name="community").first():
        QueueAccess.objects.get_or_create(queue=community, workspace=workspace, defaults={"is_default": True})
