"""Page forms: shape checks only; services enforce the rules."""

from __future__ import annotations

from typing import Any, cast

from django import forms

from annotations.models import Annotator, ControlKind, Invitation, Study
from annotations.protocols.schema import list_presets, load_preset
from annotations.selectors.controls import SETTINGS as QUALITY_SETTINGS


def _preset_choices() -> list[tuple[str, str]]:
    return [("", "— upload a protocol file instead —")] + [
        (key, f"{key}: {load_preset(key).name}") for key in list_presets()
    ]


class StudyCreateForm(forms.Form):
    name = forms.CharField(max_length=200)
    description = forms.CharField(widget=forms.Textarea(attrs={"rows": 2}), required=False)
    preset = forms.ChoiceField(choices=(), required=False)
    protocol_file = forms.FileField(required=False, help_text="A protocol YAML file (see docs/protocols.md)")
    overlap = forms.IntegerField(
        min_value=1, max_value=100, initial=3, help_text="Independent human judgements each item needs"
    )
    lease_minutes = forms.IntegerField(min_value=1, max_value=10080, initial=30)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        cast(forms.ChoiceField, self.fields["preset"]).choices = _preset_choices()

    def clean(self) -> dict[str, object]:
        data = super().clean() or {}
        if bool(data.get("preset")) == bool(data.get("protocol_file")):
            raise forms.ValidationError("Choose a preset or upload a protocol file (one of the two).")
        upload = data.get("protocol_file")
        if upload is not None and getattr(upload, "size", 0) > 1024 * 1024:
            raise forms.ValidationError("The protocol file is larger than 1 MB.")
        return data


class StudySettingsForm(forms.Form):
    name = forms.CharField(max_length=200)
    description = forms.CharField(widget=forms.Textarea(attrs={"rows": 2}), required=False)
    overlap = forms.IntegerField(min_value=1, max_value=100)
    lease_minutes = forms.IntegerField(min_value=1, max_value=10080)
    status = forms.ChoiceField(choices=Study.Status.choices)


class UploadForm(forms.Form):
    file = forms.FileField()


class AnnotationUploadForm(UploadForm):
    format = forms.ChoiceField(
        choices=[("jsonl", "JSONL"), ("coco", "COCO boxes")], initial="jsonl", required=False
    )
    question = forms.CharField(max_length=64, required=False)
    annotator = forms.CharField(max_length=150, required=False)
    kind = forms.ChoiceField(choices=[("", "from the file"), *Annotator.Kind.choices], required=False)


class LabelStudioUploadForm(UploadForm):
    config = forms.FileField(required=False)


class LabelStudioCreateForm(LabelStudioUploadForm):
    name = forms.CharField(max_length=200)


class EnrollForm(forms.Form):
    username = forms.CharField(max_length=150)
    pool = forms.ChoiceField(choices=Annotator.Pool.choices, initial=Annotator.Pool.CROWD)


class ShareForm(forms.Form):
    username = forms.CharField(max_length=150)


class InvitationForm(forms.Form):
    """An invitation link (see docs/crowd.md); the service checks the rules (codes, URLs, the form's
    fields)."""

    label = forms.CharField(max_length=200, required=False, help_text="For you, e.g. “Prolific pilot”")
    platform = forms.ChoiceField(choices=Invitation.Platform.choices, initial=Invitation.Platform.NONE)
    pool = forms.ChoiceField(choices=Annotator.Pool.choices, initial=Annotator.Pool.CROWD)
    valid_days = forms.IntegerField(min_value=1, max_value=365, initial=14, label="Valid for (days)")
    max_uses = forms.IntegerField(min_value=1, max_value=100_000, initial=50, label="Maximum uses (accounts)")
    items_per_participant = forms.IntegerField(
        min_value=1,
        max_value=100_000,
        required=False,
        label="Items per participant (quota)",
        help_text="Empty: no quota, they stop when nothing is left",
    )
    min_answered_items = forms.IntegerField(
        min_value=1,
        max_value=100_000,
        required=False,
        label="Minimum answered items",
        help_text=(
            "Needed for the completion code; skips and failed attention checks do not count. Empty: the "
            "quota (or every item they were given, if the study runs out first), or 1 without a quota"
        ),
    )
    completion_code = forms.CharField(
        max_length=64, required=False, help_text="Shown at the end; required for Prolific and MTurk"
    )
    completion_url = forms.CharField(
        max_length=500,
        required=False,
        label="Completion URL",
        help_text="Where the last page sends them; Prolific's is filled in for you",
    )
    estimated_minutes = forms.IntegerField(
        min_value=1,
        max_value=24 * 60,
        required=False,
        label="Estimated minutes",
        help_text="How long it takes; the consent page shows it",
    )
    consent_text = forms.CharField(
        widget=forms.Textarea(attrs={"rows": 4}), required=False, help_text="Empty: no consent page"
    )
    demographics = forms.CharField(
        widget=forms.Textarea(attrs={"rows": 5, "spellcheck": "false"}),
        required=False,
        label="Demographic form (YAML)",
        help_text=(
            "A list of fields (YAML or JSON): key, label, kind (choice, number or text), choices, required. "
            "Empty: no form. The form builder above writes it for you."
        ),
    )


# Label and help text of each quality setting; types and ranges come from ``selectors.controls.SETTINGS``.
QUALITY_SETTING_TEXT = {
    "control_rate": ("Control rate", "Share of claims that are control items (0.1 = one in ten)"),
    "qualification_items": (
        "Qualification items",
        "Gold items an annotator must answer before real items (0: no qualification)",
    ),
    "qualification_min_accuracy": ("Accuracy needed to qualify", "Gold accuracy needed to qualify"),
    "min_gold_accuracy": ("Lowest gold accuracy", "Flag below this gold accuracy"),
    "max_attention_failures": (
        "Failed attention checks allowed",
        "Flag above this many failed attention checks",
    ),
    "loo_margin": ("Agreement margin below the median", "Flag agreement this far below the study median"),
    "loo_min_n": ("Comparisons needed", "… with at least this many comparisons"),
    "min_median_seconds": (
        "Shortest median seconds per item",
        "Flag a median time per item below this (seconds)",
    ),
    "max_straight_run": ("Longest run of one answer", "Flag this many identical answers in a row (0: never)"),
}


class QualitySettingsForm(forms.Form):
    """The study's quality settings: one field per name of ``selectors.controls.SETTINGS``, whole or
    decimal and within the range given there (the service checks them again)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        for name, (_default, low, high, whole) in QUALITY_SETTINGS.items():
            label, help_text = QUALITY_SETTING_TEXT[name]
            help_text = f"{help_text}; {low:g} to {high:g}"
            if whole:
                self.fields[name] = forms.IntegerField(
                    min_value=int(low), max_value=int(high), label=label, help_text=help_text
                )
            else:
                self.fields[name] = forms.FloatField(
                    min_value=low, max_value=high, label=label, help_text=help_text
                )


class ExcludeForm(forms.Form):
    reason = forms.CharField(max_length=2000)


class ReinstateForm(forms.Form):
    note = forms.CharField(max_length=2000, required=False)


class ControlForm(forms.Form):
    kind = forms.ChoiceField(choices=ControlKind.choices, widget=forms.RadioSelect)
    note = forms.CharField(max_length=2000, required=False, widget=forms.Textarea(attrs={"rows": 2}))
