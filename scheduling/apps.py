from django.apps import AppConfig


class SchedulingConfig(AppConfig):
    name = "scheduling"
    verbose_name = "Cluster and jobs"

    def ready(self) -> None:
        from scheduling import reasons
        from scheduling.core import fit

        fit.render_reasons_with(reasons.english)   # the core's reasons read in the catalogue's English
