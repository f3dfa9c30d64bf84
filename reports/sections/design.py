"""The report's Design section: the protocol's questions, the items by condition, model and prompt set,
where the images came from (generation jobs and their model provenance) and who labelled them by
machine (labeller kind, model, version, prompt template, calls and cost).

Counts read the counted items (``annotations.selectors.counted``: control items left out), the same
items the findings and agreement pages count.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from django.db.models import Count, Sum

from annotations.models import Annotation, Annotator, Study
from annotations.presenters import labeller_summary
from annotations.selectors.counted import counted_items
from common.redaction import redact
from generation.models import GenerationJob
from labelling.models import LabellingJob
from reports.document import Column, DocTable, Facts, Section

PROMPT_SET_KEYS = ("prompt_set", "set", "design")


def questions_table(study: Study) -> DocTable:
    """The protocol's questions: key, kind, prompt and options (labels), in the protocol's order."""
    protocol = study.protocol_obj
    rows = [
        [
            q.key,
            q.kind,
            q.prompt,
            ", ".join(o.label for o in q.options)
            if q.options
            else (f"from item {q.options_from}" if q.options_from else ""),
        ]
        for q in protocol.questions
    ]
    return DocTable(
        key="design_questions",
        title="Protocol questions",
        columns=[
            Column("key", "Question", "label"),
            Column("kind", "Kind", "text"),
            Column("prompt", "Prompt", "text"),
            Column("options", "Options", "text"),
        ],
        rows=rows,
        n=len(rows),
        source_key="design:questions",
    )


def prompt_set_of(metadata: dict[str, Any]) -> str:
    """The prompt set an item's metadata names (``prompt_set``, ``set`` or ``design``), else ""."""
    for key in PROMPT_SET_KEYS:
        if metadata.get(key):
            return str(metadata[key])
    return ""


def items_table(study: Study) -> DocTable:
    """Counted items by condition, model and prompt set."""
    cells: Counter[tuple[str, str, str]] = Counter()
    for condition, model, metadata in counted_items(study).values_list("condition", "model_name", "metadata"):
        cells[(condition or "", model or "", prompt_set_of(metadata or {}))] += 1
    rows = [[c, m, p, n] for (c, m, p), n in sorted(cells.items())]
    return DocTable(
        key="design_items",
        title="Items by condition, model and prompt set",
        columns=[
            Column("condition", "Condition", "label"),
            Column("model", "Model", "label"),
            Column("prompt_set", "Prompt set", "label"),
            Column("n_items", "Items", "n"),
        ],
        rows=rows,
        n=sum(cells.values()),
        source_key="design:items",
        empty_reason=None if rows else "the study has no items yet",
    )


def provenance_table(study: Study) -> DocTable:
    """The study's generation jobs: prompt set, model and fingerprint, seed, steps, guidance, images."""
    rows = []
    for job in GenerationJob.objects.filter(study=study).order_by("id"):
        spec = job.model_spec or {}
        prov = job.provenance or {}
        fingerprint = prov.get("folder_sha256") or prov.get("resolved_revision") or prov.get("revision") or ""
        templates = sorted({str(p.get("text", "")) for p in (job.prompts or [])[:3]})
        rows.append(
            [
                job.pk,
                job.name,
                str(spec.get("source", job.model_label)),
                str(fingerprint),
                job.base_seed,
                spec.get("steps"),
                spec.get("guidance"),
                "; ".join(templates) + (" ..." if len(job.prompts or []) > 3 else ""),
                job.generated,
                job.failed,
                job.status,
            ]
        )
    return DocTable(
        key="design_generation",
        title="Generation jobs (provenance)",
        columns=[
            Column("job", "Job", "label"),
            Column("prompt_set", "Prompt set", "text"),
            Column("model", "Model", "text"),
            Column("fingerprint", "Fingerprint (sha256 or revision)", "text"),
            Column("seed", "Base seed", "n"),
            Column("steps", "Steps", "n"),
            Column("guidance", "Guidance", "estimate"),
            Column("prompts", "Prompts (first three)", "text"),
            Column("generated", "Images made", "n"),
            Column("failed", "Failed", "n"),
            Column("status", "Status", "text"),
        ],
        rows=rows,
        n=len(rows),
        source_key="design:generation",
        empty_reason=None
        if rows
        else "no image was generated in the workbench for this study (items were imported; their seeds "
        "and settings are on the items, if the file gave them)",
    )


def labellers_table(study: Study) -> DocTable:
    """Every machine labeller with answers in the study: kind, model, version, prompt template, answers,
    labelling calls (answers asked of the model, cached ones apart) and cost in USD."""
    answered = dict(
        Annotation.objects.filter(study=study, annotator__kind=Annotator.Kind.MACHINE)
        .values("annotator")
        .annotate(n=Count("id"))
        .values_list("annotator", "n")
    )
    jobs: dict[int, dict[str, Any]] = {
        row["annotator"]: dict(row)
        for row in LabellingJob.objects.filter(study=study)
        .values("annotator")
        .annotate(
            jobs=Count("id"),
            calls=Sum("answered"),
            failed=Sum("failed"),
            cached=Sum("cached"),
            cost=Sum("cost_usd"),
        )
    }
    rows = []
    for machine in Annotator.objects.filter(pk__in=set(answered) | set(jobs)).order_by("name", "version"):
        summary = labeller_summary(machine)
        job: dict[str, Any] = jobs.get(machine.pk, {})
        template = machine.config.get("template") or machine.config.get("prompt_template") or ""
        rows.append(
            [
                machine.name,
                machine.version,
                summary.get("kind", ""),
                summary.get("model", ""),
                str(redact(template)) if template else "",
                answered.get(machine.pk, 0),
                job.get("jobs", 0),
                (job.get("calls") or 0) + (job.get("failed") or 0) - (job.get("cached") or 0)
                if job
                else None,
                job.get("cost") if job else None,
            ]
        )
    return DocTable(
        key="design_labellers",
        title="Machine labellers",
        columns=[
            Column("labeller", "Labeller", "label"),
            Column("version", "Version", "text"),
            Column("kind", "Kind", "text"),
            Column("model", "Model", "text"),
            Column("template", "Prompt template", "text"),
            Column("answers", "Answers", "n"),
            Column("jobs", "Labelling jobs", "n"),
            Column("calls", "Model calls", "n"),
            Column("cost_usd", "Cost (USD)", "estimate"),
        ],
        rows=rows,
        n=len(rows),
        notes=[
            "Model calls: answers stored plus answers that failed every attempt, less those served from the "
            "answer cache; imported machine answers have no labelling job, so no calls or cost."
        ],
        source_key="design:labellers",
        empty_reason=None if rows else "no machine labeller answered in this study",
    )


def design_section(study: Study) -> Section:
    """The Design section of ``study``'s report."""
    protocol = study.protocol_obj
    facts = Facts(
        pairs=[
            ("Study", study.name),
            ("Protocol", f"{protocol.name} (preset {study.preset or 'none'})"),
            ("Unit", protocol.unit),
            ("Judgements per item (overlap)", str(study.overlap)),
            ("Items (control items left out)", f"{counted_items(study).count():,}"),
        ]
    )
    return Section(
        key="design",
        title="Design",
        blocks=[
            facts,
            questions_table(study),
            items_table(study),
            provenance_table(study),
            labellers_table(study),
        ],
    )
