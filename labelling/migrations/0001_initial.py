"""The labelling models, moved here from ``generation`` with their tables (state only), and their
content types moved with them so permissions granted on them survive."""

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models


MODELS = ("labellingjob", "labelattempt", "labelcacheentry", "itemfeature")


def move_content_types(apps, schema_editor):
    content_type = apps.get_model("contenttypes", "ContentType")
    content_type.objects.filter(app_label="generation", model__in=MODELS).update(app_label="labelling")


def move_content_types_back(apps, schema_editor):
    content_type = apps.get_model("contenttypes", "ContentType")
    content_type.objects.filter(app_label="labelling", model__in=MODELS).update(app_label="generation")


class Migration(migrations.Migration):

    initial = True

    dependencies = [
        ('annotations', '0007_quality'),
        ('generation', '0002_labelling'),
        ('contenttypes', '0002_remove_content_type_name'),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            database_operations=[],
            state_operations=[
                migrations.CreateModel(
                    name='LabelCacheEntry',
                    fields=[
                        ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                        ('key', models.CharField(max_length=64, unique=True)),
                        ('raw', models.TextField()),
                        ('usage', models.JSONField(blank=True, default=dict)),
                        ('model', models.CharField(blank=True, max_length=200)),
                        ('created_at', models.DateTimeField(auto_now_add=True)),
                    ],
                    options={
                        'db_table': 'generation_labelcacheentry',
                    },
                ),
                migrations.CreateModel(
                    name='LabellingJob',
                    fields=[
                        ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                        ('status', models.CharField(choices=[('pending', 'Pending'), ('running', 'Running'), ('done', 'Done'), ('failed', 'Failed'), ('cancelled', 'Cancelled')], default='pending', max_length=16)),
                        ('cancel_requested', models.BooleanField(default=False)),
                        ('error', models.TextField(blank=True)),
                        ('created_at', models.DateTimeField(auto_now_add=True)),
                        ('started_at', models.DateTimeField(blank=True, null=True)),
                        ('finished_at', models.DateTimeField(blank=True, null=True)),
                        ('sample_size', models.PositiveIntegerField(blank=True, help_text='None: every item', null=True)),
                        ('seed', models.BigIntegerField(default=0)),
                        ('total_items', models.PositiveIntegerField(default=0)),
                        ('done_items', models.PositiveIntegerField(default=0)),
                        ('answered', models.PositiveIntegerField(default=0, help_text='Answers stored')),
                        ('failed', models.PositiveIntegerField(default=0, help_text='Answers that failed every attempt')),
                        ('cached', models.PositiveIntegerField(default=0, help_text='Answers served from the cache')),
                        ('skipped', models.PositiveIntegerField(default=0, help_text='Items already answered by this labeller')),
                        ('cost_usd', models.FloatField(default=0.0)),
                        ('annotator', models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name='labelling_jobs', to='annotations.annotator')),
                        ('created_by', models.ForeignKey(null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to=settings.AUTH_USER_MODEL)),
                        ('study', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='labelling_jobs', to='annotations.study')),
                    ],
                    options={
                        'db_table': 'generation_labellingjob',
                        'ordering': ['-created_at', '-id'],
                        'abstract': False,
                    },
                ),
                migrations.CreateModel(
                    name='LabelAttempt',
                    fields=[
                        ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                        ('question_key', models.CharField(max_length=64)),
                        ('attempt', models.PositiveSmallIntegerField(default=1)),
                        ('raw', models.TextField(blank=True)),
                        ('error', models.TextField()),
                        ('latency_s', models.FloatField(default=0.0)),
                        ('created_at', models.DateTimeField(auto_now_add=True)),
                        ('item', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='+', to='annotations.item')),
                        ('job', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='attempts', to='labelling.labellingjob')),
                    ],
                    options={
                        'db_table': 'generation_labelattempt',
                        'ordering': ['id'],
                    },
                ),
                migrations.CreateModel(
                    name='ItemFeature',
                    fields=[
                        ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                        ('kind', models.CharField(choices=[('embedding', 'Image embedding'), ('captions', 'Captions')], max_length=16)),
                        ('vector', models.BinaryField(blank=True, help_text='float32 little-endian, one row per image', null=True)),
                        ('data', models.JSONField(blank=True, default=dict)),
                        ('created_at', models.DateTimeField(auto_now_add=True)),
                        ('annotator', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='+', to='annotations.annotator')),
                        ('item', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='features', to='annotations.item')),
                    ],
                    options={
                        'db_table': 'generation_itemfeature',
                        'constraints': [models.UniqueConstraint(fields=('item', 'annotator', 'kind'), name='item_feature_unique')],
                    },
                ),
            ],
        ),
        migrations.RunPython(move_content_types, reverse_code=move_content_types_back),
    ]
