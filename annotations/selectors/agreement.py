"""The agreement report of a study (SPEC 4): how well humans agree, how well each machine labeller
agrees with them, and the papers' validation tables. Selectors build numpy matrices
(``annotations.selectors.matrices``), ``metrics`` computes, this module assembles plain JSON.

Per question: Krippendorff's alpha of the humans (bootstrap 95% interval over items), of the humans
plus each labeller, and each labeller against the human consensus (accuracy, Cohen's kappa,
per-option precision/recall/F1, confusion matrix), overall and per item condition (and per a
metadata field when asked). Boxes: match rate at IoU >= threshold and mean IoU, between every two
humans and between each labeller and each human. The study line (``study_alpha.headline``) is the
per-question range and median of alpha with the count of reliable questions (``reliability``: one entry per
question, a multi question's options pooled, with its verdict, ``findings/reliability.py``); ``mean``,
``min`` and ``max`` over every alpha (options apart) stay in the JSON for old readers, but no page shows a
mean of alphas (alphas of different levels are not on one scale, and a mean hides the weak question).
Control items and annotators excluded from the study are left out
(``selectors.counted.counted_annotations``; the report's ``left_out`` says how many).

Every alpha entry carries ``small_sample``: None, or a warning in words when a defined alpha rests on
fewer than ``SMALL_SAMPLE_ITEMS`` pairable items (docs/agreement.md, "Small samples"); an undefined
alpha carries its ``undefined_reason`` instead.
"""

from __future__ import annotations

import itertools
from collections import defaultdict
from collections.abc import Iterator
from typing import Any

import numpy as np
from django.db.models import Exists, OuterRef

from annotations.models import Annotator, ConsensusLabel, Item, Study
from annotations.selectors.counted import active_exclusions, counted_annotations, counted_items
from annotations.selectors.cross_pools import CROSS_METHOD, cross_pool_entries
from annotations.selectors.labels import labels_for
from annotations.selectors.matrices import LEVELS, json_key, plurality, question_matrix, reliability_for
from annotations.selectors.pools import attributes_in_study
from annotations.selectors.reliability import (
    reliability_entries,
    reliability_headline,
    reliability_thresholds,
)
from metrics.agreement import (
    alpha_with_bootstrap,
    alpha_with_bootstrap_of_counts,
    krippendorff_alpha,
    krippendorff_alpha_of_counts,
)
from metrics.boxes import box_agreement
from metrics.classification import classification_from_codes, classification_report
from protocols.schema import Question

# Below this many pairable items (items with two or more judgements) a defined alpha is flagged: with
# so few items one disagreement moves it by a lot, and the bootstrap interval, which can only resample
# those items, is too narrow (one item gives "0.000 [0.000, 0.000]").
SMALL_SAMPLE_ITEMS = 10


def small_sample_warning(value: float | None, n_items: int) -> str | None:
    """The warning for a defined alpha on fewer than ``SMALL_SAMPLE_ITEMS`` pairable items, else None."""
    if value is None or n_items >= SMALL_SAMPLE_ITEMS:
        return None
    items = "1 item" if n_items == 1 else f"{n_items} items"
    return (
        f"small sample: only {items} judged by two or more annotators (fewer than {SMALL_SAMPLE_ITEMS}); "
        "this alpha and its interval are not reliable"
    )


def _entry(label: str, coders: int, result: Any) -> dict[str, Any]:
    """One alpha as the report gives it: label, coders, every AlphaResult field and the warning."""
    data = result.to_dict()
    return {
        "label": label,
        "coders": coders,
        **data,
        "small_sample": small_sample_warning(data["value"], data["n_items"]),
    }


def _annotators(study: Study) -> tuple[list[int], list[Annotator]]:
    # One probe per annotator (EXISTS stops at the first counted annotation), not a DISTINCT over all.
    answered = counted_annotations(study).filter(annotator=OuterRef("pk"))
    annotators = list(Annotator.objects.filter(Exists(answered)).order_by("name", "version"))
    return (
        [a.pk for a in annotators if a.kind == Annotator.Kind.HUMAN],
        [a for a in annotators if a.kind == Annotator.Kind.MACHINE],
    )


def _label(annotator: Annotator) -> str:
    return f"{annotator.name}@{annotator.version}" if annotator.version else annotator.name


