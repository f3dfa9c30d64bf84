from django.urls import path

from mitigation import views

urlpatterns = [
    path("studies/<int:pk>/intermit/", views.study_intermit, name="study-intermit"),
    path("intermit/loops/<int:pk>/", views.intermit_loop, name="intermit-loop"),
    path("intermit/loops/<int:pk>/<str:verb>/", views.intermit_loop_action, name="intermit-loop-action"),
]
