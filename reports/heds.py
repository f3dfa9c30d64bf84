"""The HEDS 3.0 datasheet of a study (Belz and Thomson, "HEDS 3.0: The Human Evaluation Data Sheet
Version 3.0", arXiv:2412.07940), filled in from the study's data, and its JSON renderer.

Every answer is filed under the number of the HEDS 3.0 question it answers. The numbers and what each
question asks are those of the HEDS 3.0 form (https://nlp-heds.github.io, the form the paper points to;
its five sections and their ranges match the paper's introduction): ``QUESTIONS`` below, in the form's
order. Section 4 is answered once per quality criterion, here once per question of the protocol that
the study's items ask (a question asked only of items the study does not have, by its ``applies_if`` or
``options_from``, is left out with the reason: ``criteria_left_out``). A question the data cannot answer
is listed under ``to_complete_by_the_authors``; ``notes`` hold facts the data gives that no single
question asks for (docs/reports.md, "The HEDS 3.0 datasheet"). The evaluator questions (3.2.1, 3.2.5) and
Section 3's notes name the study's rater pools, their sizes and their agreement from the report's "Who
judged" section (``reports.sections.who_judged``).

The report's appendix (``heds_section``) prints the same datasheet for reading: Section 4's answers once
per answer, with the criteria it covers (most are shared by every criterion), the protocol's
instructions once, and every question left to the authors in one list at the end.
"""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

from django.db.models import Count

from annotations.models import Invitation, Item, Study
from annotations.selectors.controls import quality_settings
from annotations.selectors.counted import counted_items
from findings.report import FindingsReport
from metrics.multiple_testing import CORRECTION_NAMES
from protocols.schema import Question
from reports.document import BulletList, Column, DocTable, Facts, Paragraph, ReportDocument, Section
from reports.formats import Rendered

