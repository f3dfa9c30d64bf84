"""The Django admin: every model with lists, searches and filters, and the bulk actions an admin
needs (docs/deploy.md, "The admin"): import annotator accounts from CSV, enrol selected accounts in
a study, send password-reset links, release leases. Each action calls a service; this module only
shows forms and reports."""

from __future__ import annotations

import json
from typing import Any

from django import forms
from django.conf import settings
from django.contrib import admin, messages
from django.contrib.admin.helpers import ACTION_CHECKBOX_NAME
from django.contrib.auth.admin import UserAdmin
from django.db.models import Q, QuerySet
from django.http import HttpRequest, HttpResponse
from django.template.response import TemplateResponse
from django.urls import URLPattern, path
from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString

from annotations import models
from annotations.interchange.accounts import accounts_import_csv, password_reset_links
from annotations.services.assignment import assignment_release
from annotations.services.studies import enrollment_add
from common.audit_admin import AuditLogAdmin
from common.errors import WorkbenchError
from common.redaction import redact


def _base_url(request: HttpRequest) -> str:
    return request.build_absolute_uri("/")


def _mail_note() -> str:
    """Where mail goes, for the admin who reads the links (the embedded default has no mail server)."""
    if settings.EMAIL_BACKEND == "django.core.mail.backends.filebased.EmailBackend":
        return f"no mail server is configured: each message is a file under {settings.EMAIL_FILE_PATH}"
    return ""


class AccountsImportForm(forms.Form):
    file = forms.FileField(
        label="CSV file",
        help_text="Columns: username, email, name, and optionally pool (crowd or expert). No passwords: "
        "each new account gets a password-reset link.",
    )
    study = forms.ModelChoiceField(
        queryset=models.Study.objects.order_by("name"),
        required=False,
        help_text="Rows with a pool are enrolled in this study in that pool.",
    )
    send_mail = forms.BooleanField(required=False, initial=True, label="Mail each new account its link")

    def clean_file(self) -> Any:
        upload = self.cleaned_data["file"]
        if upload.size > 2 * 1024 * 1024:
            raise forms.ValidationError("The file is larger than 2 MB; split it.")
        return upload


class EnrolForm(forms.Form):
    study = forms.ModelChoiceField(queryset=models.Study.objects.order_by("name"))
    pool = forms.ChoiceField(choices=models.Pool.choices, initial=models.Pool.CROWD)


