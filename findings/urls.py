from django.urls import path

from findings.views import compare, findings

urlpatterns = [
    path("studies/<int:pk>/findings/", findings.study_findings, name="study-findings"),
    path("studies/<int:pk>/findings/<slug:key>.csv", findings.study_findings_csv, name="study-findings-csv"),
    path(
        "studies/<int:pk>/findings/reliability/",
        findings.study_findings_reliability,
        name="study-findings-reliability",
    ),
    path("studies/<int:pk>/findings/sample/", findings.study_findings_sample, name="study-findings-sample"),
    path(
        "studies/<int:pk>/findings/stereotypes/",
        findings.study_stereotypes_import,
        name="study-stereotypes-import",
    ),
    path(
        "studies/<int:pk>/findings/figures/<slug:key>.<str:fmt>",
        findings.study_findings_figure,
        name="study-findings-figure",
    ),
    path(
        "studies/<int:pk>/findings/features/import/",
        findings.study_features_import,
        name="study-features-import",
    ),
    path(
        "studies/<int:pk>/findings/features.jsonl",
        findings.study_features_export,
        name="study-features-export",
    ),
    # Comparisons across studies (views/compare.py)
    path("compare/", compare.compare, name="compare"),
    path("compare/csv/", compare.compare_csv, name="compare-csv"),
    path("compare/figures/<slug:key>.<str:fmt>", compare.compare_figure, name="compare-figure"),
]
