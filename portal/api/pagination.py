"""Limit/offset pages of at most 500 rows; an offset too large for the database is a 400."""

from rest_framework.exceptions import ValidationError
from rest_framework.pagination import LimitOffsetPagination


class Pagination(LimitOffsetPagination):
    max_limit = 500
    max_offset = 2**31 - 1

    def get_offset(self, request):
        offset = super().get_offset(request)
        if offset > self.max_offset:
            raise ValidationError({self.offset_query_param: f"at most {self.max_offset}"})
        return offset