@admin.register(models.User)
class WorkbenchUserAdmin(UserAdmin[models.User]):
    fieldsets = (*(UserAdmin.fieldsets or ()), ("Workbench", {"fields": ("role",)}))
    add_fieldsets = (*UserAdmin.add_fieldsets, ("Workbench", {"fields": ("role",)}))
    list_display = ("username", "email", "role", "is_staff", "is_active", "last_login")
    list_filter = ("role", "is_staff", "is_active")
    actions = ("send_password_reset_links", "enrol_in_study")
    change_list_template = "admin/annotations/user/change_list.html"

    def get_urls(self) -> list[URLPattern]:
        own = [
            path(
                "import-csv/",
                self.admin_site.admin_view(self.import_csv_view),
                name="annotations_user_import_csv",
            )
        ]
        return own + super().get_urls()

    def import_csv_view(self, request: HttpRequest) -> HttpResponse:
        """An upload of annotator accounts, checked row by row, with a report of what was done."""
        if not self.has_add_permission(request):
            return HttpResponse("You may not add accounts.", status=403)
        form = AccountsImportForm(request.POST or None, request.FILES or None)
        report = None
        if request.method == "POST" and form.is_valid():
            report = accounts_import_csv(
                data=form.cleaned_data["file"].read(),
                study=form.cleaned_data["study"],
                by=request.user,  # type: ignore[arg-type]
                base_url=_base_url(request),
                mail=form.cleaned_data["send_mail"],
            )
        context = {
            **self.admin_site.each_context(request),
            "title": "Import annotator accounts from CSV",
            "opts": self.model._meta,
            "form": form,
            "report": report,
            "mail_backend_note": _mail_note(),
        }
        return TemplateResponse(request, "admin/annotations/user/import_csv.html", context)

    @admin.action(description="Send password-reset links to the selected accounts")
    def send_password_reset_links(
        self, request: HttpRequest, queryset: QuerySet[models.User]
    ) -> HttpResponse:
        links = password_reset_links(users=queryset.order_by("username"), base_url=_base_url(request))
        context = {
            **self.admin_site.each_context(request),
            "title": "Password-reset links",
            "opts": self.model._meta,
            "links": links,
            "mail_backend_note": _mail_note(),
        }
        return TemplateResponse(request, "admin/annotations/user/reset_links.html", context)

    @admin.action(description="Enrol the selected accounts in a study")
    def enrol_in_study(self, request: HttpRequest, queryset: QuerySet[models.User]) -> HttpResponse | None:
        form = EnrolForm(request.POST if "apply" in request.POST else None)
        if "apply" in request.POST and form.is_valid():
            study, pool = form.cleaned_data["study"], form.cleaned_data["pool"]
            before = dict(
                models.Enrollment.objects.filter(study=study, user__in=queryset).values_list(
                    "user_id", "pool"
                )
            )
            done: list[str] = []
            already: list[str] = []
            moved: list[str] = []
            refused: list[str] = []
            for user in queryset.order_by("username"):
                try:
                    enrollment_add(study=study, user=user, pool=pool, by=request.user)  # type: ignore[arg-type]
                except WorkbenchError as exc:
                    refused.append(f"{user.username}: {exc.message}")
                else:
                    was = before.get(user.pk)
                    (done if was is None else already if was == pool else moved).append(user.username)
            if done:
                messages.success(request, f"Enrolled in {study.name} ({pool}): {', '.join(done)}.")
            if moved:
                messages.success(request, f"Moved to the {pool} pool of {study.name}: {', '.join(moved)}.")
            if already:
                messages.info(
                    request,
                    f"Already enrolled in {study.name} ({pool}), left as they were: {', '.join(already)}.",
                )
            if refused:
                messages.error(request, "Not enrolled: " + "; ".join(refused))
            return None
        context = {
            **self.admin_site.each_context(request),
            "title": "Enrol accounts in a study",
            "opts": self.model._meta,
            "form": form,
            "accounts": queryset.order_by("username"),
            "action_checkbox_name": ACTION_CHECKBOX_NAME,
        }
        return TemplateResponse(request, "admin/annotations/user/enrol.html", context)


class StudyQualitySettingsInline(admin.StackedInline[models.StudyQualitySettings, models.Study]):
    """The quality settings chosen (empty: the default); changed on the study's quality page."""

    model = models.StudyQualitySettings
    can_delete = False
    extra = 0


class ConsensusRuleChoiceInline(admin.TabularInline[models.ConsensusRuleChoice, models.Study]):
    """The consensus rule chosen per question (changed with ``manage.py consensus --rule``)."""

    model = models.ConsensusRuleChoice
    extra = 0


class ValidationSampleInline(admin.StackedInline[models.ValidationSample, models.Study]):
    """Read-only: drawn and cleared with ``manage.py sample_for_validation``."""

    model = models.ValidationSample
    fields = (
        "labeller",
        "labeller_name",
        "design",
        "design_params",
        "frame_size",
        "seed",
        "stratify_by",
        "size",
        "created_at",
    )
    readonly_fields = fields
    can_delete = False
    extra = 0

    @admin.display(description="items")
    def size(self, sample: models.ValidationSample) -> int:
        return sample.items.count()

    def has_add_permission(self, request, obj=None) -> bool:  # type: ignore[no-untyped-def]
        return False


