from django.contrib import admin

from reports.models import ReportJob


@admin.register(ReportJob)
class ReportJobAdmin(admin.ModelAdmin[ReportJob]):
    """Report jobs, read in the admin like exports (made from the Report tab and the API)."""

    list_display = ("study", "format", "correction", "status", "requested_by", "created_at")
    list_filter = ("status", "format")
    list_select_related = ("study", "requested_by")
    raw_id_fields = ("study", "requested_by")
