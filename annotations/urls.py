from django.urls import path

from annotations.views import (
    agreement,
    annotate,
    compare,
    findings,
    invitations,
    join,
    progress,
    quality,
    studies,
)

urlpatterns = [
    path("studies/<int:pk>/agreement/", agreement.study_agreement, name="study-agreement"),
    path("studies/<int:pk>/consensus/", agreement.study_consensus, name="study-consensus"),
    path("studies/<int:pk>/adjudicate/", agreement.adjudication_list, name="adjudication-queue"),
    path("studies/<int:pk>/adjudicate/<int:item_id>/", agreement.adjudication_item, name="adjudication-item"),
    path("studies/new/", studies.study_create, name="study-create"),
    path("studies/new/labelstudio/", studies.study_create_labelstudio, name="study-create-labelstudio"),
    path("studies/<int:pk>/", studies.study_detail, name="study-detail"),
    path("studies/<int:pk>/settings/", studies.study_settings, name="study-settings"),
    path("studies/<int:pk>/items/", studies.study_items, name="study-items"),
    path("studies/<int:pk>/import/items/", studies.study_import_items, name="study-import-items"),
    path(
        "studies/<int:pk>/import/annotations/",
        studies.study_import_annotations,
        name="study-import-annotations",
    ),
    path(
        "studies/<int:pk>/import/labelstudio/",
        studies.study_import_labelstudio,
        name="study-import-labelstudio",
    ),
    path("studies/<int:pk>/export/<str:fmt>/", studies.study_export, name="study-export"),
    path("studies/<int:pk>/exports/<int:job_id>/", studies.export_download, name="study-export-download"),
    path("studies/<int:pk>/enroll/", studies.study_enroll, name="study-enroll"),
    path("studies/<int:pk>/share/", studies.study_share, name="study-share"),
    path("items/<int:pk>/images/<int:position>/", studies.item_image, name="item-image"),
    path("studies/<int:pk>/findings/", findings.study_findings, name="study-findings"),
    path("studies/<int:pk>/findings/<slug:key>.csv", findings.study_findings_csv, name="study-findings-csv"),
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
    # Comparisons across studies (compare.py)
    path("compare/", compare.compare, name="compare"),
    path("compare/csv/", compare.compare_csv, name="compare-csv"),
    path("compare/figures/<slug:key>.<str:fmt>", compare.compare_figure, name="compare-figure"),
    # Annotators (annotate.py)
    path("annotate/", annotate.dashboard, name="annotate-dashboard"),
    path("annotate/studies/<int:pk>/next/", annotate.study_next, name="annotate-next"),
    path("annotate/studies/<int:pk>/mine/", annotate.mine, name="annotate-mine"),
    path("annotate/assignments/<int:pk>/", annotate.task, name="annotate-task"),
    path("annotate/assignments/<int:pk>/skip/", annotate.skip, name="annotate-skip"),
    path("annotate/assignments/<int:pk>/unskip/", annotate.skip_undo, name="annotate-skip-undo"),
    path("annotate/assignments/<int:pk>/ahead/", annotate.ahead, name="annotate-ahead"),
    path("annotate/assignments/<int:pk>/reveal/", annotate.reveal, name="annotate-reveal"),
    path(
        "items/<int:pk>/images/<int:position>/display/",
        annotate.item_image_display,
        name="item-image-display",
    ),
    # Batches (progress.py)
    path("studies/<int:pk>/progress/", progress.progress, name="study-progress"),
    path("studies/<int:pk>/progress.json", progress.progress_json, name="study-progress-json"),
    path("studies/<int:pk>/progress.csv", progress.progress_csv, name="study-progress-csv"),
    path("studies/<int:pk>/run/", progress.study_run, name="study-run"),
    path("studies/<int:pk>/enroll-pool/", progress.enroll_pool, name="study-enroll-pool"),
    # Crowd work: invitation links, joining, completion, payment records (invitations.py, join.py)
    path("studies/<int:pk>/invitations/", invitations.study_invitations, name="study-invitations"),
    path(
        "studies/<int:pk>/invitations/<int:invitation_id>/revoke/",
        invitations.invitation_revoke_view,
        name="study-invitation-revoke",
    ),
    path("studies/<int:pk>/payments.csv", invitations.payments_csv, name="study-payments-csv"),
    path("join/<str:token>/", join.join, name="join"),
    path("join/<str:token>/consent/", join.join_consent, name="join-consent"),
    path("join/<str:token>/begin/", join.join_begin, name="join-begin"),
    path("annotate/studies/<int:pk>/complete/", join.complete, name="annotate-complete"),
    # Quality control (quality.py; the per-annotator table is on the progress page)
    path("studies/<int:pk>/quality/", quality.study_quality, name="study-quality"),
    path("studies/<int:pk>/quality.json", quality.study_quality_json, name="study-quality-json"),
    path("studies/<int:pk>/controls/import/", quality.controls_upload, name="study-controls-upload"),
    path("studies/<int:pk>/items/<int:item_id>/control/", quality.item_control, name="study-item-control"),
    path(
        "studies/<int:pk>/items/<int:item_id>/control/remove/",
        quality.item_control_remove,
        name="study-item-control-remove",
    ),
    path(
        "studies/<int:pk>/annotators/<int:annotator_id>/exclude/",
        quality.annotator_exclude,
        name="study-annotator-exclude",
    ),
    path(
        "studies/<int:pk>/annotators/<int:annotator_id>/reinstate/",
        quality.annotator_reinstate,
        name="study-annotator-reinstate",
    ),
]
