from django.urls import path

from mitigation import api

urlpatterns = [
    path("studies/<int:pk>/intermit/", api.StudyInterMitPlanView.as_view(), name="api-intermit-plan"),
    path("studies/<int:pk>/intermit/loops/", api.StudyInterMitLoopsView.as_view(), name="api-intermit-loops"),
    path("intermit/loops/<int:pk>/", api.InterMitLoopView.as_view(), name="api-intermit-loop"),
    path(
        "intermit/loops/<int:pk>/<str:verb>/",
        api.InterMitLoopActionView.as_view(),
        name="api-intermit-loop-action",
    ),
]