def _alpha_entries(
    study: Study, question: Question, annotator_ids: list[int], *, bootstrap: int, seed: int
) -> list[dict[str, Any]]:
    entries = []
    for data in reliability_for(study, question, annotator_ids=annotator_ids):
        result = (
            alpha_with_bootstrap_of_counts(data.counts, level=data.level, n_resamples=bootstrap, seed=seed)
            if bootstrap
            else krippendorff_alpha_of_counts(data.counts, level=data.level)
        )
        entries.append(_entry(data.label, len(data.annotator_ids), result))
    return entries


def _multi_vs_consensus(
    study: Study, question: Question, machine: Annotator, consensus: dict[int, Any]
) -> dict[str, Any]:
    """Per option of a multi question: the labeller's ticks against the consensus's, as 0/1 classes."""
    answers = dict(
        counted_annotations(study)
        .filter(question_key=question.key, annotator=machine)
        .values_list("item_id", "value")
    )
    pairs = [
        (item_id, consensus[item_id], answers[item_id])
        for item_id in answers
        if consensus.get(item_id) is not None
    ]
    options = sorted({option for _i, ref, pred in pairs for option in [*ref, *pred]})
    per_option = {}
    for option in options:
        reference = [int(option in ref) for _i, ref, _p in pairs]
        predicted = [int(option in pred) for _i, _r, pred in pairs]
        per_option[option] = classification_report(reference, predicted, labels=[0, 1]).to_dict()
    return {"labeller": _label(machine), "n_items": len(pairs), "per_option": per_option}


def _boxes(
    study: Study, question: Question, humans: list[int], machines: list[Annotator], threshold: float
) -> dict[str, Any]:
    boxes: dict[int, dict[int, list[tuple[int, int, int, int]]]] = defaultdict(dict)
    for item_id, annotator_id, value in (
        counted_annotations(study)
        .filter(question_key=question.key)
        .values_list("item_id", "annotator_id", "value")
    ):
        boxes[item_id][annotator_id] = [(b["x"], b["y"], b["w"], b["h"]) for b in value or []]

    # Per item, the pairs among the annotators who drew on it, in the order of ``humans`` (what
    # filtering every pair of the study's humans per item gives, without listing all N^2 / 2 pairs:
    # 160 million pairs of the 17,930 raters of ViSAGe's full release, for each item; issue 26).
    rank = {annotator_id: position for position, annotator_id in enumerate(humans)}

    def present(by: dict[int, Any]) -> list[int]:
        return sorted((a for a in by if a in rank), key=rank.__getitem__)

    human_items = [(by[a], by[b]) for by in boxes.values() for a, b in itertools.combinations(present(by), 2)]
    result: dict[str, Any] = {
        "threshold": threshold,
        "humans": box_agreement(human_items, threshold=threshold).to_dict(),
    }
    for machine in machines:
        machine_items = [
            (by[machine.pk], by[h]) for by in boxes.values() if machine.pk in by for h in present(by)
        ]
        result[_label(machine)] = box_agreement(machine_items, threshold=threshold).to_dict()
    return result


