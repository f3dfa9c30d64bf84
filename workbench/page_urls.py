from django.contrib.auth import views as auth_views
from django.urls import path

from workbench import docs_pages, views

urlpatterns = [
    path("", views.home, name="home"),
    path("healthz/", views.healthz, name="healthz"),
    path("accounts/login/", auth_views.LoginView.as_view(), name="login"),
    path("docs/", docs_pages.docs_index, name="docs-index"),
    path("docs/<slug:name>/", docs_pages.docs_page, name="docs-page"),
    path("accounts/logout/", auth_views.LogoutView.as_view(), name="logout"),
]
