from django.urls import path

from reports import api

urlpatterns = [
    path("studies/<int:pk>/report/", api.StudyReportView.as_view(), name="api-study-report"),
    path(
        "studies/<int:pk>/report/<int:job_id>/", api.StudyReportJobView.as_view(), name="api-study-report-job"
    ),
    path(
        "studies/<int:pk>/report/<int:job_id>/download/",
        api.StudyReportDownloadView.as_view(),
        name="api-study-report-download",
    ),
    path(
        "studies/<int:pk>/report/<int:job_id>/supplement/",
        api.StudyReportSupplementView.as_view(),
        name="api-study-report-supplement",
    ),
]