def agreement_report(
    *,
    study: Study,
    n_resamples: int = 1000,
    seed: int = 0,
    breakdown: str | None = None,
    iou_threshold: float = 0.5,
) -> dict[str, Any]:
    """The whole report as JSON-ready data (see the module docstring).

    ``breakdown``: an item metadata field for the labeller comparisons, or ``annotator:KEY`` for
    the human alpha within each group of annotators sharing one answer KEY given to *this* study
    (``selectors.pools.attributes_in_study``: e.g. the region an invited participant gave on the
    demographic form; see docs/crowd.md).
    """
    protocol = study.protocol_obj
    humans, machines = _annotators(study)
    by_annotator = (
        breakdown[len(ANNOTATOR_BREAKDOWN) :]
        if breakdown and breakdown.startswith(ANNOTATOR_BREAKDOWN)
        else None
    )
    if by_annotator is not None:
        breakdown = None
    items = ItemGroups(study, breakdown)
    questions = []
    for question in protocol.questions:
        entry: dict[str, Any] = {"key": question.key, "kind": question.kind}
        if question.kind == "boxes":
            entry["boxes"] = _boxes(study, question, humans, machines, iou_threshold)
        elif question.kind == "multi":
            entry["humans"] = _alpha_entries(study, question, humans, bootstrap=n_resamples, seed=seed)
            entry["humans_plus"] = {
                _label(m): _alpha_entries(study, question, [*humans, m.pk], bootstrap=0, seed=seed)
                for m in machines
            }
            if machines:
                consensus = labels_for(study, question.key, "consensus").values
                entry["machines_vs_consensus"] = [
                    _multi_vs_consensus(study, question, m, consensus) for m in machines
                ]
        else:
            entry.update(_single_answer_entry(study, question, humans, machines, items, n_resamples, seed))
        questions.append(entry)
    defined = [a["value"] for q in questions for a in q.get("humans", []) if a["value"] is not None]
    small = sum(1 for q in questions for a in q.get("humans", []) if a["small_sample"])
    # The study line: per question (a multi question's options pooled) the range and median of alpha and
    # how many questions are reliable under the study's thresholds; never a mean of alphas.
    thresholds = reliability_thresholds(study)
    reliability = reliability_entries(study, [q.key for q in protocol.questions], thresholds)
    report: dict[str, Any] = {
        "study": study.pk,
        "name": study.name,
        "n_items": len(items),
        "human_annotators": len(humans),
        "labellers": [_label(m) for m in machines],
        "n_resamples": n_resamples,
        "seed": seed,
        "study_alpha": {
            "mean": sum(defined) / len(defined) if defined else None,
            "min": min(defined) if defined else None,
            "max": max(defined) if defined else None,
            "n_alphas": len(defined),
            "n_small_sample": small,
            "undefined_reason": None if defined else "no question has a defined alpha",
            "headline": reliability_headline(reliability),
        },
        "reliability": reliability,
        "reliability_thresholds": {**thresholds.to_dict(), "statement": thresholds.statement()},
        "questions": questions,
        "left_out": {
            "control_items": Item.objects.filter(study=study).exclude(control_kind="").count(),
            "excluded_annotators": sorted(active_exclusions(study).values_list("annotator__name", flat=True)),
        },
    }
    report["validation"] = _validation_tables(study, protocol, machines)
    if by_annotator:
        report["by_annotator_attribute"] = _alpha_by_annotator_attribute(
            study, protocol, humans, by_annotator, n_resamples, seed
        )
    return report


ANNOTATOR_BREAKDOWN = "annotator:"


NOT_GIVEN = "(not given)"


def _alpha_by_annotator_attribute(
    study: Study, protocol: Any, humans: list[int], key: str, n_resamples: int, seed: int
) -> dict[str, Any]:
    """Alpha among the humans of each group sharing one answer ``key`` given to this study, with its
    bootstrap interval over items, and between every two groups their cross-replication reliability
    (``cross``: kappa_x, its normalised form and majority agreement; ``selectors.cross_pools``).

    Annotators without the attribute form the group ``(not given)``, which has an alpha but is no pool:
    it enters no cross pair. ``value`` in a group's alpha entry is agreement within the group (do raters
    from one region agree with each other?); ``cross`` is agreement between groups.
    """
    attributes = attributes_in_study(study.pk, list(humans))
    groups: dict[str, list[int]] = defaultdict(list)
    for annotator_id in humans:
        value = (attributes.get(annotator_id) or {}).get(key)
        groups[NOT_GIVEN if value in (None, "") else str(value)].append(annotator_id)
    pools = {group: ids for group, ids in sorted(groups.items()) if group != NOT_GIVEN}
    return {
        "attribute": key,
        "groups": [
            {
                "group": group,
                "annotators": len(ids),
                "questions": [
                    {
                        "key": question.key,
                        "humans": _alpha_entries(study, question, ids, bootstrap=n_resamples, seed=seed),
                    }
                    for question in protocol.questions
                    if question.kind != "boxes"
                ],
            }
            for group, ids in sorted(groups.items())
        ],
        "cross": cross_pool_entries(study, protocol, pools, n_resamples=n_resamples, seed=seed),
        "cross_method": CROSS_METHOD,
    }


