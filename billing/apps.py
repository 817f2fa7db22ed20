from django.apps import AppConfig


class BillingConfig(AppConfig):
    name = "billing"
    verbose_name = "Prices and billing"

    def ready(self):
        from django.db.models.signals import post_delete, post_save

        from billing import quote_texts, quotes
        from billing.ledger.jobs import price_finished_job
        from billing.models import PriceTable, WorkspaceCurrency
        from billing.offpeak_sync import write_off_peak_calendars, write_workspace_calendar
        from scheduling.api import job_finished

        job_finished.connect(price_finished_job, dispatch_uid="billing-final-cost")
        for signal, event in ((post_save, "save"), (post_delete, "delete")):  # the calendar the scheduler reads
            signal.connect(write_off_peak_calendars, sender=PriceTable, dispatch_uid=f"billing-off-peak-{event}")
            signal.connect(write_workspace_calendar, sender=WorkspaceCurrency,
                           dispatch_uid=f"billing-workspace-calendar-{event}")
        quotes.render_notes_with(quote_texts.english_note, quote_texts.english_tag)  # a quote's English
