from django.urls import path

from labelling import views

urlpatterns = [
    path("studies/<int:pk>/labelling/", views.study_labelling, name="study-labelling"),
    path("labelling/jobs/<int:pk>/cancel/", views.labelling_job_cancel_view, name="labelling-job-cancel"),
]
