from django.urls import path

from labelling import views

urlpatterns = [
    path("studies/<int:pk>/labelling/", views.study_labelling, name="study-labelling"),
    path(
        "studies/<int:pk>/labelling/features/", views.study_feature_labelling, name="study-labelling-features"
    ),
    path("labelling/jobs/<int:pk>/cancel/", views.labelling_job_cancel_view, name="labelling-job-cancel"),
    path("labellers/", views.labellers, name="labellers"),
    path("labellers/<int:pk>/", views.labeller_edit, name="labeller-edit"),
    path("labellers/<int:pk>/state/", views.labeller_toggle, name="labeller-toggle"),
]
