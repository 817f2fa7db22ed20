"""Why a job waits, in the reader's language: the table lives in scheduling.reasons, where the spec
readers use it too; pages and the API import it from here."""

from scheduling.reasons import REASONS, job_reason, reason_text

__all__ = ["REASONS", "job_reason", "reason_text"]