def _single_answer_entry(
    study: Study,
    question: Question,
    humans: list[int],
    machines: list[Annotator],
    items: ItemGroups,
    n_resamples: int,
    seed: int,
) -> dict[str, Any]:
    """Alphas and machine comparisons of a likert/single/binary/text question from ONE matrix, with
    every comparison counted on value codes (no Python loop over items)."""
    data = question_matrix(study, question)
    if data is None:
        empty = krippendorff_alpha(np.empty((0, 0)), level=LEVELS[question.kind])
        return {"humans": [_entry(question.key, 0, empty)], "humans_plus": {}}
    level = data.level

    def alpha(rows: np.ndarray, bootstrap: int) -> dict[str, Any]:
        result = (
            alpha_with_bootstrap(rows, level=level, n_resamples=bootstrap, seed=seed)
            if bootstrap
            else krippendorff_alpha(rows, level=level)
        )
        return _entry(question.key, int(rows.shape[0]), result)

    human_rows = data.rows(humans)
    entry: dict[str, Any] = {
        "humans": [alpha(human_rows, n_resamples)],
        "humans_plus": {_label(m): [alpha(data.rows([*humans, m.pk]), 0)] for m in machines},
    }
    if not machines:
        return entry
    values = [json_key(value) for value in data.values]
    if ConsensusLabel.objects.filter(study=study, question_key=question.key).exists():
        code_of = {value: code for code, value in enumerate(values)}
        reference = np.full(len(data.item_ids), np.nan)
        column = {item_id: position for position, item_id in enumerate(data.item_ids)}
        for item_id, value in ConsensusLabel.objects.filter(
            study=study, question_key=question.key, resolved=True
        ).values_list("item_id", "value"):
            if item_id in column:
                reference[column[item_id]] = code_of.setdefault(json_key(value), len(values))
                if len(code_of) > len(values):
                    values.append(json_key(value))
    else:
        reference = plurality(human_rows, len(values))
    comparisons = []
    for machine in machines:
        machine_row = data.rows([machine.pk])
        predicted = machine_row[0] if machine_row.size else np.full(len(data.item_ids), np.nan)
        answered = ~np.isnan(predicted) & ~np.isnan(reference)
        comparisons.append(
            _comparison(
                machine,
                reference[answered],
                predicted[answered],
                values,
                np.asarray(data.item_ids)[answered],
                items,
            )
        )
    entry["machines_vs_consensus"] = comparisons
    return entry


class ItemGroups:
    """The groups of a study's items for breakdowns: condition always, one metadata field when asked;
    one query each, kept as sorted item ids with a group code per id (no model instances)."""

    def __init__(self, study: Study, breakdown: str | None) -> None:
        self.breakdown = breakdown
        rows = list(counted_items(study).order_by("id").values_list("id", "condition"))
        self.item_ids = np.fromiter((row[0] for row in rows), dtype=np.int64, count=len(rows))
        self.conditions = self._coded([row[1] for row in rows])
        self.fields = (
            self._coded(
                [
                    str((metadata or {}).get(breakdown))
                    for metadata in counted_items(study).order_by("id").values_list("metadata", flat=True)
                ]
            )
            if breakdown
            else None
        )

    @staticmethod
    def _coded(names: list[str]) -> tuple[np.ndarray, list[str]]:
        code_of = {name: code for code, name in enumerate(dict.fromkeys(names))}
        return np.fromiter(map(code_of.__getitem__, names), dtype=np.int64, count=len(names)), list(code_of)

    def __len__(self) -> int:
        return int(self.item_ids.size)

    def codes(
        self, grouping: tuple[np.ndarray, list[str]], item_ids: np.ndarray
    ) -> tuple[np.ndarray, list[str]]:
        """The group code of each of ``item_ids`` (all items of the study) and the group names."""
        codes, names = grouping
        return codes[np.searchsorted(self.item_ids, item_ids)], names


def _comparison(
    machine: Annotator,
    reference: np.ndarray,
    predicted: np.ndarray,
    values: list[Any],
    item_ids: np.ndarray,
    items: ItemGroups,
) -> dict[str, Any]:
    """One labeller's coded answers against the coded reference on the same items."""
    groups, group_values = items.codes(items.conditions, item_ids)
    overall, by_condition = classification_from_codes(
        reference, predicted, values, groups=groups, group_values=group_values
    )
    result: dict[str, Any] = {
        "labeller": _label(machine),
        "n_items": int(reference.size),
        "overall": overall.to_dict(),
    }
    if reference.size:
        result["by_condition"] = [g.to_dict() for g in by_condition]
        if items.fields is not None:
            groups, group_values = items.codes(items.fields, item_ids)
            _all, by_field = classification_from_codes(
                reference, predicted, values, groups=groups, group_values=group_values
            )
            result[f"by_{items.breakdown}"] = [g.to_dict() for g in by_field]
    return result


