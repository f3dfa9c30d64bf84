from django.urls import path

from generation import views

urlpatterns = [
    path("studies/<int:pk>/generation/", views.study_generation, name="study-generation"),
    path("studies/<int:pk>/generation/pull/", views.study_generation_pull, name="study-generation-pull"),
    path("generation/jobs/<int:pk>/", views.generation_job, name="generation-job"),
    path("generation/jobs/<int:pk>/<str:verb>/", views.generation_job_action, name="generation-job-action"),
]