VERSION = "HEDS 3.0"
REFERENCE = "Belz and Thomson, HEDS 3.0: The Human Evaluation Data Sheet Version 3.0 (arXiv:2412.07940)"
FORM = "https://nlp-heds.github.io"
TO_COMPLETE = "to complete by the authors"
NUMBERING_NOTE = (
    "Answers are filed under the HEDS 3.0 form's question numbers (Section 4 once per quality criterion: "
    "here, per question of the protocol); load or copy them into the form, then complete the questions "
    "listed under to_complete_by_the_authors."
)
SECTIONS = (
    ("1", "Main Reference and Supplementary Resources", "1.1.1-1.3.2.3"),
    ("2", "Evaluated System(s)", "2.1-2.5"),
    ("3", "Sample of System Outputs, Evaluators and Experimental Design", "3.1.1-3.3.8"),
    ("4", "Definition and Operationalisation of Quality Criteria", "4.1.1-4.3.12.2"),
    ("5", "Ethics", "5.1-5.4"),
)
# (number, what the question asks, in short): every question of the HEDS 3.0 form, in its order.
QUESTIONS: tuple[tuple[str, str], ...] = (
    ("1.1.1", "where the main reference for the evaluation experiment can be found"),
    ("1.1.2", "which experiment of that reference this sheet is for"),
    ("1.2", "where the resources used in the experiment can be found"),
    ("1.3.1.1", "name of the person completing this sheet"),
    ("1.3.1.2", "affiliation of the person completing this sheet"),
    ("1.3.1.3", "email address of the person completing this sheet"),
    ("1.3.2.1", "name of the contact author"),
    ("1.3.2.2", "affiliation of the contact author"),
    ("1.3.2.3", "email address of the contact author"),
    ("2.1", "type of input the evaluated systems take"),
    ("2.2", "type of output the evaluated systems generate"),
    ("2.3", "task the systems perform in mapping inputs to outputs"),
    ("2.4", "language(s) of the inputs"),
    ("2.5", "language(s) of the outputs"),
    ("3.1.1", "how many system outputs (evaluation items) are evaluated per system"),
    ("3.1.2", "how the outputs are selected for inclusion"),
    ("3.1.3.1", "statistical power analysis used to choose the sample size"),
    ("3.1.3.2", "statistical power of the sample"),
    ("3.1.3.3", "where the code of the power analysis can be found"),
    ("3.2.1", "how many evaluators there are"),
    ("3.2.2.1", "whether the evaluators are domain experts"),
    ("3.2.2.2", "whether participants received payment"),
    ("3.2.2.3", "whether participants were previously known to the authors"),
    ("3.2.2.4", "whether researchers running the experiment were among the participants"),
    ("3.2.3", "how evaluators are recruited"),
    ("3.2.4", "training and practice given before the evaluation"),
    ("3.2.5", "other characteristics of the evaluators"),
    ("3.3.1", "whether the experimental design was preregistered"),
    ("3.3.2", "by what medium responses are collected"),
    ("3.3.3.1", "types of quality assurance of evaluators and their responses"),
    ("3.3.3.2", "the methods used for each type of quality assurance"),
    ("3.3.4.1", "where the form/interface shown to participants can be viewed"),
    ("3.3.4.2", "what information evaluators are shown"),
    ("3.3.5", "how free evaluators are as to when and how quickly to evaluate"),
    ("3.3.6", "whether evaluators may ask questions or give feedback"),
    ("3.3.7", "the conditions in which evaluators carry out the evaluation"),
    ("3.3.8", "how those conditions vary between evaluators"),
    ("4.1.1", "type of quality assessed (correctness, goodness, feature)"),
    ("4.1.2", "aspect of the outputs assessed (form, content, both)"),
    (
        "4.1.3",
        "whether outputs are assessed in their own right or against the input or an external reference",
    ),
    ("4.2.1", "whether an assessment is objective or subjective"),
    ("4.2.2", "whether outputs are assessed in absolute or relative terms"),
    ("4.2.3", "whether the evaluation is intrinsic or extrinsic"),
    ("4.3.1.1", "the criterion's name in explanations and interfaces for evaluators"),
    ("4.3.1.2", "the standardised criterion name it corresponds to"),
    ("4.3.2", "the criterion's definition given to evaluators"),
    ("4.3.3", "size of the scale or other rating instrument"),
    ("4.3.4", "possible values of the scale or rating instrument"),
    ("4.3.5", "how the scale or rating instrument is presented"),
    ("4.3.6", "the task evaluators perform if there is no rating instrument"),
    ("4.3.7", "the verbatim question, prompt or instruction given at each assessment"),
    ("4.3.8", "form of response elicitation"),
    ("4.3.9", "how raw responses are aggregated into reported scores"),
    ("4.3.10", "methods for effect size and significance of findings"),
    ("4.3.11.1", "how inter-annotator agreement was measured"),
    ("4.3.11.2", "the inter-annotator agreement score"),
    ("4.3.12.1", "how intra-annotator agreement was measured"),
    ("4.3.12.2", "the intra-annotator agreement score"),
    ("5.1", "which research ethics committee approved the experiment"),
    ("5.2", "whether personal data (GDPR Art. 4) occur in the outputs or responses"),
    ("5.3", "whether special category information (GDPR Art. 9) occurs"),
    ("5.4", "whether impact assessments were carried out"),
)
ASKS = dict(QUESTIONS)
ALPHA_ENTRIES_LISTED = 5  # beyond this many alphas (a many-option question) the score is a range
KIND_NAMES = {"image": "images", "image_set": "sets of images", "text": "text"}


def _records(numbers: list[str], answers: dict[str, str]) -> list[dict[str, Any]]:
    return [{"question": n, "asks": ASKS[n], "answer": answers.get(n)} for n in numbers]


def _numbers(section: str) -> list[str]:
    return [number for number, _asks in QUESTIONS if number.split(".")[0] == section]


