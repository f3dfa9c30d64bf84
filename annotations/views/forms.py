"""Page forms: shape checks only; services enforce the rules."""

from __future__ import annotations

from typing import Any, cast

from django import forms

from annotations.models import Annotator, ControlKind, Invitation, Study
from annotations.selectors.controls import SETTINGS as QUALITY_SETTINGS
from protocols.papers import preset_label
from protocols.schema import list_presets, load_preset

OWN_PROTOCOL_LABEL = "My own protocol file (upload it below)"
OWN_PROTOCOL = "own"  # the protocol list's value for "my own protocol file"
CHOOSE_PROTOCOL = "Choose which protocol this study uses: a paper's preset, or your own protocol file."


def _preset_choices() -> list[tuple[str, str]]:
    """No choice first (the page asks; nothing is chosen for the researcher), each preset named by its
    paper (``protocols/papers.py``), then the own-file choice."""
    presets = [(key, preset_label(load_preset(key))) for key in list_presets()]
    return [("", "Choose a protocol…"), *presets, (OWN_PROTOCOL, OWN_PROTOCOL_LABEL)]


class StudyCreateForm(forms.Form):
    name = forms.CharField(max_length=200)
    description = forms.CharField(widget=forms.Textarea(attrs={"rows": 2}), required=False)
    preset = forms.ChoiceField(
        choices=(),
        required=False,  # checked in ``clean``: a protocol file sent without a choice is the choice
        label="Protocol",
        help_text="A paper's preset (its questions are previewed below), or your own protocol file",
    )
    protocol_file = forms.FileField(
        required=False,
        label="Protocol file",
        help_text=f"YAML, at most 1 MB; only with “{OWN_PROTOCOL_LABEL}” above",
    )
    overlap = forms.IntegerField(
        min_value=1, max_value=100, initial=3, help_text="Independent human judgements each item needs"
    )
    lease_minutes = forms.IntegerField(min_value=1, max_value=10080, initial=30)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        cast(forms.ChoiceField, self.fields["preset"]).choices = _preset_choices()
        self.fields["preset"].widget.attrs["required"] = True  # asked, never chosen for the researcher

    def clean(self) -> dict[str, object]:
        """``preset``: a preset's key, or ``own`` with a protocol file (a file sent with no choice, as
        the API and older forms send it, is the researcher's own); cleaned to "" for the own file."""
        data = super().clean() or {}
        preset, upload = data.get("preset"), data.get("protocol_file")
        if "preset" in self.errors:
            return data
        if preset and preset != OWN_PROTOCOL and upload:
            raise forms.ValidationError(
                f"You chose a preset and a protocol file: choose “{OWN_PROTOCOL_LABEL}” to use the file, "
                "or remove the file to use the preset."
            )
        if not preset and not upload:
            self.add_error("preset", CHOOSE_PROTOCOL)
        elif preset == OWN_PROTOCOL and not upload:
            self.add_error("protocol_file", f"You chose “{OWN_PROTOCOL_LABEL}”: upload the file.")
        if upload is not None and getattr(upload, "size", 0) > 1024 * 1024:
            raise forms.ValidationError("The protocol file is larger than 1 MB.")
        data["preset"] = "" if preset == OWN_PROTOCOL else preset
        return data


class StudySettingsForm(forms.Form):
    name = forms.CharField(max_length=200)
    description = forms.CharField(widget=forms.Textarea(attrs={"rows": 2}), required=False)
    overlap = forms.IntegerField(min_value=1, max_value=100)
    lease_minutes = forms.IntegerField(min_value=1, max_value=10080)
    status = forms.ChoiceField(choices=Study.Status.choices)


class UploadForm(forms.Form):
    file = forms.FileField()


class StereotypeTableForm(UploadForm):
    visual_attributes = forms.FileField(required=False)


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


class BulkEnrollForm(forms.Form):
    usernames = forms.CharField(max_length=50000, widget=forms.Textarea)
    pool = forms.ChoiceField(choices=Annotator.Pool.choices, initial=Annotator.Pool.CROWD)


class UnenrollForm(forms.Form):
    username = forms.CharField(max_length=150)


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
    attributes = forms.CharField(
        widget=forms.Textarea(attrs={"rows": 2, "spellcheck": "false"}),
        required=False,
        label="Fixed attributes (YAML)",
        help_text=(
            "What everyone who joins by this link gets in the study, e.g. region: South Asia (the rater pool "
            "this link recruits). Not a question of the demographic form too. Empty: none."
        ),
    )


class PoolInvitationsForm(forms.Form):
    """One Prolific link per rater pool (``services/pool_invitations.py`` checks the rest)."""

    items_per_participant = forms.IntegerField(
        min_value=1,
        max_value=100_000,
        label="Items per participant (quota)",
        help_text=(
            "Each link's places are sized from it: quota x items / items per participant, rounded up, "
            "never fewer than the quota"
        ),
    )
    completion_code = forms.CharField(max_length=64, help_text="Prolific's completion code of the study")
    valid_days = forms.IntegerField(min_value=1, max_value=365, initial=14, label="Valid for (days)")
    estimated_minutes = forms.IntegerField(
        min_value=1, max_value=24 * 60, required=False, label="Estimated minutes"
    )
    consent_text = forms.CharField(
        widget=forms.Textarea(attrs={"rows": 3}), required=False, help_text="Empty: no consent page"
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
    "straight_margin": (
        "Straight-lining margin",
        "… when the annotator gives that answer this much more often (share) than the others do",
    ),
    "straight_dominant_share": (
        "Straight-lining off above this modal share",
        "… and not on questions where one answer has this share of the others' answers",
    ),
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


class MultipleFileInput(forms.ClearableFileInput):
    allow_multiple_selected = True


class MultipleFileField(forms.FileField):
    """Several files in one field (Django's documented pattern); each checked like a FileField."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("widget", MultipleFileInput())
        super().__init__(*args, **kwargs)

    def clean(self, data: Any, initial: Any = None) -> Any:
        if isinstance(data, list | tuple):
            return [super(MultipleFileField, self).clean(one, initial) for one in data]
        return [super().clean(data, initial)] if data else []


class ItemUploadForm(forms.Form):
    """Items: one ``file`` (a zip or a manifest), or several ``images`` (images and at most one
    manifest) with their relative ``paths`` (a dropped folder's ``webkitRelativePath``, one per file).
    (Not ``files``: a form's ``files`` is its uploads.)"""

    file = forms.FileField(required=False)
    images = MultipleFileField(required=False)
    paths = forms.CharField(required=False)  # read with getlist: one path per file

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        if bool(data.get("file")) == bool(data.get("images")):
            raise forms.ValidationError(
                "Choose a zip or a manifest, or several images (with at most one manifest), not both."
                if data.get("file")
                else "Choose a file to import."
            )
        return data
