"""Forms of generation work that other apps' pages offer (the findings page's pull prompt set)."""

from __future__ import annotations

from django import forms

from common.checked_input import MAX_ID, MAX_POSITIVE_INT, MIN_BIG_INT

PULL_PREFIX = "pull"  # field names pull-source...: the findings page holds other forms


class PullSetForm(forms.Form):
    """The findings page's "make the pull prompt set": which model, how many images, which draw."""

    source = forms.CharField(
        max_length=500, label="Model", help_text="A diffusers folder under WORKBENCH_MODEL_DIRS, or a hub id"
    )
    images_per_prompt = forms.IntegerField(
        min_value=1, max_value=1000, required=False, help_text="Default: the paper's (15)"
    )
    limit = forms.IntegerField(
        min_value=1, max_value=MAX_POSITIVE_INT, required=False, help_text="Only the first N prompts"
    )
    seed = forms.IntegerField(
        initial=0,
        min_value=MIN_BIG_INT,
        max_value=MAX_ID,
        help_text="Draws the non-stereotypical attributes and seeds the images",
    )
