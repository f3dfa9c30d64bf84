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
    # Password reset (links sent from the admin's "Send password-reset links"; templates/registration/).
    # Throttled, with the mail sent by a task after the answer (docs/security.md, "Password reset").
    path("accounts/password_reset/", views.ThrottledPasswordResetView.as_view(), name="password_reset"),
    path(
        "accounts/password_reset/done/",
        auth_views.PasswordResetDoneView.as_view(),
        name="password_reset_done",
    ),
    path(
        "accounts/reset/<uidb64>/<token>/",
        auth_views.PasswordResetConfirmView.as_view(),
        name="password_reset_confirm",
    ),
    path(
        "accounts/reset/done/",
        auth_views.PasswordResetCompleteView.as_view(),
        name="password_reset_complete",
    ),
    path("favicon.ico", views.favicon, name="favicon"),
]
