"""Template tags other apps' pages use to offer generation work: the findings page's "make the pull
prompt set" form, posting to this app's ``study-generation-pull`` view, with the models this machine
has (``generation.environment``). ``annotations`` never imports ``generation``: its template only
names the tag."""

from __future__ import annotations

from typing import Any

from django import template

from annotations.models import Study
from generation.environment import hub_offline, model_folders
from generation.forms import PULL_PREFIX, PullSetForm

register = template.Library()


@register.inclusion_tag("generation/_pull_set_form.html")
def pull_set_form(study: Study, stereotype_rows: int, can_write: bool) -> dict[str, Any]:
    image_study = study.protocol_obj.unit != "text"
    shown = image_study and bool(stereotype_rows) and can_write
    # The model folders are walked only where the form shows (not for a reader, a text study or a study
    # without its stereotype table).
    models = [model for folder in model_folders() for model in folder.models] if shown else []
    return {
        "study": study,
        "form": PullSetForm(prefix=PULL_PREFIX),
        "models": models,
        "blocked": shown and not models and hub_offline(),
        "stereotype_rows": stereotype_rows,
        "can_write": can_write,
        "image_study": image_study,
    }
