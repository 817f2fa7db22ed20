"""A pending job's place in its queue and expected start, as fields of the job detail API."""

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from scheduling.api import PendingOutlook, pending_outlook, position_note, window_summary


class ExpectedStartOutput(serializers.Serializer):
    earliest = serializers.DateTimeField(allow_null=True, help_text="Soonest expected start; null: unknown")
    latest = serializers.DateTimeField(allow_null=True, help_text="Latest expected start; null: unknown")
    open_ended = serializers.BooleanField(
        read_only=True, help_text="True: not before `earliest`, with no bound after it (the start depends on "
                                  "jobs ending and others arriving); `latest` is null")
    summary = serializers.SerializerMethodField()

    def get_summary(self, window) -> str:
        """The range in words, in the request's language (its times in the server's zone)."""
        return window_summary(window)


# `queue_position` and `expected_start` of a pending job; null for a job that is not pending. (A comment,
# not a docstring: the API schema would take it for the description of the serializers built on it.)
class PositionNoteOutput(serializers.Serializer):
    code = serializers.ChoiceField(choices=["backfill_may_pass", "gpus_reserved"],
                                   help_text="backfill_may_pass: smaller jobs may start first while this gang "
                                             "waits for GPUs; gpus_reserved: nodes are held for it")
    gpus = serializers.IntegerField(help_text="Whole GPUs the gang needs at once")
    text = serializers.CharField(help_text="The note in the request's language")


class PendingOutlookOutput(serializers.Serializer):
    queue_position = serializers.SerializerMethodField()
    expected_start = serializers.SerializerMethodField()
    position_note = serializers.SerializerMethodField()

    def _outlook(self, job) -> PendingOutlook | None:
        found = getattr(self, "_outlooks", None)
        if found is None:
            found = self._outlooks = {}
        if job.pk not in found:
            found[job.pk] = pending_outlook([job]).get(job.pk)
        return found[job.pk]

    def get_queue_position(self, job) -> int | None:
        """1-based place in the order the scheduler will try the queue's pending jobs (priority, then
        submission); a smaller job further back may start first when it fits and this one does not (backfill)."""
        outlook = self._outlook(job)
        return None if outlook is None else outlook.position

    @extend_schema_field(ExpectedStartOutput(allow_null=True))
    def get_expected_start(self, job):
        """When the scheduler should place the job, as a range from running it forward; null: unknown."""
        outlook = self._outlook(job)
        if outlook is None or outlook.expected_start is None:
            return None
        return ExpectedStartOutput(outlook.expected_start).data

    @extend_schema_field(PositionNoteOutput(allow_null=True))
    def get_position_note(self, job):
        """What the position means for a pending gang: smaller jobs may pass it, or GPUs are reserved; null: nothing."""
        note = position_note(job)
        if note is None:
            return None
        return PositionNoteOutput({"code": note.code, "gpus": note.params["gpus"], "text": note.text}).data
