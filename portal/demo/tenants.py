"""Demo tenants, idempotent: running it again changes nothing and creates no duplicates."""

from django.contrib.auth import get_user_model
from django.db import transaction

from portal.models import Membership, Role, Workspace

DEMO_PASSWORDS = {"admin": "admin-demo", "alice": "alice-demo", "bob": "bob-demo", "finance": "finance-demo"}
WORKSPACES = {"vision-lab": "Vision Lab", "nlp-group": "NLP Group"}
MEMBERSHIPS = [
    ("alice", "vision-lab", Role.OWNER),
    ("bob", "nlp-group", Role.OWNER),
    ("finance", "vision-lab", Role.FINANCE),
    ("finance", "nlp-group", Role.FINANCE),
]


def _user(username: str, *, staff: bool = False):
    user, created = get_user_model().objects.get_or_create(username=username)
    if created:
        user.set_password(DEMO_PASSWORDS[username])
        user.email = f"{username}@example.com"
        user.is_staff = user.is_superuser = staff
        user.save()
    return user


@transaction.atomic
def load_tenants() -> None:
    _user("admin", staff=True)
    for slug, name in WORKSPACES.items():
        Workspace.objects.get_or_create(slug=slug, defaults={"name": name})
    for username, slug, role in MEMBERSHIPS:
        Membership.objects.get_or_create(
            user=_user(username), workspace=Workspace.objects.get(slug=slug), defaults={"role": role}
        )
