"""``ItemFeature`` moved to ``annotations``: removed from this app's state only; its table stays
(``annotations.models.ItemFeature`` names it with ``db_table``)."""

from django.db import migrations


class Migration(migrations.Migration):

    dependencies = [
        ("labelling", "0002_labellingjob_heartbeat"),
        ("annotations", "0014_itemfeature"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            database_operations=[],
            state_operations=[
                migrations.RemoveField(model_name="itemfeature", name="annotator"),
                migrations.RemoveField(model_name="itemfeature", name="item"),
                migrations.DeleteModel(name="ItemFeature"),
            ],
        ),
    ]
