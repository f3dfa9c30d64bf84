"""Template tags other apps' pages use to offer labelling work: the findings page's buttons that start a
registered embedding labeller or captioner (``labelling.feature_labellers``), posting to this app's
``study-labelling-features`` view. A tag keeps ``annotations`` (which never imports ``labelling``)
unaware of labellers: its template only names the tag."""

from __future__ import annotations

from typing import Any

from django import template

from annotations.models import Study
from labelling.feature_labellers import FEATURE_KINDS, WHAT, feature_labellers

register = template.Library()


@register.inclusion_tag("labelling/_feature_labellers.html", takes_context=True)
def feature_labeller_buttons(
    context: dict[str, Any], study: Study, kind: str, can_write: bool
) -> dict[str, Any]:
    """One button per enabled labeller that stores ``kind`` (``embedding``/``captions``), or a line
    saying that none is registered."""
    return {
        "study": study,
        "kind": kind,
        "what": WHAT[kind],
        "labeller_kinds": " or ".join(FEATURE_KINDS[kind]),
        "labellers": feature_labellers(kind),
        "can_write": can_write,
        "user": context.get("user"),
    }
