"""The HEDS 3.0 datasheet of a study (Belz and Thomson, "HEDS 3.0: The Human Evaluation Data Sheet
Version 3.0", arXiv:2412.07940, GEM 2025), filled in from the study's data, and its JSON renderer.

HEDS 3.0 has five sections (the paper's introduction gives their question ranges, used here as they are):

1. Main Reference and Supplementary Resources (Questions 1.1.1-1.3.2.3)
2. Evaluated System(s) (Questions 2.1-2.5)
3. Sample of System Outputs, Evaluators and Experimental Design (Questions 3.1.1-3.3.8)
4. Definition and Operationalisation of Quality Criteria (Questions 4.1.1-4.3.12.2), once per criterion
5. Ethics (Questions 5.1-5.4)

The numbers of single questions could not be checked against the HEDS 3.0 form here, so answers are
filed under their section (and its question range), each with the topic it answers, never under a
question number we would have to guess (docs/reports.md). What the data cannot answer is listed per
section under ``to_complete_by_the_authors``.
"""

from __future__ import annotations

import json
from typing import Any

from django.db.models import Count

from annotations.models import Invitation, Study
from annotations.selectors.counted import counted_items
from reports.document import BulletList, Facts, ReportDocument, Section
from reports.formats import Rendered

VERSION = "HEDS 3.0"
REFERENCE = "Belz and Thomson, HEDS 3.0: The Human Evaluation Data Sheet Version 3.0 (arXiv:2412.07940)"
TO_COMPLETE = "to complete by the authors"
NUMBERING_NOTE = (
    "Answers are filed under their HEDS 3.0 section and its question range; copy each into the question of "
    "the HEDS form that asks for it (single question numbers were not verified for this version)."
)
SECTIONS = (
    ("1", "Main Reference and Supplementary Resources", "1.1.1-1.3.2.3"),
    ("2", "Evaluated System(s)", "2.1-2.5"),
    ("3", "Sample of System Outputs, Evaluators and Experimental Design", "3.1.1-3.3.8"),
    ("4", "Definition and Operationalisation of Quality Criteria", "4.1.1-4.3.12.2"),
    ("5", "Ethics", "5.1-5.4"),
)


def _section(number: str, answered: list[tuple[str, str]], missing: list[str]) -> dict[str, Any]:
    title, questions = next((t, q) for n, t, q in SECTIONS if n == number)
    return {
        "section": number,
        "title": title,
        "questions": questions,
        "answered": [{"topic": topic, "answer": answer} for topic, answer in answered],
        "to_complete_by_the_authors": missing,
    }


