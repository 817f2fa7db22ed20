"""/scim/v2/: django-scim2's views behind a SCIM token (nothing else opens them: not an API token, not a
session), each request in one transaction, every refusal in SCIM's error shape."""

from __future__ import annotations

import json
import logging

from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import DatabaseError, IntegrityError, transaction
from django.http import HttpResponse
from django.utils.decorators import method_decorator
from django.views.decorators.csrf import csrf_exempt
from django.views.generic import View
from django_scim import constants, exceptions
from django_scim import views as scim_views
from scim2_filter_parser.parser import SCIMParserError

from portal.credentials import presented
from portal.scim import services
from portal.scim.adapters import ScimGroupAdapter, ScimUserAdapter, bad, by_id, page, visible_users
from portal.scim.errors import scim_error
from portal.scim.models import ScimGroup

log = logging.getLogger(__name__)


def _answer(document: dict, status: int = 200, location: str = "") -> HttpResponse:
    response = HttpResponse(json.dumps(document), status=status, content_type=constants.SCIM_CONTENT_TYPE)
    if location:
        response["Location"] = location
    return response


class ScimTokenRequired:
    """First in each view's bases: the token, the transaction and the error shape."""

    @method_decorator(csrf_exempt)  # a bearer token, never a cookie, opens it: nothing to forge
    def dispatch(self, request, *args, **kwargs):
        if not settings.SCIM_ENABLED:
            return scim_error(404, "SCIM provisioning is off on this platform (SCIM_ENABLED)")
        found = presented(request.META)
        token = services.token_for(found.token) if found is not None and not found.malformed else None
        if token is None:
            response = scim_error(401, "a SCIM token is required (Authorization: Bearer scim_…)")
            response["WWW-Authenticate"] = 'Bearer realm="scim"'
            return response
        self.actor = services.ScimActor(token)
        if not self.implemented:
            return scim_error(501, "not implemented here")
        if request.method.lower() not in self.http_method_names:
            return scim_error(405, f"{request.method} is not allowed here")
        try:
            with transaction.atomic():
                response = View.dispatch(self, request, *args, **kwargs)
            if response.status_code == 404 and not response.content:  # the library's own, bare (an unknown schema)
                return scim_error(404, f"{request.path[:100]} is not here")
            return response
        except exceptions.SCIMException as error:
            return scim_error(int(error.status), str(error.detail), error.scim_type)
        except IntegrityError:  # a name taken by a concurrent call since it was checked
            return scim_error(409, "the resource conflicts with one made meanwhile; retry", "uniqueness")
        except (ValueError, TypeError, AttributeError, KeyError) as error:
            # a body of a shape no check above foresaw: still the client's to fix, and nothing was written
            log.warning("SCIM %s %s refused: %r", request.method, request.path, error)
            return scim_error(400, "the request does not have the shape SCIM expects", "invalidValue")

    def load_body(self, body: bytes) -> dict:
        try:
            document = json.loads(body.decode("utf-8").strip() or "{}")
        except (UnicodeDecodeError, json.JSONDecodeError):
            raise bad("the body is not JSON", "invalidSyntax") from None
        if not isinstance(document, dict) or not document:
            raise bad("the body must be a JSON object", "invalidSyntax")
        return document


class _Resources(ScimTokenRequired):
    adapter = None

    def queryset(self):
        raise NotImplementedError

    def get_object(self):
        found = by_id(self.queryset(), self.kwargs.get("uuid"))
        if found is None:
            raise exceptions.NotFoundError(str(self.kwargs.get("uuid"))[:40])
        return found

    def adapt(self, obj):
        return self.adapter(obj, request=self.request, actor=self.actor)

    def get(self, request, uuid=None, *args, **kwargs):
        if uuid:
            adapted = self.adapt(self.get_object())
            return _answer(adapted.to_dict(), location=adapted.location)
        start, count = page(request)
        rows = self.queryset()
        if query := request.GET.get("filter"):
            try:
                ids = [row.pk for row in self.__class__.parser_getter().search(query, request)]
            except (ValueError, SCIMParserError, DatabaseError) as error:
                raise bad(f"invalid filter: {str(error)[:200]}", "invalidFilter") from None
            rows = rows.filter(pk__in=ids)
        rows = rows.order_by("pk")
        chosen = rows[start - 1:start - 1 + count]
        return _answer({"schemas": [constants.SchemaURI.LIST_RESPONSE], "totalResults": rows.count(),
                        "itemsPerPage": len(chosen), "startIndex": start,
                        "Resources": [self.adapt(row).to_dict() for row in chosen]})

    def post(self, request, *args, **kwargs):
        body = self.load_body(request.body)
        adapted = self.adapt(self.new(body))
        adapted.from_dict(body)
        adapted.save()
        return _answer(adapted.to_dict(), status=201, location=adapted.location)

    def put(self, request, *args, **kwargs):
        adapted = self.adapt(self.get_object())
        adapted.from_dict(self.load_body(request.body))
        adapted.save()
        return _answer(adapted.to_dict(), location=adapted.location)

    def patch(self, request, *args, **kwargs):
        adapted = self.adapt(self.get_object())
        adapted.patch(self.load_body(request.body))
        return _answer(adapted.to_dict(), location=adapted.location)

    def delete(self, request, *args, **kwargs):
        self.adapt(self.get_object()).delete()
        return HttpResponse(status=204)


class UsersView(_Resources, scim_views.UsersView):
    adapter = ScimUserAdapter

    def queryset(self):
        return visible_users()

    def new(self, body: dict):
        """A new account; or, for the userName of one SCIM deleted, that account again."""
        name = body.get("userName")
        again = (get_user_model().objects.filter(username__iexact=name, scim_account__deleted__isnull=False).first()
                 if isinstance(name, str) else None)
        return again or get_user_model()()


class GroupsView(_Resources, scim_views.GroupsView):
    adapter = ScimGroupAdapter

    def queryset(self):
        return ScimGroup.objects.all()

    def new(self, body: dict):
        return ScimGroup()


class ServiceProviderConfigView(ScimTokenRequired, scim_views.ServiceProviderConfigView):
    pass


class ResourceTypesView(ScimTokenRequired, scim_views.ResourceTypesView):
    pass


class SchemasView(ScimTokenRequired, scim_views.SchemasView):
    pass


class NotImplementedView(ScimTokenRequired, scim_views.SCIMView):
    implemented = False


class NotFoundView(ScimTokenRequired, scim_views.SCIMView):
    http_method_names = ["get", "post", "put", "patch", "delete"]

    def dispatch_any(self, request, *args, **kwargs):
        raise exceptions.NotFoundError(request.path[:100])

    get = post = put = patch = delete = dispatch_any
