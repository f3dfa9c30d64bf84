# Items with identical files are kept (issue 14, point 3): the unique (study, sha256) constraint goes (a plain
# index keeps the import's hash lookup fast), and each image gets is_blank / blank_colour, computed here for
# the images already stored (a file that cannot be read stays None: unknown).
#
# Backwards: the old schema holds one item per file hash and study, so the hash of every later item with an
# already-seen hash is blanked (the items and their files stay) before the constraint comes back.

from django.db import migrations, models

# As of this migration (common.files.SINGLE_COLOUR_TOLERANCE): levels of 255 per channel.
TOLERANCE = 8
CHUNK = 500


def _single_colour(handle):
    from PIL import Image

    with Image.open(handle) as image:
        rgb = image.convert("RGB")
        extrema = rgb.getextrema()
    if any(high - low > TOLERANCE for low, high in extrema):
        return ""
    return "#" + "".join(f"{(low + high) // 2:02x}" for low, high in extrema)


def blank_images_mark(apps, schema_editor):
    ItemImage = apps.get_model("annotations", "ItemImage")
    batch = []
    for image in ItemImage.objects.exclude(file="").only("id", "file").iterator(chunk_size=CHUNK):
        try:
            with image.file.open("rb") as handle:
                colour = _single_colour(handle)
        except Exception:  # a missing or unreadable file: unknown, as before
            continue
        image.is_blank, image.blank_colour = bool(colour), colour
        batch.append(image)
        if len(batch) >= CHUNK:
            ItemImage.objects.bulk_update(batch, ["is_blank", "blank_colour"])
            batch = []
    if batch:
        ItemImage.objects.bulk_update(batch, ["is_blank", "blank_colour"])


def repeated_hashes_blank(apps, schema_editor):
    Item = apps.get_model("annotations", "Item")
    seen = set()
    repeated = []
    rows = Item.objects.exclude(sha256="").order_by("id").values_list("id", "study_id", "sha256")
    for pk, study_id, digest in rows.iterator(chunk_size=CHUNK):
        if (study_id, digest) in seen:
            repeated.append(pk)
        seen.add((study_id, digest))
    for start in range(0, len(repeated), CHUNK):
        Item.objects.filter(pk__in=repeated[start : start + CHUNK]).update(sha256="")


class Migration(migrations.Migration):
    dependencies = [
        ("annotations", "0012_pool_and_attributes_per_enrollment"),
    ]

    operations = [
        migrations.RemoveConstraint(
            model_name="item",
            name="item_sha256_unique_in_study",
        ),
        migrations.RunPython(migrations.RunPython.noop, repeated_hashes_blank),
        migrations.AddField(
            model_name="itemimage",
            name="blank_colour",
            field=models.CharField(blank=True, help_text="#rrggbb of a blank image", max_length=7),
        ),
        migrations.AddField(
            model_name="itemimage",
            name="is_blank",
            field=models.BooleanField(
                help_text="Every pixel (nearly) one colour (common.files.single_colour_of), set at import; "
                "None: no file, or stored before the check existed and not readable since",
                null=True,
            ),
        ),
        migrations.AlterField(
            model_name="item",
            name="sha256",
            field=models.CharField(
                blank=True,
                help_text="Of the file, or of the set's file hashes; items with distinct ids may share it "
                "(kept, reported as identical content at import)",
                max_length=64,
            ),
        ),
        migrations.AddIndex(
            model_name="item",
            index=models.Index(fields=["study", "sha256"], name="item_sha256"),
        ),
        migrations.RunPython(blank_images_mark, migrations.RunPython.noop),
    ]
