"""The labelling models moved to the ``labelling`` app: removed from this app's state only; their
tables stay (``labelling.models`` names them with ``db_table``)."""

from django.db import migrations


class Migration(migrations.Migration):

    dependencies = [
        ("generation", "0002_labelling"),
        ("labelling", "0001_initial"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            database_operations=[],
            state_operations=[
                migrations.RemoveField(
                    model_name='itemfeature',
                    name='annotator',
                ),
                migrations.RemoveField(
                    model_name='itemfeature',
                    name='item',
                ),
                migrations.RemoveField(
                    model_name='labelattempt',
                    name='item',
                ),
                migrations.RemoveField(
                    model_name='labelattempt',
                    name='job',
                ),
                migrations.DeleteModel(
                    name='LabelCacheEntry',
                ),
                migrations.RemoveField(
                    model_name='labellingjob',
                    name='annotator',
                ),
                migrations.RemoveField(
                    model_name='labellingjob',
                    name='created_by',
                ),
                migrations.RemoveField(
                    model_name='labellingjob',
                    name='study',
                ),
                migrations.DeleteModel(
                    name='ItemFeature',
                ),
                migrations.DeleteModel(
                    name='LabelAttempt',
                ),
                migrations.DeleteModel(
                    name='LabellingJob',
                ),
            ],
        ),
    ]
