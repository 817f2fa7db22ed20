from django.contrib import admin
from django.utils import timezone

from billing.models import GpuRate, PriceTable


class GpuRateInline(admin.TabularInline):
    model = GpuRate
    extra = 1


@admin.register(PriceTable)
class PriceTableAdmin(admin.ModelAdmin):
    """Tables in force or past are read-only: prices change only through a new version."""

    list_display = ["name", "currency", "effective_from", "cpu_core_hour", "memory_gib_hour", "offpeak_windows"]
    inlines = [GpuRateInline]

    def _in_force_or_past(self, obj) -> bool:
        return obj is not None and obj.effective_from <= timezone.now()

    def has_change_permission(self, request, obj=None):
        return not self._in_force_or_past(obj) and super().has_change_permission(request, obj)

    def has_delete_permission(self, request, obj=None):
        return not self._in_force_or_past(obj) and super().has_delete_permission(request, obj)
