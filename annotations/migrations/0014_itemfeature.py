"""``ItemFeature`` (embeddings, captions) moves here from ``labelling`` with its table (state only), and
its content type moves with it so permissions granted on it survive: findings read it, and
``annotations`` reads only its own rows."""

import django.db.models.deletion
from django.db import migrations, models


def move_content_type(apps, schema_editor):
    content_type = apps.get_model("contenttypes", "ContentType")
    content_type.objects.filter(app_label="labelling", model="itemfeature").update(app_label="annotations")


def move_content_type_back(apps, schema_editor):
    content_type = apps.get_model("contenttypes", "ContentType")
    content_type.objects.filter(app_label="annotations", model="itemfeature").update(app_label="labelling")


class Migration(migrations.Migration):

    dependencies = [
        ("annotations", "0013_item_identical_files_and_blank_images"),
        ("labelling", "0002_labellingjob_heartbeat"),
        ("contenttypes", "0002_remove_content_type_name"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            database_operations=[],
            state_operations=[
                migrations.CreateModel(
                    name="ItemFeature",
                    fields=[
                        (
                            "id",
                            models.BigAutoField(
                                auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                            ),
                        ),
                        (
                            "kind",
                            models.CharField(
                                choices=[("embedding", "Image embedding"), ("captions", "Captions")],
                                max_length=16,
                            ),
                        ),
                        (
                            "vector",
                            models.BinaryField(
                                blank=True, help_text="float32 little-endian, one row per image", null=True
                            ),
                        ),
                        ("data", models.JSONField(blank=True, default=dict)),
                        ("created_at", models.DateTimeField(auto_now_add=True)),
                        (
                            "annotator",
                            models.ForeignKey(
                                on_delete=django.db.models.deletion.CASCADE,
                                related_name="+",
                                to="annotations.annotator",
                            ),
                        ),
                        (
                            "item",
                            models.ForeignKey(
                                on_delete=django.db.models.deletion.CASCADE,
                                related_name="features",
                                to="annotations.item",
                            ),
                        ),
                    ],
                    options={
                        "db_table": "generation_itemfeature",
                        "constraints": [
                            models.UniqueConstraint(
                                fields=("item", "annotator", "kind"), name="item_feature_unique"
                            )
                        ],
                    },
                ),
            ],
        ),
        migrations.RunPython(move_content_type, move_content_type_back),
    ]