def heds_datasheet(
    study: Study,
    *,
    metrics: FindingsReport,
    agreement: dict[str, Any],
    quality: dict[str, Any],
    consensus: list[list[Any]],
    pools: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The datasheet of ``study`` as JSON-ready data: every HEDS 3.0 question by number with the data's
    answer or None, Section 4 once per criterion, and the unanswered ones as one list. ``consensus``:
    ``reports.sections.agreement.consensus_rows``, read once for the report; ``pools``: the "Who judged"
    section's data (``reports.sections.who_judged.who_judged``), for the evaluators' rater pools."""
    items = counted_items(study)
    invitations = list(Invitation.objects.filter(study=study).order_by("created_at", "id"))
    answers: dict[str, str] = {}
    notes: dict[str, list[tuple[str, str]]] = {number: [] for number, _t, _q in SECTIONS}
    _systems(study, items, answers, notes["2"])
    _sample_and_design(study, items, invitations, metrics, quality, answers, notes["3"])
    if pools is not None:
        _rater_pools(pools, answers, notes["3"])
    _ethics(invitations, answers)
    notes["1"].append(
        (
            "Evaluation tool",
            "Stereotype Audit Workbench (the report's reproducibility appendix gives its version, commit "
            "and the sha256 of the study's export)",
        )
    )
    criteria, left_out = _criteria(study, metrics, agreement, {row[0]: row[1] for row in consensus})
    sections: list[dict[str, Any]] = []
    todo: list[str] = []
    for number, title, questions in SECTIONS:
        section: dict[str, Any] = {"section": number, "title": title, "questions": questions}
        if number == "4":
            section["criteria"] = [
                {"criterion": key, "answers": _records(_numbers("4"), filled)} for key, filled in criteria
            ]
            section["criteria_left_out"] = [{"criterion": key, "why": why} for key, why in left_out]
            section["instructions"] = study.protocol_obj.instructions
            missing = [
                f"{n} (criterion {key}): {ASKS[n]}"
                for key, filled in criteria
                for n in _numbers("4")
                if filled.get(n) is None
            ]
        else:
            section["answers"] = _records(_numbers(number), answers)
            missing = [f"{n}: {ASKS[n]}" for n in _numbers(number) if answers.get(n) is None]
        section["notes"] = [{"topic": topic, "answer": answer} for topic, answer in notes[number]]
        section["to_complete_by_the_authors"] = missing
        todo += missing
        sections.append(section)
    return {
        "version": VERSION,
        "reference": REFERENCE,
        "form": FORM,
        "numbering": NUMBERING_NOTE,
        "study": study.pk,
        "sections": sections,
        "to_complete_by_the_authors": todo,
    }


def _systems(study: Study, items: Any, answers: dict[str, str], notes: list[tuple[str, str]]) -> None:
    models = sorted({m for m in items.values_list("model_name", flat=True) if m})
    kinds = sorted(set(items.values_list("kind", flat=True)))
    prompts = len(set(items.exclude(prompt="").values_list("prompt", flat=True)))
    notes.append(
        ("Systems evaluated (the items' model names)", ", ".join(models) or "not recorded on the items")
    )
    if prompts:
        answers["2.1"] = f"text: prompts ({prompts:,} distinct)"
    if kinds:
        answers["2.2"] = ", ".join(KIND_NAMES.get(kind, kind) for kind in kinds)
    if prompts and models and set(kinds) <= {"image", "image_set"}:
        answers["2.3"] = "text-to-image generation (HEDS: Other)"
    if kinds and set(kinds) <= {"image", "image_set"}:
        answers["2.5"] = "N/A: the outputs are images"


def _sample_and_design(
    study: Study,
    items: Any,
    invitations: list[Invitation],
    metrics: FindingsReport,
    quality: dict[str, Any],
    answers: dict[str, str],
    notes: list[tuple[str, str]],
) -> None:
    per_model = list(
        items.values("model_name")
        .annotate(n=Count("id"))
        .order_by("model_name")
        .values_list("model_name", "n")
    )
    coverage = metrics.coverage
    answers["3.1.1"] = (
        "; ".join(f"{model or 'no model recorded'}: {n:,}" for model, n in per_model) or "0"
    ) + (
        f" ({items.count():,} items in all; {coverage['settled']:,} with every judgement the overlap asks, "
        f"{coverage['partial']:,} partial)"
    )
    pools = Counter(person["pool"] for person in quality["annotators"])
    people = len(quality["annotators"])
    answers["3.2.1"] = f"{people:,}" + (
        f" ({', '.join(f'{n:,} {pool}' for pool, n in sorted(pools.items()))})" if pools else ""
    )
    answers["3.2.3"] = (
        "; ".join(f"{inv.get_platform_display()} ({inv.pool}, {inv.uses} joined)" for inv in invitations)
        or "enrolled by the researcher or imported"
    )
    settings = quality_settings(study)
    qualification = (
        f"a qualification of {settings.qualification_items} gold items at accuracy >= "
        f"{settings.qualification_min_accuracy:.2f} before the study's items"
        if settings.qualification_items
        else "no qualification"
    )
    answers["3.2.4"] = (
        f"the protocol's instructions and each question's help on the task page; {qualification}"
    )
    asked = sorted({str(q.get("key")) for inv in invitations for q in inv.demographics or []})
    if asked:
        answers["3.2.5"] = (
            f"demographic answers asked: {', '.join(asked)} (summarised in the report's People section; an "
            "answer given by fewer than 5 people is not named)"
        )
    answers["3.3.2"] = "the workbench's web task page" + (
        f", reached through {', '.join(sorted({inv.get_platform_display() for inv in invitations}))}"
        if invitations
        else ""
    )
    controls = dict(
        Item.objects.filter(study=study)
        .exclude(control_kind="")
        .values_list("control_kind")
        .annotate(n=Count("id"))
    )
    excluded = sum(1 for person in quality["annotators"] if person["excluded"])
    kinds = [
        name
        for name, present in (
            ("qualification test", settings.qualification_items > 0),
            ("gold (control) items", controls.get("gold", 0) > 0),
            ("attention checks", controls.get("attention", 0) > 0),
            ("exclusion of evaluators", excluded > 0),
        )
        if present
    ]
    answers["3.3.3.1"] = ", ".join(kinds) or "none recorded"
    answers["3.3.3.2"] = (
        f"{qualification}; {controls.get('gold', 0):,} gold and {controls.get('attention', 0):,} attention "
        f"items, served at a control rate of {settings.control_rate:.2f}; {excluded:,} evaluators excluded "
        "(the People section lists why)"
    )
    protocol = study.protocol_obj
    shown = {
        "image": "the item's image",
        "image_set": "the item's images and its query",
        "text": "the item's text",
    }
    answers["3.3.4.2"] = (
        "; ".join(shown.get(kind, kind) for kind in sorted(set(items.values_list("kind", flat=True))))
        + (", the protocol's instructions" if protocol.instructions else "")
        + ", each question's prompt and help; never the item's metadata or other people's answers"
    )
    answers["3.3.5"] = (
        f"each item is leased to one evaluator for {study.lease_minutes} minutes at a time; no other "
        "limit is recorded"
    )
    notes.append(("Judgements asked per item (overlap)", str(study.overlap)))


def _rater_pools(pools: dict[str, Any], answers: dict[str, str], notes: list[tuple[str, str]]) -> None:
    """3.2.1 and 3.2.5 name the rater pools (those of at least 5 people) and their sizes; Section 3's notes
    give each pool's alpha and the agreement between pools (kappa_x) per question."""
    named = [entry for entry in pools["keys"] if entry["pools"]]
    if not named:
        return
    sizes = "; ".join(
        f"by {e['key']}: " + ", ".join(f"{p['pool']} {p['people']:,}" for p in e["pools"]) for e in named
    )
    answers["3.2.1"] = f"{answers.get('3.2.1', '')}; rater pools {sizes}".lstrip("; ")
    pooled = (
        f"rater pools {sizes} (the people grouped by an attribute they gave this study; a pool of fewer than "
        "5 people is not named); each pool's agreement and the findings that differ between pools are in "
        "the report's Who judged section"
    )
    answers["3.2.5"] = f"{answers['3.2.5']}; {pooled}" if answers.get("3.2.5") else pooled
    for entry in named:
        alphas = "; ".join(
            f"{a['pool']}, {a['question']}: "
            + (f"{a['alpha']:.3f}" if a["alpha"] is not None else f"undefined ({a['reason']})")
            for a in entry["alphas"]
        )
        notes.append((f"Agreement within each rater pool by {entry['key']} (Krippendorff's alpha)", alphas))
        cross = "; ".join(
            f"{c['question']}, {c['pools'][0]} vs {c['pools'][1]}: "
            + (
                f"{c['kappa_x']:.3f}"
                + (
                    f" (95% CI {c['low']:.3f} to {c['high']:.3f})"
                    if c["low"] is not None and c["high"] is not None
                    else ""
                )
                if c["kappa_x"] is not None
                else f"undefined ({c['undefined_reason']})"
            )
            + f", {c['n_items']:,} items"
            for c in entry["cross"]
        )
        notes.append((f"Agreement between rater pools by {entry['key']} (kappa_x)", cross or "-"))


def _ethics(invitations: list[Invitation], answers: dict[str, str]) -> None:
    consent = " | ".join(inv.consent_text for inv in invitations if inv.consent_text)
    asked = sorted({str(q.get("key")) for inv in invitations for q in inv.demographics or []})
    if asked:
        answers["5.2"] = f"the responses include demographic answers ({', '.join(asked)})" + (
            f"; consent text shown: {consent}" if consent else "; no consent text recorded"
        )


def _asked_of_no_item(question: Question, metadata: list[dict[str, Any]]) -> str | None:
    """Why ``question`` is no criterion of this study (asked only of items it does not have), or None."""
    if question.applies_if and not any(question.applies_to(m) for m in metadata):
        field, values = question.applies_if["field"], question.applies_if["in"]
        return f"asked only of items whose {field} is {' or '.join(str(v) for v in values)}"
    if question.options_from is not None and not any(m.get(question.options_from) for m in metadata):
        return f"its options come from the items' {question.options_from}, which no item has"
    return None


def _criteria(
    study: Study, metrics: FindingsReport, agreement: dict[str, Any], rules: dict[str, str]
) -> tuple[list[tuple[str, dict[str, str]]], list[tuple[str, str]]]:
    """Section 4's answers for each question of the protocol that the study's items ask (a quality
    criterion each), and the questions left out with why (asked only of items the study does not
    have); ``rules``: the consensus rule(s) recorded per question."""
    protocol = study.protocol_obj
    by_key = {entry["key"]: entry for entry in agreement["questions"]}
    tests = sorted({t.method.test for t in metrics.tables if t.method is not None and t.method.test})
    significance = (
        f"{'; '.join(tests)}; p-values corrected for multiple comparisons by "
        f"{CORRECTION_NAMES.get(metrics.correction, metrics.correction)} "
        "(each findings table's method)"
        if tests
        else None
    )
    metadata = [m or {} for m in counted_items(study).values_list("metadata", flat=True)]
    criteria = []
    left_out = []
    for question in protocol.questions:
        why = _asked_of_no_item(question, metadata) if metadata else None
        if why is not None:
            left_out.append((question.key, why))
            continue
        filled: dict[str, str] = {"4.2.2": "absolute: each output is judged on its own"}
        if question.help:
            filled["4.3.2"] = question.help
        filled.update(_instrument(question))
        filled["4.3.7"] = question.prompt + (
            f" (instructions: {protocol.instructions})" if protocol.instructions else ""
        )
        if question.key in rules:
            filled["4.3.9"] = f"consensus label per item by rule {rules[question.key]} (Agreement section)"
        if significance:
            filled["4.3.10"] = significance
        filled.update(_agreement(by_key.get(question.key), agreement))
        criteria.append((question.key, filled))
    return criteria, left_out


def _instrument(question: Question) -> dict[str, str]:
    if question.kind in ("boxes", "text"):
        task = (
            "draw a box round each thing seen and label it with one of: "
            + ", ".join(option.label for option in question.options)
            if question.kind == "boxes"
            else "write a free-text answer"
        )
        return {"4.3.3": "N/A", "4.3.4": "N/A", "4.3.5": "N/A", "4.3.6": task}
    extra = [o.label for o in (question.unsure, question.none_option) if o is not None]
    if question.options_from is not None:
        size = f"per item (the options come from the item's {question.options_from!r})"
        values = "per item" + (f", and {', '.join(extra)}" if extra else "")
    else:
        labels = [option.label for option in question.options] + extra
        size, values = str(len(labels)), ", ".join(labels)
    presented = {
        "single": "multiple-choice options (one answer)",
        "likert": "multiple-choice options on an ordered scale (one answer)",
        "multi": "check-boxes (any number)",
    }.get(question.kind, question.kind)
    return {"4.3.3": size, "4.3.4": values, "4.3.5": presented, "4.3.6": "N/A: a rating instrument is used"}


def _agreement(entry: dict[str, Any] | None, agreement: dict[str, Any]) -> dict[str, str]:
    if entry is None:
        return {}
    if "boxes" in entry:
        humans = entry["boxes"]["humans"]
        rate = humans.get("match_rate")
        return {
            "4.3.11.1": f"box agreement: share of boxes matched between two people's boxes at IoU >= "
            f"{humans['threshold']:g}, with their mean IoU",
            "4.3.11.2": "undefined (no box pairs)"
            if rate is None
            else f"match rate {rate:.3f}, mean IoU {humans['mean_iou'] or 0:.3f} "
            f"over {humans['n_items']:,} items",
        }
    alphas = entry.get("humans") or []
    if not alphas:
        return {}
    method = (
        f"Krippendorff's alpha ({alphas[0]['level']}) of the people's judgements, with a percentile "
        f"bootstrap 95% interval over items ({agreement['n_resamples']} resamples, seed {agreement['seed']})"
    )
    defined = [a for a in alphas if a["value"] is not None]
    if not defined:
        score = f"undefined: {alphas[0]['undefined_reason']}"
    elif len(alphas) <= ALPHA_ENTRIES_LISTED:
        score = "; ".join(_alpha_text(a) for a in alphas)
    else:
        values = [a["value"] for a in defined]
        score = (
            f"{len(defined)} of {len(alphas)} alphas defined, from {min(values):.3f} to {max(values):.3f} "
            "(the Agreement section lists each)"
        )
    return {"4.3.11.1": method, "4.3.11.2": score}


def _alpha_text(alpha: dict[str, Any]) -> str:
    if alpha["value"] is None:
        return f"{alpha['label']}: undefined ({alpha['undefined_reason']})"
    interval = (
        f", 95% CI {alpha['ci_low']:.3f} to {alpha['ci_high']:.3f}"
        if alpha["ci_low"] is not None and alpha["ci_high"] is not None
        else ""
    )
    return f"{alpha['label']}: {alpha['value']:.3f}{interval} ({alpha['n_items']:,} items)"


def _who(keys: list[str], everyone: list[str]) -> str:
    if keys == everyone and len(everyone) > 1:
        return "every criterion"
    return ("criterion " if len(keys) == 1 else "criteria ") + ", ".join(keys)


def _left_out_sentence(left_out: list[dict[str, str]]) -> str:
    """One sentence naming the questions that are no criterion here, grouped by why."""
    by_why: dict[str, list[str]] = {}
    for entry in left_out:
        by_why.setdefault(entry["why"], []).append(entry["criterion"])
    groups = "; ".join(f"{', '.join(keys)} ({why})" for why, keys in by_why.items())
    n = len(left_out)
    return (
        f"{n} {'question' if n == 1 else 'questions'} of the protocol {'is' if n == 1 else 'are'} left out "
        f"as criteria because the study has no item {'it is' if n == 1 else 'they are'} asked of, so "
        f"nobody answered {'it' if n == 1 else 'them'}: {groups}."
    )


def _criteria_blocks(section: dict[str, Any]) -> tuple[list[Any], list[str]]:
    """Section 4 for reading: which criteria there are (and which questions are left out, why), the
    protocol's instructions once, then each question's answers once per answer with the criteria it
    covers; and the questions left to the authors (each once, with the criteria it concerns)."""
    criteria = section["criteria"]
    everyone = [c["criterion"] for c in criteria]
    instructions = section.get("instructions") or ""
    suffix = f" (instructions: {instructions})" if instructions else ""
    intro = (
        f"Section 4 is answered once per quality criterion; here a criterion is a question of the protocol: "
        f"{len(everyone)} {'criterion' if len(everyone) == 1 else 'criteria'} ({', '.join(everyone)}). "
        "An answer shared by several criteria is given once, with the criteria it covers."
        if everyone
        else "The protocol asks no question of the study's items, so Section 4 has no criterion."
    )
    blocks: list[Any] = [Paragraph(intro)]
    if section.get("criteria_left_out"):
        blocks.append(Paragraph(_left_out_sentence(section["criteria_left_out"])))
    if instructions and criteria:
        blocks.append(
            Paragraph(
                "The protocol's instructions, shown with every question (part of each criterion's verbatim "
                f"prompt, 4.3.7): {instructions}"
            )
        )
    rows: list[list[Any]] = []
    todo: list[str] = []
    for number in _numbers("4"):
        by_answer: dict[str, list[str]] = {}
        missing: list[str] = []
        for criterion in criteria:
            answer = next(a["answer"] for a in criterion["answers"] if a["question"] == number)
            if answer is None:
                missing.append(criterion["criterion"])
                continue
            if number == "4.3.7" and suffix and answer.endswith(suffix):
                answer = answer[: -len(suffix)]
            by_answer.setdefault(answer, []).append(criterion["criterion"])
        for index, (answer, keys) in enumerate(by_answer.items()):
            asks = f"{number} {ASKS[number]}" if index == 0 else ""
            rows.append([asks, "every criterion" if keys == everyone else ", ".join(keys), answer])
        if missing:
            todo.append(f"{number} {ASKS[number]} ({_who(missing, everyone)})")
    if rows:
        blocks.append(
            DocTable(
                key="heds-4-answers",
                title="HEDS Section 4: each answer once, with the criteria it covers",
                columns=[
                    Column("question", "Question", "text"),
                    Column("criteria", "Criteria", "text"),
                    Column("answer", "Answer", "text"),
                ],
                rows=rows,
                source_key="heds",
            )
        )
    return blocks, todo


def heds_section(datasheet: dict[str, Any]) -> Section:
    """The datasheet as the report's appendix section, so every format shows it: per section the answered
    questions by number and the notes (Section 4 grouped: ``_criteria_blocks``), then every question left
    to the authors in one list."""
    subsections = []
    todo: list[str] = []
    for s in datasheet["sections"]:
        blocks: list[Any] = []
        if "criteria" in s:
            blocks, missing = _criteria_blocks(s)
            todo += missing
        else:
            answered = [(f"{a['question']} {a['asks']}", a["answer"]) for a in s["answers"] if a["answer"]]
            if answered or s["notes"]:
                blocks.append(Facts(pairs=[*answered, *((n["topic"], n["answer"]) for n in s["notes"])]))
            else:
                blocks.append(Paragraph("The data answers none of this section's questions."))
            todo += [f"{a['question']} {a['asks']}" for a in s["answers"] if a["answer"] is None]
        subsections.append(
            Section(
                key=f"heds-{s['section']}",
                title=f"HEDS {s['section']}. {s['title']} (Questions {s['questions']})",
                blocks=blocks,
            )
        )
    if todo:
        subsections.append(
            Section(
                key="heds-todo",
                title=f"HEDS questions {TO_COMPLETE}",
                blocks=[
                    Paragraph(
                        f"The data cannot answer these {len(todo)} questions of the form (Section 4's "
                        "with the criteria they concern); the sheet does not guess."
                    ),
                    BulletList(items=todo),
                ],
            )
        )
    return Section(key="heds", title=f"{VERSION} datasheet", subsections=subsections)


def render(document: ReportDocument) -> Rendered:
    """The datasheet (one study's, or each study's of a compare report) as JSON."""
    body = json.dumps(document.heds, indent=2, ensure_ascii=False, default=str) + "\n"
    stem = "-".join(str(i) for i in document.study_ids)
    return Rendered(filename=f"study-{stem}-heds.json", content_type="application/json", body=body.encode())
