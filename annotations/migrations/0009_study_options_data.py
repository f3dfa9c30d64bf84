# Moves each key of the old Study.options JSON bag into the typed fields and tables of 0008, and back.
#
# Values the code of 0007 could not use are read the way that code read them, or dropped for the
# default: a seed that is not a whole number (or is negative: the SODA permutations refuse it) is
# left empty (read as 0, as before); a quality setting out of its range or not a number is left empty
# (read as its default, as before); a consensus rule that is unknown or lacks its parameters is dropped
# (the preset's rule or majority applies; before, computing failed); a validation sample without a list
# of item ids is dropped (before, every claim failed) and its ids that are not items of the study are
# left out (no claim could hand them out); a visual-ness study id that names no other study is dropped.
# Keys no code read are dropped. The reverse writes the bag the export writes.

from django.db import migrations

# As of this migration (annotations.models.QUALITY_SETTINGS): name -> (lowest, highest, whole number).
QUALITY = {
    "control_rate": (0.0, 0.5, False),
    "qualification_items": (0, 100, True),
    "qualification_min_accuracy": (0.0, 1.0, False),
    "min_gold_accuracy": (0.0, 1.0, False),
    "max_attention_failures": (0, 1000, True),
    "loo_margin": (0.0, 1.0, False),
    "loo_min_n": (1, 100000, True),
    "min_median_seconds": (0.0, 3600.0, False),
    "max_straight_run": (0, 100000, True),
}
RULES = ("majority", "unanimous", "at-least-k", "all-agree-set", "dawid-skene")
BIGINT_MAX = 2**63 - 1
CHUNK = 500


