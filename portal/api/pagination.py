"""Limit/offset pages of at most 500 rows; a limit or offset that is not a whole number, or an offset
too large for the database, is a 400 (DRF would silently fall back to the defaults). So is a query
parameter the list does not know: a misspelt filter must not quietly list everything."""

from rest_framework.exceptions import ValidationError
from rest_framework.pagination import LimitOffsetPagination


class Pagination(LimitOffsetPagination):
    max_limit = 500
    max_offset = 2**31 - 1

    def _whole_number(self, request, name: str, minimum: int) -> int | None:
        raw = request.query_params.get(name)
        if raw is None or raw == "":
            return None
        try:
            value = int(raw, 10)
        except ValueError:
            raise ValidationError({name: "must be a whole number"}) from None
        if value < minimum:
            raise ValidationError({name: f"must be at least {minimum}"})
        return value

    def paginate_queryset(self, queryset, request, view=None):
        known = {self.limit_query_param, self.offset_query_param, *getattr(view, "filter_params", ())}
        unknown = sorted(set(request.query_params) - known)
        if unknown:
            raise ValidationError({name: f"unknown query parameter; this list takes {', '.join(sorted(known))}"
                                   for name in unknown})
        return super().paginate_queryset(queryset, request, view)

    def get_limit(self, request):
        limit = self._whole_number(request, self.limit_query_param, 1)
        return self.default_limit if limit is None else min(limit, self.max_limit)

    def get_offset(self, request):
        offset = self._whole_number(request, self.offset_query_param, 0) or 0
        if offset > self.max_offset:
            raise ValidationError({self.offset_query_param: f"at most {self.max_offset}"})
        return offset

    def get_schema_operation_parameters(self, view):
        parameters = super().get_schema_operation_parameters(view)
        bounds = {self.limit_query_param: {"minimum": 1}, self.offset_query_param: {"minimum": 0, "maximum": self.max_offset}}
        for parameter in parameters:
            parameter["schema"].update(bounds.get(parameter["name"], {}))
        return parameters
