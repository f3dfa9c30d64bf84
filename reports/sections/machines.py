"""The report's Machine vs human section: each machine labeller against the human consensus (accuracy,
Cohen's kappa and macro F1), overall and per item condition, read from ``agreement_report``'s
``machines_vs_consensus`` (the agreement page and API); and the validation sample's design.

Accuracy gets a Wilson 95% interval (scipy's ``binomtest(...).proportion_ci``) over the compared items;
kappa and macro F1 a 95% percentile-bootstrap interval over the compared items, drawn from the
comparison's confusion matrix (``metrics.classification.confusion_intervals``: 2,000 seeded resamples).
"""

from __future__ import annotations

from typing import Any

from scipy.stats import binomtest

from annotations.models import Study, ValidationSample
from metrics.classification import confusion_intervals
from reports.document import Column, DocTable, Facts, Paragraph, Section


def wilson(accuracy: float | None, n: int) -> tuple[float | None, float | None]:
    """The Wilson 95% interval of a share ``accuracy`` of ``n`` items; (None, None) when undefined."""
    if accuracy is None or n <= 0:
        return None, None
    interval = binomtest(round(accuracy * n), n).proportion_ci(confidence_level=0.95, method="wilson")
    return float(interval.low), float(interval.high)


def macro_f1(report: dict[str, Any]) -> float | None:
    """The mean F1 over the classes whose F1 is defined; None when none is."""
    values = [c["f1"] for c in report["per_class"] if c["f1"] is not None]
    return sum(values) / len(values) if values else None


def _row(question: str, labeller: str, group: str, report: dict[str, Any]) -> list[Any]:
    low, high = wilson(report["accuracy"], report["n_pairs"])
    bootstrap = confusion_intervals(report["confusion"]) if report["n_pairs"] else None
    kappa_low, kappa_high = bootstrap.kappa if bootstrap and report["kappa"] is not None else (None, None)
    f1_low, f1_high = bootstrap.macro_f1_interval if bootstrap else (None, None)
    # Fewer than two classes in the reference: macro F1 says nothing (as kappa), so none is given.
    f1 = macro_f1(report) if bootstrap is None or bootstrap.macro_f1 is not None else None
    reasons = [
        r
        for r in (
            report.get("accuracy_undefined_reason"),
            f"kappa: {report['kappa_undefined_reason']}" if report.get("kappa_undefined_reason") else None,
            f"macro F1: {bootstrap.reason}" if bootstrap and f1 is None and bootstrap.reason else None,
        )
        if r
    ]
    return [
        question,
        labeller,
        group,
        report["n_pairs"],
        report["accuracy"],
        low,
        high,
        report["kappa"],
        kappa_low,
        kappa_high,
        f1,
        f1_low,
        f1_high,
        "; ".join(dict.fromkeys(reasons)) or None,
    ]


def machine_rows(agreement: dict[str, Any]) -> list[list[Any]]:
    """One row per (question, labeller, condition), the overall row ("all") first."""
    rows = []
    for question in agreement["questions"]:
        for comparison in question.get("machines_vs_consensus", []):
            if "overall" not in comparison or not comparison["n_items"]:
                continue  # multi questions (per option, on the agreement page), or nothing compared
            rows.append(_row(question["key"], comparison["labeller"], "all", comparison["overall"]))
            for group in comparison.get("by_condition", []):
                rows.append(
                    _row(question["key"], comparison["labeller"], str(group["group"]), group["report"])
                )
    return rows


def machines_table(agreement: dict[str, Any]) -> DocTable:
    rows = machine_rows(agreement)
    return DocTable(
        key="machines_vs_human",
        title="Machine labellers against the human consensus",
        columns=[
            Column("question", "Question", "label"),
            Column("labeller", "Labeller", "label"),
            Column("condition", "Condition", "label"),
            Column("n_items", "Items", "n"),
            Column("accuracy", "Accuracy", "estimate"),
            Column("accuracy_low", "95% low", "low"),
            Column("accuracy_high", "95% high", "high"),
            Column("kappa", "Cohen's kappa", "estimate"),
            Column("kappa_low", "95% low", "low"),
            Column("kappa_high", "95% high", "high"),
            Column("macro_f1", "Macro F1", "estimate"),
            Column("macro_f1_low", "95% low", "low"),
            Column("macro_f1_high", "95% high", "high"),
            Column("reason", "Why a number is undefined", "text"),
        ],
        rows=rows,
        n=None,
        notes=[
            "Accuracy interval: Wilson score, 95%; kappa and macro F1 (the mean F1 over the classes that "
            "occur): 95% percentile bootstrap over the compared items (2,000 seeded resamples of the "
            "confusion matrix). "
            "Questions the labeller did not answer on any item the people judged are left out."
        ],
        source_key="agreement:machines",
        empty_reason=None if rows else "no machine labeller answered a question the people also answered",
    )


def validation_facts(study: Study) -> Facts | Paragraph:
    """The validation sample's design: labeller, design, stratification, seed, size and frame."""
    sample = ValidationSample.objects.filter(study=study).first()
    if sample is None:
        return Paragraph(
            "No validation sample was drawn: machine labels are compared with people on every item "
            "both judged, "
            "which supports accuracy on those items but no design-based estimate for the rest."
        )
    size = sample.items.count()
    return Facts(
        pairs=[
            ("Validation sample: labeller", sample.labeller_name or "-"),
            ("Design", sample.design or "unknown (no inclusion probabilities stored)"),
            ("Stratified by", sample.stratify_by or "-"),
            ("Seed", str(sample.seed)),
            ("Items in the sample", f"{size:,}"),
            ("Drawn from (frame)", "-" if sample.frame_size is None else f"{sample.frame_size:,}"),
            (
                "What it supports",
                "prediction-powered estimates of means and proportions from the labeller's labels and the "
                "people's labels of the sample"
                if sample.design
                else "accuracy on the sample only (PPI needs inclusion probabilities)",
            ),
        ]
    )


def machines_section(study: Study, agreement: dict[str, Any]) -> Section:
    """The Machine vs human section from the study's agreement report."""
    return Section(
        key="machines",
        title="Machine vs human",
        blocks=[machines_table(agreement), validation_facts(study)],
    )
