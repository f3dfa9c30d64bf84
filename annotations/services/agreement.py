"""The agreement report of a study (SPEC 4): how well humans agree, how well each machine labeller
agrees with them, and the papers' validation tables. Selectors build numpy matrices
(``annotations.agreement_data``), ``metrics`` computes, this module assembles plain JSON.

Per question: Krippendorff's alpha of the humans (bootstrap 95% interval over items), of the humans
plus each labeller, and each labeller against the human consensus (accuracy, Cohen's kappa,
per-option precision/recall/F1, confusion matrix), overall and per item condition (and per a
metadata field when asked). Boxes: match rate at IoU >= threshold and mean IoU, between every two
humans and between each labeller and each human. The study line is the mean of the defined
per-question alphas (alphas of different levels are not pooled into one matrix). Control items and
annotators excluded from the study are left out (``selectors.counted_annotations``; the report's
``left_out`` says how many).
"""

from __future__ import annotations

import itertools
from collections import defaultdict
from collections.abc import Iterator
from typing import Any

import numpy as np

from annotations.agreement_data import LEVELS, json_key, plurality, question_matrix, reliability_for
from annotations.metric_inputs import labels_for
from annotations.models import Annotator, ConsensusLabel, Item, Study
from annotations.protocols import Question
from annotations.selectors import active_exclusions, counted_annotations, counted_items
from metrics.agreement import alpha_with_bootstrap, krippendorff_alpha
from metrics.boxes import box_agreement
from metrics.classification import classification_by_group, classification_report


def _annotators(study: Study) -> tuple[list[int], list[Annotator]]:
    ids = counted_annotations(study).values_list("annotator_id", flat=True).distinct()
    annotators = list(Annotator.objects.filter(pk__in=ids).order_by("name", "version"))
    return ([a.pk for a in annotators if a.kind == Annotator.Kind.HUMAN],
            [a for a in annotators if a.kind == Annotator.Kind.MACHINE])


def _label(annotator: Annotator) -> str:
    return f"{annotator.name}@{annotator.version}" if annotator.version else annotator.name


def _alpha_entries(study: Study, question: Question, annotator_ids: list[int], *, bootstrap: int,
                   seed: int) -> list[dict[str, Any]]:
    entries = []
    for data in reliability_for(study, question, annotator_ids=annotator_ids):
        result = (alpha_with_bootstrap(data.matrix, level=data.level, n_resamples=bootstrap, seed=seed)  # type: ignore[arg-type]
                  if bootstrap else krippendorff_alpha(data.matrix, level=data.level))  # type: ignore[arg-type]
        entries.append({"label": data.label, "coders": len(data.annotator_ids), **result.to_dict()})
    return entries


def _machine_vs_consensus(study: Study, question: Question, machine: Annotator, consensus: dict[int, Any],
                          items: dict[int, Item], breakdown: str | None) -> dict[str, Any]:
    answers = dict(counted_annotations(study).filter(question_key=question.key, annotator=machine)
                   .values_list("item_id", "value"))
    pairs = [(item_id, consensus[item_id], answers[item_id]) for item_id in answers
             if consensus.get(item_id) is not None]
    if question.kind == "multi":
        options = sorted({option for _i, ref, pred in pairs for option in [*ref, *pred]})
        per_option = {}
        for option in options:
            reference = [int(option in ref) for _i, ref, _p in pairs]
            predicted = [int(option in pred) for _i, _r, pred in pairs]
            per_option[option] = classification_report(reference, predicted, labels=[0, 1]).to_dict()
        return {"labeller": _label(machine), "n_items": len(pairs), "per_option": per_option}
    return _comparison(machine, pairs, items, breakdown)


def _boxes(study: Study, question: Question, humans: list[int], machines: list[Annotator],
           threshold: float) -> dict[str, Any]:
    boxes: dict[int, dict[int, list[tuple[int, int, int, int]]]] = defaultdict(dict)
    for item_id, annotator_id, value in counted_annotations(study).filter(question_key=question.key).values_list(
            "item_id", "annotator_id", "value"):
        boxes[item_id][annotator_id] = [(b["x"], b["y"], b["w"], b["h"]) for b in value or []]

    def pooled(pairs: Iterator[tuple[int, int]]) -> dict[str, Any]:
        items = [(by[a], by[b]) for by in boxes.values() for a, b in pairs_for(by, pairs)]
        return box_agreement(items, threshold=threshold).to_dict()

    def pairs_for(by: dict[int, Any], pairs: Iterator[tuple[int, int]]) -> list[tuple[int, int]]:
        return [(a, b) for a, b in pairs if a in by and b in by]

    result: dict[str, Any] = {"threshold": threshold,
                              "humans": pooled(list(itertools.combinations(humans, 2)))}  # type: ignore[arg-type]
    for machine in machines:
        result[_label(machine)] = pooled([(machine.pk, h) for h in humans])  # type: ignore[arg-type]
    return result


