from django.urls import path

from annotations import findings_views, views

urlpatterns = [
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
]