@admin.register(models.Study)
class StudyAdmin(admin.ModelAdmin[models.Study]):
    list_display = ("name", "owner", "preset", "overlap", "status", "reveal_after_submit", "created_at")
    list_filter = ("status", "preset", "reveal_after_submit")
    search_fields = ("name",)
    filter_horizontal = ("shared_with",)
    readonly_fields = ("protocol_questions",)
    raw_id_fields = ("visualness_study",)
    fieldsets = (
        (None, {"fields": ("name", "description", "owner", "shared_with", "status")}),
        ("Protocol", {"fields": ("preset", "protocol_questions", "overlap", "lease_minutes")}),
        ("Settings", {"fields": ("reveal_after_submit", "seed", "imported_from", "visualness_study")}),
    )
    inlines = (StudyQualitySettingsInline, ConsensusRuleChoiceInline, ValidationSampleInline)
    actions = ("release_leases",)

    def formfield_for_foreignkey(self, db_field: Any, request: HttpRequest, **kwargs: Any) -> Any:
        if db_field.name == "owner":  # a study's owner is a researcher (or an admin)
            kwargs["queryset"] = _researchers()
        return super().formfield_for_foreignkey(db_field, request, **kwargs)

    def formfield_for_manytomany(self, db_field: Any, request: HttpRequest, **kwargs: Any) -> Any:
        if db_field.name == "shared_with":
            kwargs["queryset"] = _researchers()
        return super().formfield_for_manytomany(db_field, request, **kwargs)

    @admin.display(description="protocol")
    def protocol_questions(self, study: models.Study) -> SafeString:
        """The protocol as a reader sees it: each question, its kind and its options (escaped)."""
        try:
            protocol = study.protocol_obj
        except Exception as exc:  # noqa: BLE001 - a stored protocol that no longer loads is shown, not raised
            return format_html("<p>The stored protocol does not load: {}</p>", exc)
        rows = []
        for question in protocol.questions:
            options = [option.label for option in question.options]
            if question.options_from:
                options.append(f"(options from each item's {question.options_from})")
            extras = [o.label for o in (question.unsure, question.none_option) if o is not None]
            details = ", ".join(options + extras)
            rows.append((question.key, question.kind, question.prompt, details or "–"))
        table = format_html_join(
            "", "<tr><td><code>{}</code></td><td>{}</td><td>{}</td><td>{}</td></tr>", rows
        )
        return format_html(
            '<p>{} <span class="quiet">({})</span></p><table><thead><tr><th>Key</th><th>Kind</th>'
            "<th>Question</th><th>Options</th></tr></thead><tbody>{}</tbody></table>",
            protocol.name or protocol.key or "Custom protocol",
            protocol.key or "no preset",
            table,
        )

    @admin.action(description="Release the leased items of the selected studies")
    def release_leases(self, request: HttpRequest, queryset: QuerySet[models.Study]) -> None:
        leased = models.Assignment.objects.filter(study__in=queryset, status=models.Assignment.Status.LEASED)
        _release(request, leased)


@admin.register(models.Item)
class ItemAdmin(admin.ModelAdmin[models.Item]):
    list_display = ("external_id", "study", "kind", "condition", "model_name", "is_reference", "control_kind")
    list_filter = ("kind", "is_reference", "control_kind")
    search_fields = ("external_id", "prompt")
    list_select_related = ("study",)


@admin.register(models.Annotator)
class AnnotatorAdmin(admin.ModelAdmin[models.Annotator]):
    """A labeller's configuration is shown with its secrets masked and is not edited here (a new
    configuration is a new version: ``manage.py register_labeller``; docs/security.md)."""

    list_display = ("name", "version", "kind", "user", "study")
    list_filter = ("kind",)
    search_fields = ("name",)
    exclude = ("config",)
    readonly_fields = ("configuration",)

    @admin.display(description="configuration (secrets masked)")
    def configuration(self, obj: models.Annotator) -> str:
        return json.dumps(redact(obj.config), indent=2, ensure_ascii=False, sort_keys=True)

    def has_change_permission(self, request: HttpRequest, obj: models.Annotator | None = None) -> bool:
        """A machine labeller is changed by app admins only (role admin or superuser), whatever model
        permissions a staff account holds: its name and version are what its jobs run (docs/security.md)."""
        if obj is not None and obj.is_machine and not _app_admin(request):
            return False
        return super().has_change_permission(request, obj)

    def has_delete_permission(self, request: HttpRequest, obj: models.Annotator | None = None) -> bool:
        if obj is not None and obj.is_machine and not _app_admin(request):
            return False
        return super().has_delete_permission(request, obj)

    def has_add_permission(self, request: HttpRequest) -> bool:
        return _app_admin(request) and super().has_add_permission(request)


