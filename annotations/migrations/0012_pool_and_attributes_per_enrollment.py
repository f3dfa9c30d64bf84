"""An account's pool and demographic answers move from the account-wide ``Annotator`` to each
``Enrollment`` (per study), so nothing done in one study changes what anyone can do in another.

Each enrolment gets its annotator's current pool and attributes; then the account-level values are
reset, and constraints keep ``Annotator.study_pool``/``study_attributes`` for imported annotators
(who belong to one study) only.
"""

from django.db import migrations, models
from django.db.models import Q


def copy_to_enrollments(apps, schema_editor):  # type: ignore[no-untyped-def]
    Annotator = apps.get_model("annotations", "Annotator")
    Enrollment = apps.get_model("annotations", "Enrollment")
    accounts = Annotator.objects.filter(user__isnull=False)
    for annotator_id, user_id, pool, attributes in accounts.values_list(
        "id", "user_id", "study_pool", "study_attributes"
    ).iterator(chunk_size=2000):
        if pool != "crowd" or attributes:
            Enrollment.objects.filter(user_id=user_id).update(pool=pool, attributes=attributes or {})
    accounts.update(study_pool="crowd", study_attributes={})
    Annotator.objects.filter(kind="machine").update(study_pool="crowd", study_attributes={})


def copy_back(apps, schema_editor):  # type: ignore[no-untyped-def]
    """Reverse: an account gets the pool of its enrolments (expert if any is) and the attributes of one."""
    Annotator = apps.get_model("annotations", "Annotator")
    Enrollment = apps.get_model("annotations", "Enrollment")
    for annotator in Annotator.objects.filter(user__isnull=False).iterator(chunk_size=2000):
        enrolments = list(Enrollment.objects.filter(user_id=annotator.user_id).order_by("id"))
        pools = {e.pool for e in enrolments}
        annotator.study_pool = "expert" if "expert" in pools else "crowd"
        annotator.study_attributes = next((e.attributes for e in enrolments if e.attributes), {})
        annotator.save(update_fields=["study_pool", "study_attributes"])


class Migration(migrations.Migration):
    dependencies = [
        ("annotations", "0011_exportjob_lifecycle"),
    ]

    operations = [
        migrations.RenameField(model_name="annotator", old_name="pool", new_name="study_pool"),
        migrations.RenameField(model_name="annotator", old_name="attributes", new_name="study_attributes"),
        migrations.AlterField(
            model_name="annotator",
            name="study_pool",
            field=models.CharField(
                choices=[("crowd", "Crowd"), ("expert", "Expert")],
                default="crowd",
                help_text="Imported annotators only (study set): their pool in that study",
                max_length=8,
            ),
        ),
        migrations.AlterField(
            model_name="annotator",
            name="study_attributes",
            field=models.JSONField(
                blank=True,
                default=dict,
                help_text="Imported annotators only (study set): e.g. region, for breakdowns",
            ),
        ),
        migrations.AddField(
            model_name="enrollment",
            name="pool",
            field=models.CharField(
                choices=[("crowd", "Crowd"), ("expert", "Expert")], default="crowd", max_length=8
            ),
        ),
        migrations.AddField(
            model_name="enrollment",
            name="attributes",
            field=models.JSONField(
                blank=True, default=dict, help_text="Demographic answers given to this study, for breakdowns"
            ),
        ),
        migrations.RunPython(copy_to_enrollments, copy_back),
        migrations.AddConstraint(
            model_name="annotator",
            constraint=models.CheckConstraint(
                condition=Q(study__isnull=False) | Q(study_pool="crowd"), name="annotator_pool_only_imported"
            ),
        ),
        migrations.AddConstraint(
            model_name="annotator",
            constraint=models.CheckConstraint(
                condition=Q(study__isnull=False) | Q(study_attributes={}),
                name="annotator_attributes_only_imported",
            ),
        ),
    ]