def agreement_report(*, study: Study, n_resamples: int = 1000, seed: int = 0, breakdown: str | None = None,
                     iou_threshold: float = 0.5) -> dict[str, Any]:
    """The whole report as JSON-ready data (see the module docstring)."""
    protocol = study.protocol_obj
    humans, machines = _annotators(study)
    items = {item.pk: item for item in counted_items(study).only("id", "condition", "metadata",
                                                                   "model_name", "external_id")}
    questions = []
    for question in protocol.questions:
        entry: dict[str, Any] = {"key": question.key, "kind": question.kind}
        if question.kind == "boxes":
            entry["boxes"] = _boxes(study, question, humans, machines, iou_threshold)
        elif question.kind == "multi":
            entry["humans"] = _alpha_entries(study, question, humans, bootstrap=n_resamples, seed=seed)
            entry["humans_plus"] = {_label(m): _alpha_entries(study, question, [*humans, m.pk], bootstrap=0,
                                                              seed=seed) for m in machines}
            if machines:
                consensus = labels_for(study, question.key, "consensus").values
                entry["machines_vs_consensus"] = [
                    _machine_vs_consensus(study, question, m, consensus, items, breakdown) for m in machines]
        else:
            entry.update(_single_answer_entry(study, question, humans, machines, items, n_resamples, seed, breakdown))
        questions.append(entry)
    defined = [a["value"] for q in questions for a in q.get("humans", []) if a["value"] is not None]
    report: dict[str, Any] = {
        "study": study.pk, "name": study.name, "n_items": len(items), "human_annotators": len(humans),
        "labellers": [_label(m) for m in machines], "n_resamples": n_resamples, "seed": seed,
        "study_alpha": {"mean": sum(defined) / len(defined) if defined else None,
                        "min": min(defined) if defined else None, "max": max(defined) if defined else None,
                        "n_alphas": len(defined),
                        "undefined_reason": None if defined else "no question has a defined alpha"},
        "questions": questions,
        "left_out": {"control_items": Item.objects.filter(study=study).exclude(control_kind="").count(),
                     "excluded_annotators": sorted(active_exclusions(study).values_list("annotator__name",
                                                                                        flat=True))},
    }
    report["validation"] = _validation_tables(study, protocol, items, machines)
    return report


def _single_answer_entry(study: Study, question: Question, humans: list[int], machines: list[Annotator],
                         items: dict[int, Item], n_resamples: int, seed: int, breakdown: str | None) -> dict[str, Any]:
    """Alphas and machine comparisons of a likert/single/binary/text question from ONE matrix."""
    data = question_matrix(study, question)
    if data is None:
        empty = krippendorff_alpha(np.empty((0, 0)), level=LEVELS[question.kind])  # type: ignore[arg-type]
        return {"humans": [{"label": question.key, "coders": 0, **empty.to_dict()}], "humans_plus": {}}
    level = data.level

    def alpha(rows: np.ndarray, bootstrap: int) -> dict[str, Any]:
        result = (alpha_with_bootstrap(rows, level=level, n_resamples=bootstrap, seed=seed)  # type: ignore[arg-type]
                  if bootstrap else krippendorff_alpha(rows, level=level))  # type: ignore[arg-type]
        return {"label": question.key, "coders": int(rows.shape[0]), **result.to_dict()}

    human_rows = data.rows(humans)
    entry: dict[str, Any] = {"humans": [alpha(human_rows, n_resamples)],
                             "humans_plus": {_label(m): [alpha(data.rows([*humans, m.pk]), 0)] for m in machines}}
    if not machines:
        return entry
    stored = dict(ConsensusLabel.objects.filter(study=study, question_key=question.key, resolved=True,
                                                item__control_kind="")
                  .values_list("item_id", "value")) if ConsensusLabel.objects.filter(
        study=study, question_key=question.key).exists() else None
    if stored is None:
        winners = plurality(human_rows, len(data.values))
        consensus = {item_id: data.values[int(code)] for item_id, code in zip(data.item_ids, winners, strict=True)
                     if code == code}
    else:
        consensus = stored
    comparisons = []
    for machine in machines:
        machine_row = data.rows([machine.pk])
        answers = {} if machine_row.size == 0 else {
            item_id: data.values[int(code)] for item_id, code in zip(data.item_ids, machine_row[0], strict=True)
            if code == code}
        pairs = [(item_id, consensus[item_id], answers[item_id]) for item_id in answers if item_id in consensus]
        comparisons.append(_comparison(machine, pairs, items, breakdown))
    entry["machines_vs_consensus"] = comparisons
    return entry


