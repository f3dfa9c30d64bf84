"""``report_build``: one study's audit report (or a compare report of several) as a typed
``ReportDocument`` (docs/reports.md).

Every section reads through the selectors the pages and the API read (``reports/sections/``), inside one
transaction, so the numbers, the datasheet and the sha256 of the JSONL export are taken at the same moment.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from django.db import transaction
from django.utils import timezone

from annotations.models import Study
from annotations.selectors.agreement import agreement_report
from annotations.selectors.quality import quality_report_cached
from common.errors import ValidationFailed
from findings.report import findings_report_cached
from metrics.multiple_testing import correction_parse
from reports.document import DocTable, ReportDocument, Section
from reports.heds import heds_datasheet, heds_section
from reports.sections.agreement import agreement_section, consensus_rows
from reports.sections.appendix import appendix_section, commands
from reports.sections.compare import compare_section, comparison_of
from reports.sections.design import design_section
from reports.sections.findings import findings_section
from reports.sections.machines import machine_rows, machines_section
from reports.sections.people import people_section
from reports.sections.prose import prose_section
from reports.sections.who_judged import who_judged, who_judged_section
from reports.wording import reader_text


@dataclass
class _StudyPart:
    """What one study gives a report: its sections, HEDS datasheet, the source its findings read (key and
    words) and the commands that recompute it."""

    sections: list[Section]
    datasheet: dict[str, object]
    source: str
    source_label: str
    commands: list[str]


def _study_sections(
    study: Study, *, source: str | None, correction: str, generated_at: str, csv_prefix: str = ""
) -> _StudyPart:
    """One study's sections, its HEDS datasheet, the source its findings read and its commands;
    ``csv_prefix`` starts the names of its findings tables' CSV files in the supplement."""
    metrics = findings_report_cached(study=study, source=source, correction=correction)
    agreement = agreement_report(study=study)
    quality = quality_report_cached(study=study)
    consensus = consensus_rows(study)
    findings = findings_section(metrics, csv_prefix=csv_prefix)
    machines = machine_rows(agreement)
    tables = [b for b in findings.blocks if isinstance(b, DocTable)]
    pools = who_judged(study, metrics=metrics, correction=correction)
    sections = [
        design_section(study),
        people_section(study, quality),
        agreement_section(study, agreement, consensus),
        who_judged_section(pools),
        machines_section(study, agreement),
        findings,
        prose_section(
            study_name=study.name,
            overlap=study.overlap,
            metrics=metrics,
            agreement=agreement,
            quality=quality,
            tables=tables,
            machine_rows=machines,
            correction=correction,
        ),
    ]
    datasheet = heds_datasheet(
        study, metrics=metrics, agreement=agreement, quality=quality, consensus=consensus, pools=pools
    )
    sections.append(
        appendix_section(study, source=metrics.source, correction=correction, generated_at=generated_at)
    )
    sections.append(heds_section(datasheet))
    return _StudyPart(
        sections=sections,
        datasheet=datasheet,
        source=metrics.source,
        source_label=reader_text(metrics.source_label or metrics.source),
        commands=commands(study, metrics.source, correction),
    )


def report_build(
    study: Study, *, compare: Sequence[Study] = (), source: str | None = None, correction: str = "holm"
) -> ReportDocument:
    """The audit report of ``study`` read from ``source`` (None: the protocol's default source), p-values
    corrected by ``correction`` (holm or bh); with ``compare``, a compare report: the studies side by side,
    then each study's own report as a section. Raises ValidationFailed for an unknown correction or source."""
    try:
        correction = correction_parse(correction)
    except ValueError as exc:
        raise ValidationFailed(str(exc)) from exc
    generated_at = timezone.now().isoformat(timespec="seconds")
    studies = [study, *compare]
    with transaction.atomic():
        if not compare:
            part = _study_sections(study, source=source, correction=correction, generated_at=generated_at)
            return ReportDocument(
                title=f"Audit report: {study.name}",
                study_ids=[study.pk],
                source=part.source,
                generated_at=generated_at,
                sections=part.sections,
                heds=part.datasheet,
                source_label=part.source_label,
                commands=part.commands,
            )
        if len({s.pk for s in studies}) != len(studies):
            raise ValidationFailed("a compare report needs different studies")
        top = [compare_section(comparison_of(studies, source))]
        heds: dict[str, object] = {}
        used = source or "consensus"
        labels: list[str] = []
        every: list[str] = []
        for each in studies:
            part = _study_sections(
                each,
                source=source,
                correction=correction,
                generated_at=generated_at,
                csv_prefix=f"study-{each.pk}-",
            )
            heds[str(each.pk)] = part.datasheet
            labels.append(part.source_label)
            every += part.commands
            top.append(
                Section(key=f"study-{each.pk}", title=f"Study: {each.name}", subsections=part.sections)
            )
        return ReportDocument(
            title="Compare report: " + " vs ".join(s.name for s in studies),
            study_ids=[s.pk for s in studies],
            source=used,
            generated_at=generated_at,
            sections=top,
            heds={"studies": heds},
            source_label=" / ".join(dict.fromkeys(labels)),
            commands=every,
        )
