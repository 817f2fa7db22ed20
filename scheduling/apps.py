from django.apps import AppConfig


class SchedulingConfig(AppConfig):
    name = "scheduling"
    verbose_name = "Cluster and jobs"

    def ready(self) -> None:
        from scheduling import reasons
        from scheduling.core import reasons as core_reasons

        core_reasons.render_reasons_with(reasons.english)   # the core's reasons read in the catalogue's English
