"""The labelling tables lose the names they kept from the ``generation`` app (``generation_*``, see
0001_initial): renamed to Django's default ``labelling_*`` names, rows and keys unchanged.
``ItemFeature`` (an ``annotations`` model since 0003) keeps its ``generation_itemfeature`` table."""

from django.db import migrations


class Migration(migrations.Migration):

    dependencies = [
        ("labelling", "0006_job_progress_at"),
    ]

    operations = [
        migrations.AlterModelTable(
            name="labellingjob",
            table=None,
        ),
        migrations.AlterModelTable(
            name="labelattempt",
            table=None,
        ),
        migrations.AlterModelTable(
            name="labelcacheentry",
            table=None,
        ),
    ]