def _comparison(machine: Annotator, pairs: list[tuple[int, Any, Any]], items: dict[int, Item],
                breakdown: str | None) -> dict[str, Any]:
    reference = [json_key(ref) for _i, ref, _p in pairs]
    predicted = [json_key(pred) for _i, _r, pred in pairs]
    result: dict[str, Any] = {"labeller": _label(machine), "n_items": len(pairs),
                              "overall": classification_report(reference, predicted).to_dict()}
    if pairs:
        conditions = [items[item_id].condition for item_id, _r, _p in pairs]
        result["by_condition"] = [g.to_dict() for g in classification_by_group(reference, predicted, conditions)]
        if breakdown:
            groups = [str(items[item_id].metadata.get(breakdown)) for item_id, _r, _p in pairs]
            result[f"by_{breakdown}"] = [g.to_dict() for g in classification_by_group(reference, predicted, groups)]
    return result


def _validation_tables(study: Study, protocol: Any, items: dict[int, Item], machines: list[Annotator]) -> dict[str, Any]:
    """The papers' headline validation shapes, where the protocol is one of theirs."""
    tables: dict[str, Any] = {}
    if study.preset == "ssi-rubric" and machines:
        # ssi Table 3: accuracy of each labeller's rubric labels vs the consensus, by category x model x condition.
        cells: dict[tuple[str, str, str, str], list[int]] = defaultdict(lambda: [0, 0])
        for question in protocol.questions:
            consensus = labels_for(study, question.key, "consensus").values
            for machine in machines:
                for item_id, value in counted_annotations(study).filter(question_key=question.key,
                                                                        annotator=machine).values_list("item_id", "value"):
                    if consensus.get(item_id) is None:
                        continue
                    item = items[item_id]
                    key = (_label(machine), str(item.metadata.get("category", "")), item.model_name, item.condition)
                    cells[key][0] += int(value == consensus[item_id])
                    cells[key][1] += 1
        tables["ssi_accuracy"] = [
            {"labeller": k[0], "category": k[1], "model": k[2], "condition": k[3], "correct": c, "n": n,
             "accuracy": c / n if n else None} for k, (c, n) in sorted(cells.items())]
    if study.preset == "attribute-check":
        # soda's human validation: the share of machine-assigned attributes judged appropriate.
        answers = list(counted_annotations(study).filter(annotator__kind=Annotator.Kind.HUMAN)
                       .values_list("question_key", "value"))
        by_question: dict[str, list[int]] = defaultdict(lambda: [0, 0])
        for key, value in answers:
            by_question[key][0] += int(value == "appropriate")
            by_question[key][1] += 1
        total = sum(n for _a, n in by_question.values())
        tables["soda_appropriate"] = {
            "overall": {"appropriate": sum(a for a, _n in by_question.values()), "n": total,
                        "share": sum(a for a, _n in by_question.values()) / total if total else None},
            "by_attribute": {k: {"appropriate": a, "n": n, "share": a / n if n else None}
                             for k, (a, n) in sorted(by_question.items())}}
    if study.preset == "subgroup" and machines:
        tables["agent"] = {"see": "metrics report (stereotype score, detection accuracy and mean discrepancy "
                                  "per dimension, machine vs human): manage.py metrics STUDY --source LABELLER"}
    return tables


def agreement_csv_rows(report: dict[str, Any]) -> Iterator[list[Any]]:
    """One row per (question or option, comparison) with the headline numbers, for spreadsheets."""
    yield ["question", "comparison", "alpha", "ci_low", "ci_high", "n_items", "n_judgements", "accuracy", "kappa",
           "n_pairs", "undefined_reason"]
    for question in report["questions"]:
        for alpha in question.get("humans", []):
            yield [alpha["label"], "humans", alpha["value"], alpha["ci_low"], alpha["ci_high"], alpha["n_items"],
                   alpha["n_judgements"], "", "", "", alpha["undefined_reason"] or ""]
        for labeller, alphas in question.get("humans_plus", {}).items():
            for alpha in alphas:
                yield [alpha["label"], f"humans+{labeller}", alpha["value"], "", "", alpha["n_items"],
                       alpha["n_judgements"], "", "", "", alpha["undefined_reason"] or ""]
        for machine in question.get("machines_vs_consensus", []):
            overall = machine.get("overall")
            if overall:
                yield [question["key"], f"{machine['labeller']} vs consensus", "", "", "", machine["n_items"], "",
                       overall["accuracy"], overall["kappa"], overall["n_pairs"], ""]
