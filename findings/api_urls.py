from django.urls import path

from findings import api

urlpatterns = [
    path("studies/<int:pk>/metrics/", api.StudyMetricsView.as_view(), name="api-study-metrics"),
    path("compare/", api.CompareView.as_view(), name="api-compare"),
]
