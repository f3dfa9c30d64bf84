from django.urls import path

from annotations import agreement_views, annotate_views, batch_views, compare_views, findings_views, views

urlpatterns = [
    path("studies/<int:pk>/agreement/", agreement_views.study_agreement, name="study-agreement"),
    path("studies/<int:pk>/consensus/", agreement_views.study_consensus, name="study-consensus"),
    path("studies/<int:pk>/adjudicate/", agreement_views.adjudication_list, name="adjudication-queue"),
    path("studies/<int:pk>/adjudicate/<int:item_id>/", agreement_views.adjudication_item, name="adjudication-item"),
    path("studies/new/", views.study_create, name="study-create"),
    path("studies/<int:pk>/", views.study_detail, name="study-detail"),
    path("studies/<int:pk>/settings/", views.study_settings, name="study-settings"),
    path("studies/<int:pk>/items/", views.study_items, name="study-items"),
    path("studies/<int:pk>/import/items/", views.study_import_items, name="study-import-items"),
    path("studies/<int:pk>/import/annotations/", views.study_import_annotations, name="study-import-annotations"),
    path("studies/<int:pk>/export/<str:fmt>/", views.study_export, name="study-export"),
    path("studies/<int:pk>/exports/<int:job_id>/", views.export_download, name="study-export-download"),
    path("studies/<int:pk>/enroll/", views.study_enroll, name="study-enroll"),
    path("studies/<int:pk>/share/", views.study_share, name="study-share"),
    path("items/<int:pk>/images/<int:position>/", views.item_image, name="item-image"),
    path("studies/<int:pk>/findings/", findings_views.study_findings, name="study-findings"),
    path("studies/<int:pk>/findings/<slug:key>.csv", findings_views.study_findings_csv, name="study-findings-csv"),
    path("studies/<int:pk>/findings/figures/<slug:key>.<str:fmt>", findings_views.study_findings_figure,
         name="study-findings-figure"),
    # Comparisons across studies (compare_views.py)
    path("compare/", compare_views.compare, name="compare"),
    path("compare/csv/", compare_views.compare_csv, name="compare-csv"),
    path("compare/figures/<slug:key>.<str:fmt>", compare_views.compare_figure, name="compare-figure"),
    # Annotators (annotate_views.py)
    path("annotate/", annotate_views.dashboard, name="annotate-dashboard"),
    path("annotate/studies/<int:pk>/next/", annotate_views.study_next, name="annotate-next"),
    path("annotate/studies/<int:pk>/mine/", annotate_views.mine, name="annotate-mine"),
    path("annotate/assignments/<int:pk>/", annotate_views.task, name="annotate-task"),
    path("annotate/assignments/<int:pk>/skip/", annotate_views.skip, name="annotate-skip"),
    path("annotate/assignments/<int:pk>/reveal/", annotate_views.reveal, name="annotate-reveal"),
    path("items/<int:pk>/images/<int:position>/display/", annotate_views.item_image_display,
         name="item-image-display"),
    # Batches (batch_views.py)
    path("studies/<int:pk>/progress/", batch_views.progress, name="study-progress"),
    path("studies/<int:pk>/progress.json", batch_views.progress_json, name="study-progress-json"),
    path("studies/<int:pk>/progress.csv", batch_views.progress_csv, name="study-progress-csv"),
    path("studies/<int:pk>/run/", batch_views.study_run, name="study-run"),
    path("studies/<int:pk>/enroll-pool/", batch_views.enroll_pool, name="study-enroll-pool"),
]
