"""A pending job's place in its queue and expected start, as fields of the job detail API."""

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from scheduling.api import PendingOutlook, pending_outlook


class ExpectedStartOutput(serializers.Serializer):
    earliest = serializers.DateTimeField(allow_null=True, help_text="Soonest expected start; null: unknown")
    latest = serializers.DateTimeField(allow_null=True, help_text="Latest expected start; null: unknown")


# `queue_position` and `expected_start` of a pending job; null for a job that is not pending. (A comment,
# not a docstring: the API schema would take it for the description of the serializers built on it.)
class PendingOutlookOutput(serializers.Serializer):
    queue_position = serializers.SerializerMethodField()
    expected_start = serializers.SerializerMethodField()

    def _outlook(self, job) -> PendingOutlook | None:
        found = getattr(self, "_outlooks", None)
        if found is None:
            found = self._outlooks = {}
        if job.pk not in found:
            found[job.pk] = pending_outlook([job]).get(job.pk)
        return found[job.pk]

    def get_queue_position(self, job) -> int | None:
        """1-based place among the queue's pending jobs in the scheduler's order (priority, then submission)."""
        outlook = self._outlook(job)
        return None if outlook is None else outlook.position

    @extend_schema_field(ExpectedStartOutput(allow_null=True))
    def get_expected_start(self, job):
        """When the scheduler should place the job, as a range from running it forward; null: unknown."""
        outlook = self._outlook(job)
        if outlook is None or outlook.expected_start is None:
            return None
        return ExpectedStartOutput(outlook.expected_start).data
