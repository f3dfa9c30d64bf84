"""The home page (each role's dashboard), the health check, ``/favicon.ico`` and the throttled
password-reset request page."""

from __future__ import annotations

import logging

from django.conf import settings
from django.contrib.auth.decorators import login_required
from django.contrib.auth.forms import PasswordResetForm
from django.contrib.auth.views import PasswordResetView
from django.db import DatabaseError, connection
from django.db.models import Count
from django.http import (
    HttpRequest,
    HttpResponse,
    HttpResponsePermanentRedirect,
    HttpResponseRedirect,
    JsonResponse,
)
from django.shortcuts import redirect, render
from django.templatetags.static import static

from annotations.access import request_user, studies_for_user
from annotations.interchange.accounts import password_reset_mail_request
from annotations.selectors.studies import studies_completion
from common.sign_in import LOCKED_OUT_STATUS, password_reset_limit_message, password_reset_over_limit

logger = logging.getLogger(__name__)


@login_required
def home(request: HttpRequest) -> HttpResponse:
    """A researcher's studies with % complete; an annotator's own work is their dashboard."""
    user = request_user(request)
    if not user.is_researcher:
        return redirect("annotate-dashboard")
    studies = list(
        studies_for_user(user).select_related("owner").annotate(item_count=Count("items", distinct=True))
    )
    completion = studies_completion(study.pk for study in studies)  # one query (docs/annotating.md)
    for study in studies:
        study.completion = completion.get(study.pk, {"judgements": 0, "needed": 0, "percent": 0.0})  # type: ignore[attr-defined]
    return render(request, "workbench/home.html", {"studies": studies})


def database_answers() -> bool:
    """Whether the database answers a query (the health check); why not is logged, never answered."""
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
    except DatabaseError:
        logger.exception("health check: the database does not answer")
        return False
    return True


def healthz(request: HttpRequest) -> JsonResponse:
    """For load balancers and anyone: 200 ``{"status": "ok"}`` or 503 ``{"status": "unavailable"}``,
    nothing more (no database vendor or version: docs/deploy.md)."""
    if database_answers():
        return JsonResponse({"status": "ok"})
    return JsonResponse({"status": "unavailable"}, status=503)


def favicon(request: HttpRequest) -> HttpResponse:
    """Browsers ask for ``/favicon.ico`` whatever the page links: send them to the static SVG."""
    return HttpResponsePermanentRedirect(static("favicon.svg"))


class ThrottledPasswordResetView(PasswordResetView):
    """Django's "Forgot your password?" page, throttled per client address and per email address
    (``common.sign_in.password_reset_over_limit``: past the limit the same page answers 429 with a
    message), and answering the same, in the same time, whether or not an account has the address:
    the mail is sent by a Celery task after the answer (docs/security.md, "Password reset")."""

    def form_valid(self, form: PasswordResetForm) -> HttpResponse:
        email = form.cleaned_data["email"]
        if password_reset_over_limit(self.request, email):
            form.add_error("email", password_reset_limit_message())
            response = self.render_to_response(self.get_context_data(form=form), status=LOCKED_OUT_STATUS)
            response["Retry-After"] = str(max(1, settings.WORKBENCH_PASSWORD_RESET_WINDOW_MINUTES) * 60)
            return response
        password_reset_mail_request(email=email, base_url=self.request.build_absolute_uri("/"))
        return HttpResponseRedirect(self.get_success_url())