def _app_admin(request: HttpRequest) -> bool:
    user = request.user
    return isinstance(user, models.User) and user.is_admin


@admin.register(models.Annotation)
class AnnotationAdmin(admin.ModelAdmin[models.Annotation]):
    list_display = ("item", "annotator", "question_key", "source", "updated_at")
    list_filter = ("source",)
    list_select_related = ("item", "annotator")
    raw_id_fields = ("item", "annotator", "study")


def _researchers() -> QuerySet[models.User]:
    return models.User.objects.filter(
        Q(role__in=[models.User.Role.RESEARCHER, models.User.Role.ADMIN]) | Q(is_superuser=True)
    ).order_by("username")


def _release(request: HttpRequest, assignments: QuerySet[models.Assignment]) -> None:
    """Hand leased items back (``assignment_release``); what was not leased is reported, not changed."""
    released, skipped = 0, 0
    for assignment in assignments.order_by("pk"):
        try:
            assignment_release(assignment=assignment)
        except WorkbenchError:
            skipped += 1
        else:
            released += 1
    messages.success(request, f"Released {released} lease{'s' if released != 1 else ''}.")
    if skipped:
        messages.warning(request, f"{skipped} selected assignment(s) were not leased and are unchanged.")


@admin.register(models.Assignment)
class AssignmentAdmin(admin.ModelAdmin[models.Assignment]):
    list_display = ("item", "annotator", "study", "status", "lease_expires_at")
    list_filter = ("status", "study")
    list_select_related = ("item", "annotator", "study")
    search_fields = ("item__external_id", "annotator__name")
    raw_id_fields = ("item", "annotator", "study")
    actions = ("release_leases",)

    @admin.action(description="Release the selected leases")
    def release_leases(self, request: HttpRequest, queryset: QuerySet[models.Assignment]) -> None:
        _release(request, queryset)


@admin.register(models.Enrollment)
class EnrollmentAdmin(admin.ModelAdmin[models.Enrollment]):
    list_display = ("study", "user", "pool", "created_at")
    list_filter = ("pool",)
    raw_id_fields = ("study", "user")


@admin.register(models.ExportJob)
class ExportJobAdmin(admin.ModelAdmin[models.ExportJob]):
    list_display = ("study", "format", "status", "requested_by", "created_at")


@admin.register(models.RevealLog)
class RevealLogAdmin(AuditLogAdmin[models.RevealLog]):
    """Read-only: each row is one showing of machine labels after a submit (anchoring records)."""

    list_display = ("item", "annotator", "created_at", "answered_at")
    list_select_related = ("item", "annotator")
    raw_id_fields = ("item", "annotator", "study", "assignment")


@admin.register(models.Invitation)
class InvitationAdmin(admin.ModelAdmin[models.Invitation]):
    """Links are made and revoked on the study's invitation page (docs/crowd.md); the admin reads them."""

    list_display = ("__str__", "study", "platform", "pool", "uses", "max_uses", "expires_at", "revoked_at")
    list_filter = ("platform", "pool")
    list_select_related = ("study",)
    raw_id_fields = ("study", "created_by")
    readonly_fields = ("token", "uses")


@admin.register(models.Participant)
class ParticipantAdmin(admin.ModelAdmin[models.Participant]):
    list_display = ("user", "study", "platform", "participant_id", "created_at", "completed_at")
    list_filter = ("platform",)
    search_fields = ("participant_id", "user__username")
    list_select_related = ("user", "study")
    raw_id_fields = ("invitation", "study", "user")


@admin.register(models.AnnotatorExclusion)
class AnnotatorExclusionAdmin(admin.ModelAdmin[models.AnnotatorExclusion]):
    """Read-only: exclusions are made and undone on the progress page, which recomputes the consensus."""

    list_display = (
        "annotator",
        "study",
        "reason",
        "excluded_by",
        "excluded_at",
        "reinstated_by",
        "reinstated_at",
    )
    list_select_related = ("annotator", "study", "excluded_by", "reinstated_by")
    raw_id_fields = ("annotator", "study", "excluded_by", "reinstated_by")

    def has_change_permission(
        self, request: HttpRequest, obj: models.AnnotatorExclusion | None = None
    ) -> bool:
        return False

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False
