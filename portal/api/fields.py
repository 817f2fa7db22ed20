"""Input fields the API shares, each declaring in the OpenAPI schema exactly what it accepts."""

from decimal import ROUND_HALF_UP, Decimal

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers
from rest_framework.exceptions import ValidationError


@extend_schema_field({"oneOf": [{"type": "string"}, {"type": "object"}],
                      "description": "The task YAML as text, or a JSON object of the same fields"})
class SpecField(serializers.JSONField):
    """A task spec: YAML text or a JSON object, never null, a number or a list."""

    def to_internal_value(self, data):
        value = super().to_internal_value(data)
        if not isinstance(value, (str, dict)):
            raise ValidationError("spec must be YAML text or a JSON object")
        return value


MIN_DURATION_HOURS, MAX_DURATION_HOURS = Decimal("0.01"), Decimal("2160")


@extend_schema_field({"type": "number", "minimum": float(MIN_DURATION_HOURS), "maximum": float(MAX_DURATION_HOURS)})
class DurationHoursField(serializers.DecimalField):
    """Hours as a JSON number (a numeric string is still read, as older clients send it), rounded to the
    hundredth: any number within the bounds is taken, as the schema says."""

    def __init__(self, **kwargs):
        super().__init__(max_digits=None, decimal_places=None, min_value=MIN_DURATION_HOURS,
                         max_value=MAX_DURATION_HOURS, **kwargs)

    def to_internal_value(self, data):
        value = super().to_internal_value(data)
        # out of bounds (1e400 among them, too big to round): left as is for the bounds' validators to refuse
        if MIN_DURATION_HOURS <= value <= MAX_DURATION_HOURS:
            value = value.quantize(Decimal("0.01"), rounding=ROUND_HALF_UP)
        return value
