"""What every page module shares: the study a page is about and the image sandbox header.

Domain errors raised here (``NotFoundError``, ``NotAllowed``) become 404 and 403 pages in
``workbench.middleware.DomainErrorMiddleware``, so a page module calls ``study_for_page`` and
never wraps access checks itself.
"""

from __future__ import annotations

from django import forms
from django.contrib import messages
from django.core.exceptions import NON_FIELD_ERRORS
from django.http import HttpRequest
from django.http.response import HttpResponseBase

from annotations import access
from annotations.downloads import SANDBOX_CSP, stored_file_response
from annotations.interchange.import_jobs import ImportOutcome
from annotations.models import Study
from annotations.services.stored_files import IMAGE_CACHE_CONTROL, item_image_served

IMAGE_CSP = SANDBOX_CSP  # the sandbox every served image and file gets (annotations.downloads)
# A report table longer than this is cut on the page (its CSV has every row).
MAX_ROWS_SHOWN = 200


def study_for_page(request: HttpRequest, pk: int, **kwargs: bool) -> Study:
    """``access.study_get_for_user`` for the signed-in user: not found -> 404, not allowed -> 403."""
    return access.study_get_for_user(user=access.request_user(request), id=pk, **kwargs)


def item_image_page(request: HttpRequest, pk: int, position: int, *, display: bool) -> HttpResponseBase:
    """An item's image (``display``: its resized version) to a user who may see the item: sandboxed,
    cached privately; on S3 a redirect to a presigned URL (``annotations.downloads``)."""
    image = access.item_image_get_for_user(user=access.request_user(request), item_id=pk, position=position)
    served = item_image_served(image, display=display)
    return stored_file_response(
        image.file.storage,
        served.name,
        content_type=served.content_type,
        filename=served.filename,
        attachment=False,
        headers={"Content-Security-Policy": IMAGE_CSP, "Cache-Control": IMAGE_CACHE_CONTROL},
    )


def form_problems(form: forms.BaseForm, field: str | None = None, default: str = "") -> str:
    """A refused form's messages as one line for ``messages.error``: every field's under the label the
    page shows (``Valid for (days): ...;``; the form's own errors unlabelled), or one ``field``'s alone
    (``default`` when it has none)."""
    if field is not None:
        return " ".join(str(message) for message in form.errors.get(field, [default]))
    parts = []
    for name, errors in form.errors.items():
        text = " ".join(str(m) for m in errors)
        parts.append(
            text if name == NON_FIELD_ERRORS or name not in form.fields else f"{form[name].label}: {text}"
        )
    return "; ".join(parts)


def import_outcome_message(request: HttpRequest, outcome: ImportOutcome) -> bool:
    """Tell the researcher how an upload's import went: its report (finished within the request) or
    that it is queued (its live status shows on the items page). True when it was queued."""
    if outcome.job is None:
        messages.success(request, outcome.summary)
        return False
    messages.info(
        request,
        f"Import {outcome.job.pk} ({outcome.job.label}) is queued; its progress shows under Imports "
        "on the items page.",
    )
    return True
