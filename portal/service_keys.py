"""An inference service's own API keys (portal.models.ServiceKey): members who may submit make, list and
revoke them on the service's page, the API or `gpuctl serve keys`; applications call the service's
endpoint with one (`Authorization: Bearer gsk_...` or `api-key: gsk_...`, as OpenAI clients send them).

A key opens its one service: the REST API does not know it (its prefix is not a personal token's) and
`/serve/` refuses it for any other service, in its workspace or another, with the same 404 as for a
service that does not exist. Each write is one audit line (source tenant) naming the service and the key,
never the key's value; "last used" is kept to the minute. Limits: see portal.serve_limits."""

from __future__ import annotations

from datetime import datetime, timedelta

from django.db import transaction
from django.db.models import QuerySet
from django.utils.translation import gettext

from billing.models import hash_token
from portal import selectors as portal_selectors
from portal.console import audit
from portal.console.models import AuditEntry
from portal.models import ServiceKey
from scheduling.api import DomainError, Forbidden, clock
from scheduling.models import Job, ServiceScale

TENANT = AuditEntry.Source.TENANT
KEY_DAYS = (0, 1, 7, 30, 90, 180, 365)  # 0: never expires (a deployed application's key)
LAST_USED_RESOLUTION = timedelta(minutes=1)
MAX_REQUESTS_PER_MINUTE = 1_000_000
MAX_TOKENS_PER_MINUTE = 1_000_000_000


class NoSuchKey(DomainError):
    status = 404
    title = "Not found"
    field = "key"


class KeyRefused(DomainError):
    """A key that is unknown, revoked or expired: 401 at /serve/."""

    status = 401
    title = "Not allowed"


def is_service_key(raw: str) -> bool:
    return raw.startswith(ServiceKey.PREFIX)


def require_submitter(user, job: Job) -> None:
    membership = portal_selectors.membership_for(user, job.workspace)
    if membership is None or not membership.can_submit:
        raise Forbidden(gettext("your role in %(workspace)s may not manage the keys of its services") % {
            "workspace": job.workspace.slug})


def keys_of(job: Job) -> QuerySet[ServiceKey]:
    """Every key of the service, the revoked ones too (newest first)."""
    return ServiceKey.objects.filter(job=job).select_related("created_by").order_by("-created", "-id")


def _limit(value: object, field: str, most: int, errors: dict) -> int | None:
    if value in (None, ""):
        return None
    try:
        number = int(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        number = None
    if number is None or isinstance(value, bool) or str(number) != str(value).strip() or not 1 <= number <= most:
        errors[field] = [gettext("a whole number from 1 to %(most)s, or empty for none") % {"most": most}]
        return None
    return number


def check_limits(requests_per_minute: object, tokens_per_minute: object) -> tuple[int | None, int | None]:
    """Limits as given by a form or the API: whole numbers, or empty for none; refused by field."""
    errors: dict[str, list[str]] = {}
    requests = _limit(requests_per_minute, "requests_per_minute", MAX_REQUESTS_PER_MINUTE, errors)
    tokens = _limit(tokens_per_minute, "tokens_per_minute", MAX_TOKENS_PER_MINUTE, errors)
    if errors:
        raise DomainError(errors)
    return requests, tokens


@transaction.atomic
def create_key(user, job: Job, name: object, *, days: object = 90, requests_per_minute: object = None,
               tokens_per_minute: object = None) -> tuple[ServiceKey, str]:
    """A new key of the service; returns it and its raw value, which is never stored and shown only once.
    Every bad field is refused at once, by field, and nothing is made."""
    require_submitter(user, job)
    errors: dict[str, list[str]] = {}
    name = name.strip() if isinstance(name, str) else ""
    if not name:
        errors["name"] = [gettext("a key needs a name")]
    elif "\x00" in name or len(name) > 100:
        errors["name"] = [gettext("at most 100 characters, no NUL")]
    try:
        days = int(days)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        days = None
    if days not in KEY_DAYS:
        errors["days"] = [gettext("choose a lifetime of %(days)s days (0: it never expires)") % {
            "days": ", ".join(map(str, KEY_DAYS))}]
    try:
        requests, tokens = check_limits(requests_per_minute, tokens_per_minute)
    except DomainError as error:
        errors.update(error.errors)
        requests = tokens = None
    if errors:
        raise DomainError(errors)
    if job.is_final:
        raise DomainError({"key": [gettext("service %(name)s has ended") % {"name": job.name}]})
    now = clock.now()
    raw = ServiceKey.new_raw_value()
    key = ServiceKey.objects.create(job=job, name=name, digest=hash_token(raw), hint=raw[:10], created=now,
                                    created_by=user, expires=now + timedelta(days=days) if days else None,
                                    requests_per_minute=requests, tokens_per_minute=tokens)
    audit.record(user, "create", key, target_repr=f"{job.workspace.slug}/{job.name}/{key.name}", changes={
        "expires": [None, key.expires], "hint": [None, key.hint], "requests_per_minute": [None, requests],
        "tokens_per_minute": [None, tokens]}, source=TENANT)
    return key, raw


@transaction.atomic
def revoke_key(user, job: Job, key_id: object) -> ServiceKey:
    """Refused from now on, also in a stream that is open (closed at its next chunk); another service's
    key is a 404."""
    require_submitter(user, job)
    try:
        key = keys_of(job).select_for_update(of=("self",)).get(pk=int(key_id))  # type: ignore[arg-type]
    except (ServiceKey.DoesNotExist, TypeError, ValueError, OverflowError):
        raise NoSuchKey(gettext("service %(name)s has no key %(key)s") % {
            "name": job.name, "key": repr(str(key_id)[:20])}) from None
    if key.revoked is None:
        key.revoked = clock.now()
        key.save(update_fields=["revoked"])
        audit.record(user, "revoke", key, target_repr=f"{job.workspace.slug}/{job.name}/{key.name}",
                     changes={"revoked": [None, key.revoked]}, source=TENANT)
    return key


def _when(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%d %H:%M UTC")


def authenticate(raw: str) -> ServiceKey:
    """The key `raw` is, with its service and workspace: KeyRefused when unknown, revoked or expired.
    Marks its last use (to the minute)."""
    key = ServiceKey.objects.select_related("job__workspace").filter(digest=hash_token(raw)).first()
    if key is None:
        raise KeyRefused(gettext("invalid service key: make one on the service's page"))
    now = clock.now()
    if key.revoked is not None:
        raise KeyRefused(gettext("service key %(hint)s… was revoked on %(when)s") % {
            "hint": key.hint, "when": _when(key.revoked)})
    if key.expires is not None and key.expires <= now:
        raise KeyRefused(gettext("service key %(hint)s… expired on %(when)s") % {
            "hint": key.hint, "when": _when(key.expires)})
    if key.last_used is None or now - key.last_used >= LAST_USED_RESOLUTION:
        ServiceKey.objects.filter(pk=key.pk).update(last_used=now)
    return key


def still_valid(key_id: int) -> bool:
    """Whether the key may still be used now (a stream checks it as it goes)."""
    key = ServiceKey.objects.filter(pk=key_id).only("revoked", "expires").first()
    return key is not None and not key.refused_at(clock.now())


def key_section(job) -> dict:
    """What the service page's keys section shows: the keys (revoked ones too) and the service's limits."""
    scale = ServiceScale.objects.filter(job=job).first()
    return {"keys": list(keys_of(job)), "key_days": KEY_DAYS, "limits": scale}