def heds_datasheet(
    study: Study, *, metrics: dict[str, Any], agreement: dict[str, Any], quality: dict[str, Any]
) -> dict[str, Any]:
    """The datasheet of ``study`` as JSON-ready data: for each HEDS 3.0 section what the data answers and
    what is left to the authors (a flat ``to_complete_by_the_authors`` list too)."""
    protocol = study.protocol_obj
    items = counted_items(study)
    models = sorted({m for m in items.values_list("model_name", flat=True) if m})
    kinds = sorted(set(items.values_list("kind", flat=True)))
    conditions = list(
        items.values("condition").annotate(n=Count("id")).order_by("condition").values_list("condition", "n")
    )
    prompts = len(set(items.exclude(prompt="").values_list("prompt", flat=True)))
    invitations = list(Invitation.objects.filter(study=study).order_by("created_at", "id"))
    pools: dict[str, int] = {}
    for person in quality["annotators"]:
        pools[person["pool"]] = pools.get(person["pool"], 0) + 1
    excluded = sum(1 for p in quality["annotators"] if p["excluded"])
    sections = [
        _section(
            "1",
            [
                (
                    "Evaluation tool",
                    "Stereotype Audit Workbench (the reproducibility appendix gives version, commit and "
                    "export sha256)",
                )
            ],
            [
                "main reference (the paper) and which experiment this sheet describes",
                "links to released resources",
                "names, affiliations and contact of the people completing the sheet",
            ],
        ),
        _section(
            "2",
            [
                ("Systems evaluated", ", ".join(models) or "not recorded on the items"),
                ("Input", f"text prompts ({prompts:,} distinct)" if prompts else "not recorded on the items"),
                ("Output", ", ".join(kinds) or "-"),
            ],
            ["the task the systems perform, in HEDS terms", "system descriptions beyond the model names"],
        ),
        _section(
            "3",
            [
                (
                    "Sample size (items evaluated)",
                    f"{items.count():,} items; {metrics['coverage']['settled']:,} with every judgement the "
                    f"overlap asks, {metrics['coverage']['partial']:,} partial",
                ),
                ("Items per condition", ", ".join(f"{c or '-'}: {n:,}" for c, n in conditions) or "-"),
                (
                    "Number of evaluators",
                    ", ".join(f"{n:,} {pool}" for pool, n in sorted(pools.items())) or "0",
                ),
                ("Excluded evaluators", f"{excluded:,}"),
                ("Judgements per item (overlap)", str(study.overlap)),
                (
                    "Recruitment",
                    "; ".join(
                        f"{inv.get_platform_display()} ({inv.pool}, {inv.uses} joined)" for inv in invitations
                    )
                    or "enrolled by the researcher or imported",
                ),
                (
                    "Inter-rater agreement",
                    "Krippendorff's alpha per question with bootstrap 95% intervals (Agreement section)",
                ),
            ],
            [
                "evaluators' expertise and background",
                "how much evaluators were paid",
                "where and when the experiment ran",
                "how the items were chosen from the systems' outputs, if not all",
            ],
        ),
        _section(
            "4",
            [
                (
                    f"Criterion {q.key}",
                    f"{q.prompt} [{q.kind}"
                    + (f": {', '.join(o.label for o in q.options)}]" if q.options else "]"),
                )
                for q in protocol.questions
            ]
            + [("Instructions shown to evaluators", protocol.instructions or "-")],
            [
                "each criterion's name and definition in the QCET taxonomy",
                "what each criterion assesses (form, content, ...) and its frame of reference",
            ],
        ),
        _section(
            "5",
            [
                (
                    "Consent text shown",
                    " | ".join(inv.consent_text for inv in invitations if inv.consent_text)
                    or "none recorded",
                ),
                (
                    "Personal data collected",
                    ", ".join(
                        sorted({str(q.get("key")) for inv in invitations for q in inv.demographics or []})
                    )
                    or "no demographic form",
                ),
            ],
            [
                "ethics approval (body and reference)",
                "how personal data were handled and stored",
                "risks to evaluators and how they were addressed",
            ],
        ),
    ]
    return {
        "version": VERSION,
        "reference": REFERENCE,
        "numbering": NUMBERING_NOTE,
        "study": study.pk,
        "sections": sections,
        "to_complete_by_the_authors": [
            f"Section {s['section']} ({s['questions']}): {topic}"
            for s in sections
            for topic in s["to_complete_by_the_authors"]
        ],
    }


def heds_section(datasheet: dict[str, Any]) -> Section:
    """The datasheet as the report's appendix section, so every format shows it."""
    subsections = [
        Section(
            key=f"heds-{s['section']}",
            title=f"HEDS {s['section']}. {s['title']} (Questions {s['questions']})",
            blocks=[
                Facts(pairs=[(a["topic"], a["answer"]) for a in s["answered"]]),
                BulletList(items=[f"{topic}: {TO_COMPLETE}" for topic in s["to_complete_by_the_authors"]]),
            ],
        )
        for s in datasheet["sections"]
    ]
    return Section(key="heds", title=f"{VERSION} datasheet", subsections=subsections)


def render(document: ReportDocument) -> Rendered:
    """The datasheet (one study's, or each study's of a compare report) as JSON."""
    body = json.dumps(document.heds, indent=2, ensure_ascii=False, default=str) + "\n"
    stem = "-".join(str(i) for i in document.study_ids)
    return Rendered(filename=f"study-{stem}-heds.json", content_type="application/json", body=body.encode())