def _whole(value):
    """An int, or a string of digits (as the old readers took them); else None."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str) and value.lstrip("-").isdigit():
        return int(value)
    return None


def _seed(value):
    number = _whole(value)
    return number if number is not None and 0 <= number <= BIGINT_MAX else None


def _quality(raw):
    values = {}
    if not isinstance(raw, dict):
        return values
    for name, (low, high, whole) in QUALITY.items():
        value = raw.get(name)
        if isinstance(value, bool) or not isinstance(value, int | float) or value != value:
            continue
        if not low <= value <= high or (whole and int(value) != value):
            continue
        values[name] = int(value) if whole else float(value)
    return values


def _rules(raw):
    rules = {}
    if not isinstance(raw, dict):
        return rules
    for key, rule in raw.items():
        if not isinstance(key, str) or not key or len(key) > 64 or not isinstance(rule, dict):
            continue
        name = rule.get("rule")
        if name not in RULES:
            continue
        if name == "at-least-k" and not (isinstance(rule.get("k"), int) and rule["k"] >= 1):
            continue
        if name == "all-agree-set" and not rule.get("agree_values"):
            continue
        rules[key] = (name, {k: v for k, v in rule.items() if k != "rule"})
    return rules


def options_to_tables(apps, schema_editor):
    Study = apps.get_model("annotations", "Study")
    Item = apps.get_model("annotations", "Item")
    Annotator = apps.get_model("annotations", "Annotator")
    StudyQualitySettings = apps.get_model("annotations", "StudyQualitySettings")
    ConsensusRuleChoice = apps.get_model("annotations", "ConsensusRuleChoice")
    ValidationSample = apps.get_model("annotations", "ValidationSample")
    ValidationSampleItem = apps.get_model("annotations", "ValidationSampleItem")
    db = schema_editor.connection.alias
    study_ids = set(Study.objects.using(db).values_list("pk", flat=True))
    # A list, not an iterator: SQLite gives no isolation between a cursor and writes to its table.
    for study_id, options in list(Study.objects.using(db).values_list("pk", "options")):
        if not isinstance(options, dict) or not options:
            continue
        linked = _whole(options.get("visualness_study"))
        imported_from = options.get("imported_from")
        Study.objects.using(db).filter(pk=study_id).update(
            reveal_after_submit=bool(options.get("reveal_after_submit")),
            seed=_seed(options["seed"]) if "seed" in options else None,
            imported_from=imported_from[:255] if isinstance(imported_from, str) else "",
            visualness_study_id=linked if linked in study_ids and linked != study_id else None,
        )
        quality = _quality(options.get("quality"))
        if quality:
            StudyQualitySettings.objects.using(db).create(study_id=study_id, **quality)
        ConsensusRuleChoice.objects.using(db).bulk_create(
            ConsensusRuleChoice(study_id=study_id, question_key=key, rule=name, params=params)
            for key, (name, params) in _rules(options.get("consensus")).items()
        )
        sample = options.get("validation_sample")
        if not (sample and isinstance(sample, dict) and isinstance(sample.get("item_ids"), list)):
            continue
        wanted = sorted({n for n in map(_whole, sample["item_ids"]) if n is not None})
        item_ids = []
        for start in range(0, len(wanted), CHUNK):
            item_ids += Item.objects.using(db).filter(
                study_id=study_id, pk__in=wanted[start : start + CHUNK]
            ).values_list("pk", flat=True)
        labeller = _whole(sample.get("labeller"))
        name, stratify_by = sample.get("labeller_name"), sample.get("stratify_by")
        ValidationSample.objects.using(db).create(
            study_id=study_id,
            labeller_id=labeller if Annotator.objects.using(db).filter(pk=labeller).exists() else None,
            labeller_name=name[:150] if isinstance(name, str) else "",
            seed=_seed(sample.get("seed")) or 0,
            stratify_by=stratify_by[:200] if isinstance(stratify_by, str) else "",
        )
        ValidationSampleItem.objects.using(db).bulk_create(
            (ValidationSampleItem(sample_id=study_id, item_id=item_id) for item_id in sorted(item_ids)),
            batch_size=CHUNK,
        )


def tables_to_options(apps, schema_editor):
    Study = apps.get_model("annotations", "Study")
    StudyQualitySettings = apps.get_model("annotations", "StudyQualitySettings")
    ConsensusRuleChoice = apps.get_model("annotations", "ConsensusRuleChoice")
    ValidationSample = apps.get_model("annotations", "ValidationSample")
    ValidationSampleItem = apps.get_model("annotations", "ValidationSampleItem")
    db = schema_editor.connection.alias
    for study in list(Study.objects.using(db).defer("protocol")):
        options = {}
        if study.reveal_after_submit:
            options["reveal_after_submit"] = True
        if study.seed is not None:
            options["seed"] = study.seed
        if study.imported_from:
            options["imported_from"] = study.imported_from
        if study.visualness_study_id is not None:
            options["visualness_study"] = study.visualness_study_id
        quality = StudyQualitySettings.objects.using(db).filter(study_id=study.pk).first()
        chosen = {name: getattr(quality, name) for name in QUALITY if quality and getattr(quality, name) is not None}
        if chosen:
            options["quality"] = chosen
        rules = {
            choice.question_key: {"rule": choice.rule, **choice.params}
            for choice in ConsensusRuleChoice.objects.using(db).filter(study_id=study.pk).order_by("id")
        }
        if rules:
            options["consensus"] = rules
        sample = ValidationSample.objects.using(db).filter(study_id=study.pk).first()
        if sample is not None:
            options["validation_sample"] = {
                "labeller": sample.labeller_id,
                "labeller_name": sample.labeller_name,
                "item_ids": sorted(
                    ValidationSampleItem.objects.using(db).filter(sample_id=study.pk).values_list("item_id", flat=True)
                ),
                "seed": sample.seed,
                "stratify_by": sample.stratify_by,
            }
        if options:
            Study.objects.using(db).filter(pk=study.pk).update(options=options)


class Migration(migrations.Migration):

    dependencies = [
        ("annotations", "0008_study_settings"),
    ]

    operations = [
        migrations.RunPython(options_to_tables, tables_to_options),
    ]