def _validation_tables(study: Study, protocol: Any, machines: list[Annotator]) -> dict[str, Any]:
    """The papers' headline validation shapes, where the protocol is one of theirs."""
    tables: dict[str, Any] = {}
    if study.preset == "ssi-rubric" and machines:
        # ssi Table 3: accuracy of each labeller's rubric labels vs the consensus,
        # by category x model x condition.
        cells: dict[tuple[str, str, str, str], list[int]] = defaultdict(lambda: [0, 0])
        items = {
            item.pk: item
            for item in Item.objects.filter(study=study).only("id", "condition", "metadata", "model_name")
        }
        for question in protocol.questions:
            consensus = labels_for(study, question.key, "consensus").values
            for machine in machines:
                for item_id, value in (
                    counted_annotations(study)
                    .filter(question_key=question.key, annotator=machine)
                    .values_list("item_id", "value")
                ):
                    if consensus.get(item_id) is None:
                        continue
                    item = items[item_id]
                    key = (
                        _label(machine),
                        str(item.metadata.get("category", "")),
                        item.model_name,
                        item.condition,
                    )
                    cells[key][0] += int(value == consensus[item_id])
                    cells[key][1] += 1
        tables["ssi_accuracy"] = [
            {
                "labeller": k[0],
                "category": k[1],
                "model": k[2],
                "condition": k[3],
                "correct": c,
                "n": n,
                "accuracy": c / n if n else None,
            }
            for k, (c, n) in sorted(cells.items())
        ]
    if study.preset == "attribute-check":
        # soda's human validation: the share of machine-assigned attributes judged appropriate.
        answers = list(
            counted_annotations(study)
            .filter(annotator__kind=Annotator.Kind.HUMAN)
            .values_list("question_key", "value")
        )
        by_question: dict[str, list[int]] = defaultdict(lambda: [0, 0])
        for question_key, value in answers:
            by_question[question_key][0] += int(value == "appropriate")
            by_question[question_key][1] += 1
        total = sum(n for _a, n in by_question.values())
        tables["soda_appropriate"] = {
            "overall": {
                "appropriate": sum(a for a, _n in by_question.values()),
                "n": total,
                "share": sum(a for a, _n in by_question.values()) / total if total else None,
            },
            "by_attribute": {
                k: {"appropriate": a, "n": n, "share": a / n if n else None}
                for k, (a, n) in sorted(by_question.items())
            },
        }
    if study.preset == "subgroup" and machines:
        tables["agent"] = {
            "see": "metrics report (stereotype score, detection accuracy and mean discrepancy "
            "per dimension, machine vs human): manage.py metrics STUDY --source LABELLER"
        }
    return tables


def agreement_csv_rows(report: dict[str, Any]) -> Iterator[list[Any]]:
    """One row per (question or option, comparison) with the headline numbers, for spreadsheets."""
    yield [
        "question",
        "comparison",
        "alpha",
        "ci_low",
        "ci_high",
        "n_items",
        "n_judgements",
        "accuracy",
        "kappa",
        "n_pairs",
        "undefined_reason",
        "small_sample",
    ]
    for question in report["questions"]:
        for alpha in question.get("humans", []):
            yield [
                alpha["label"],
                "humans",
                alpha["value"],
                alpha["ci_low"],
                alpha["ci_high"],
                alpha["n_items"],
                alpha["n_judgements"],
                "",
                "",
                "",
                alpha["undefined_reason"] or "",
                alpha["small_sample"] or "",
            ]
        for labeller, alphas in question.get("humans_plus", {}).items():
            for alpha in alphas:
                yield [
                    alpha["label"],
                    f"humans+{labeller}",
                    alpha["value"],
                    "",
                    "",
                    alpha["n_items"],
                    alpha["n_judgements"],
                    "",
                    "",
                    "",
                    alpha["undefined_reason"] or "",
                    alpha["small_sample"] or "",
                ]
        for machine in question.get("machines_vs_consensus", []):
            overall = machine.get("overall")
            if overall:
                yield [
                    question["key"],
                    f"{machine['labeller']} vs consensus",
                    "",
                    "",
                    "",
                    machine["n_items"],
                    "",
                    overall["accuracy"],
                    overall["kappa"],
                    overall["n_pairs"],
                    overall["kappa_undefined_reason"] or overall["accuracy_undefined_reason"] or "",
                    "",
                ]
