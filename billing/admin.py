from django.contrib import admin

from billing.forms import PriceTableForm
from billing.models import ChargeLine, ClosedPeriod, GpuRate, NodeToken, PriceTable, StorageRate, UsageSample
from scheduling.api import ReadOnlyAdmin, clock


class GpuRateInline(admin.TabularInline):
    model = GpuRate
    extra = 1


class StorageRateInline(admin.TabularInline):
    model = StorageRate
    extra = 1


@admin.register(PriceTable)
class PriceTableAdmin(admin.ModelAdmin):
    """Tables in force or past are read-only: prices change only through a new version."""

    form = PriceTableForm
    list_display = ["name", "currency", "effective_from", "cpu_core_hour", "memory_gib_hour", "offpeak_windows"]
    inlines = [GpuRateInline, StorageRateInline]

    def _in_force_or_past(self, obj) -> bool:
        return obj is not None and obj.effective_from <= clock.now()

    def has_change_permission(self, request, obj=None):
        return not self._in_force_or_past(obj) and super().has_change_permission(request, obj)

    def has_delete_permission(self, request, obj=None):
        return not self._in_force_or_past(obj) and super().has_delete_permission(request, obj)


@admin.register(NodeToken)
class NodeTokenAdmin(admin.ModelAdmin):
    """Operators create a token per node; the raw value is shown once, after saving."""

    list_display = ["node", "hint", "created", "last_used", "revoked"]
    list_filter = ["revoked"]
    fields = ["node", "hint", "created", "last_used", "revoked"]
    readonly_fields = ["hint", "created", "last_used"]
    actions = ["revoke"]

    def save_model(self, request, obj, form, change):
        if change:
            return super().save_model(request, obj, form, change)
        from billing.metering.tokens import create_node_token

        token, raw = create_node_token(obj.node)
        obj.pk, obj.digest, obj.hint = token.pk, token.digest, token.hint
        self.message_user(request, f"Token for {obj.node}: {raw} (copy it now: it is not shown again)")

    @admin.action(description="Revoke the selected tokens")
    def revoke(self, request, queryset):
        queryset.filter(revoked__isnull=True).update(revoked=clock.now())


class BilledRecordAdmin(ReadOnlyAdmin):
    """Billed records are read-only here as everywhere: operators look, corrections are adjustments
    (the console's Adjustments page), and nothing is added or deleted past the services."""


@admin.register(ChargeLine)
class ChargeLineAdmin(BilledRecordAdmin):
    list_display = ["hour", "workspace", "category", "job", "job_name", "cost", "currency", "provisional"]
    list_filter = ["category", "provisional", "currency", "workspace"]
    search_fields = ["job_name", "reason", "workspace__slug"]
    list_select_related = ["workspace", "job"]
    date_hierarchy = "hour"


@admin.register(UsageSample)
class UsageSampleAdmin(BilledRecordAdmin):
    list_display = ["ts", "node", "gpu_index", "pod_uid", "gpu_util_pct", "mem_used_mib", "interval_s"]
    list_select_related = ["node"]
    show_full_result_count = False  # millions of rows: no second COUNT(*) per page
    search_fields = ["node__name", "gpu_uuid", "pod_uid"]
    date_hierarchy = "ts"


@admin.register(ClosedPeriod)
class ClosedPeriodAdmin(BilledRecordAdmin):
    list_display = ["workspace", "period", "total", "currency", "closed_at", "closed_by"]
    list_filter = ["workspace"]
