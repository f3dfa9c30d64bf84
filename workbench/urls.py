from django.contrib import admin
from django.urls import include, path
from drf_spectacular.views import SpectacularAPIView, SpectacularRedocView, SpectacularSwaggerSplitView

urlpatterns = [
    path("admin/", admin.site.urls),
    path("api/schema/", SpectacularAPIView.as_view(), name="schema"),
    path("api/docs/", SpectacularSwaggerSplitView.as_view(url_name="schema"), name="api-docs"),
    path("api/redoc/", SpectacularRedocView.as_view(url_name="schema"), name="api-redoc"),
    path("api/", include("generation.api_urls")),
    path("api/", include("labelling.api_urls")),
    path("api/", include("mitigation.api_urls")),
    path("api/", include("annotations.api.urls")),
    path("", include("annotations.urls")),
    path("", include("generation.urls")),
    path("", include("labelling.urls")),
    path("", include("mitigation.urls")),
    path("", include("workbench.page_urls")),
]
