from django.contrib import admin
from django.contrib.auth.decorators import login_required
from django.urls import include, path
from drf_spectacular.views import SpectacularAPIView, SpectacularRedocView, SpectacularSwaggerSplitView

urlpatterns = [
    path("admin/", admin.site.urls),
    # The schema answers signed-in callers only (SPECTACULAR_SETTINGS["SERVE_PERMISSIONS"]: 401 without
    # a session or token); its two pages send a visitor to the sign-in page (docs/security.md, "API schema").
    path("api/schema/", SpectacularAPIView.as_view(), name="schema"),
    path(
        "api/docs/", login_required(SpectacularSwaggerSplitView.as_view(url_name="schema")), name="api-docs"
    ),
    path("api/redoc/", login_required(SpectacularRedocView.as_view(url_name="schema")), name="api-redoc"),
    path("api/", include("generation.api_urls")),
    path("api/", include("labelling.api_urls")),
    path("api/", include("mitigation.api_urls")),
    path("api/", include("reports.api_urls")),
    path("api/", include("annotations.api.urls")),
    path("api/", include("findings.api_urls")),
    path("", include("annotations.urls")),
    path("", include("findings.urls")),
    path("", include("generation.urls")),
    path("", include("labelling.urls")),
    path("", include("mitigation.urls")),
    path("", include("reports.urls")),
    path("", include("workbench.page_urls")),
]
