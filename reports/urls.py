from django.urls import path

from reports import views

urlpatterns = [
    path("studies/<int:pk>/report/", views.study_report, name="study-report"),
    path("studies/<int:pk>/report/preview/", views.study_report_preview, name="study-report-preview"),
    path("studies/<int:pk>/report/make/", views.study_report_make, name="study-report-make"),
    path(
        "studies/<int:pk>/report/<int:job_id>/download/",
        views.study_report_download,
        name="study-report-download",
    ),
    path(
        "studies/<int:pk>/report/<int:job_id>/supplement/",
        views.study_report_supplement,
        name="study-report-supplement",
    ),
]
