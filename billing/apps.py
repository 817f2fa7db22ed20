from django.apps import AppConfig


class BillingConfig(AppConfig):
    name = "billing"
    verbose_name = "Prices and billing"

    def ready(self):
        from billing import quote_texts, quotes
        from billing.ledger.jobs import price_finished_job
        from billing.selectors import jobs_off_peak_at, off_peak_at
        from scheduling.signals import job_finished, job_off_peak_asked, off_peak_asked

        job_finished.connect(price_finished_job, dispatch_uid="billing-final-cost")
        off_peak_asked.connect(off_peak_at, dispatch_uid="billing-off-peak-windows")
        job_off_peak_asked.connect(jobs_off_peak_at, dispatch_uid="billing-job-off-peak-windows")
        quotes.render_notes_with(quote_texts.english_note, quote_texts.english_tag)  # a quote's English
