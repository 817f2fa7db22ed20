"""`{% field_errors errors "name" %}`: a form field's messages, rendered beside that field."""

from django import template

register = template.Library()


@register.inclusion_tag("console/_errors.html")
def field_errors(errors, field):
    return {"field": field, "msgs": (errors or {}).get(field, [])}
