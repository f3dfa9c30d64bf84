"""Every metric that applies to a study's protocol, as one JSON-serialisable report (SPEC 6, docs/metrics.md).

``metrics_report(study=..., source=...)`` reads labels through ``annotations.selectors.labels`` and calls the
pure functions of ``metrics/``. The report is a list of *tables* (key, title, columns, rows, ``n_items``
behind it, notes), a ``summary`` of headline numbers and the *figures* the findings page draws from the
tables. It writes nothing; ``metrics_report_cached`` keeps a report until the study's annotations or
stereotype table change. Each paper's tables are built in the module of its name beside this one
(mirroring ``metrics/``); the shared shapes live in ``tables.py``.

| protocol | metrics |
| --- | --- |
| stereotype-markers | visage L(attr, id), L(stereo), L(random), theta, thrice ratio, offensiveness O(id) |
| (+ any study with the visage pull sets) | stereotypical pull Sim(d,s), Sim(d,ns), Sim(s,ns), mean; salience |
| visualness | consensus shares of each Likert label, the visual attributes |
| ssi-rubric | SSI cells, initial vs refined (relative drop, paired t-test), rubric prevalence |
| bias-axes | per-axis distributions, w_bar against uniform, IS matrix per prompt group |
| subgroup | stereotype score per instruction pair; machine vs human per labeller |
| object-attributes | SODA BDS + permutation p, VAC, CDS, concentrated cases, base -> group shifts |
"""

from __future__ import annotations

import hashlib
from typing import Any

from django.core.cache import cache
from django.db.models import Count, Max

from annotations.models import Annotation, ConsensusLabel, Item, StereotypeEntry, Study
from annotations.selectors.features import (
    CAPTIONS,
    EMBEDDING,
    feature_source_parse,
    feature_sources,
    features_fingerprint,
)
from annotations.selectors.findings.agent import agent_section
from annotations.selectors.findings.biasconnect import biasconnect_section
from annotations.selectors.findings.soda import soda_section
from annotations.selectors.findings.ssi import ssi_section
from annotations.selectors.findings.tables import Report, Section, jsonable
from annotations.selectors.findings.visage import (
    visage_features_apply,
    visage_pull_section,
    visage_salience_section,
    visage_section,
    visualness_section,
)
from annotations.selectors.labels import CONSENSUS, JUDGEMENTS, items_info, machine_labellers, source_parse
from common.errors import ValidationFailed

# The protocols whose metrics can read every judgement (source=judgements), not only one label per item.
JUDGEMENT_PROTOCOLS = ("stereotype-markers", "visualness")

# Protocol key -> the section builder of its paper.
SECTIONS: dict[str, Section] = {
    "stereotype-markers": visage_section,
    "visualness": visualness_section,
    "ssi-rubric": ssi_section,
    "bias-axes": biasconnect_section,
    "subgroup": agent_section,
    "object-attributes": soda_section,
}


def study_metric_kind(study: Study) -> str | None:
    """The preset whose metrics apply (by the protocol's key, else the study's preset), or None."""
    key = study.protocol_obj.key or study.preset
    return key if key in SECTIONS else None


def metrics_report(
    *,
    study: Study,
    source: str | None = CONSENSUS,
    embeddings: str | None = None,
    captions: str | None = None,
) -> dict[str, Any]:
    """Every metric that applies to ``study``'s protocol from ``source`` (see the module docstring).

    ``embeddings`` and ``captions`` name the machine source (``name[@version]``) whose stored image
    embeddings and captions the visage stereotypical pull and salience read (default: the only one,
    else the first by name); they apply to stereotype-markers studies and to any study holding the
    visage pull sets (conditions default / stereotypical / non-stereotypical).

    Raises ValidationFailed for an unknown source, or ``judgements`` where metrics need one label per
    item (every protocol but stereotype-markers and visualness). Reads only; no locks.
    """
    parsed = source_parse(study, source)
    embedding_source = feature_source_parse(study, EMBEDDING, embeddings)
    caption_source = feature_source_parse(study, CAPTIONS, captions)
    kind = study_metric_kind(study)
    if parsed.kind == JUDGEMENTS and kind not in JUDGEMENT_PROTOCOLS:
        raise ValidationFailed(
            "source 'judgements' applies to visage studies only; these metrics read one "
            "label per item (consensus or a labeller)",
            {"source": "not applicable"},
        )
    items = items_info(study)
    report = Report()
    features = visage_features_apply(kind, items)
    if kind is None and not features:
        report.notes.append("No paper metric applies to this protocol; see the agreement report instead.")
    elif kind is not None:
        SECTIONS[kind](study, parsed, items, report)
    if features:
        visage_pull_section(study, items, report, embedding_source)
        visage_salience_section(study, items, report, caption_source)
    return jsonable(
        {
            "study": study.pk,
            "name": study.name,
            "protocol": kind,
            "source": parsed.name,
            "sources": [
                CONSENSUS,
                *([JUDGEMENTS] if kind in JUDGEMENT_PROTOCOLS else []),
                *machine_labellers(study),
            ],
            "embeddings": embedding_source.name if embedding_source else None,
            "captions": caption_source.name if caption_source else None,
            "embedding_sources": feature_sources(study, EMBEDDING),
            "caption_sources": feature_sources(study, CAPTIONS),
            "n_items": len(items),
            "summary": report.summary,
            "notes": report.notes,
            "tables": report.tables,
            "figures": report.figures,
        }
    )


def _fingerprint(study: Study, source: str, embeddings: str | None, captions: str | None) -> str:
    annotations = Annotation.objects.filter(study=study).aggregate(n=Count("id"), last=Max("updated_at"))
    entries = StereotypeEntry.objects.filter(study=study).count()
    consensus = ConsensusLabel.objects.filter(study=study).aggregate(n=Count("id"), last=Max("computed_at"))
    items = Item.objects.filter(study=study).aggregate(n=Count("id"), last=Max("id"))
    raw = (
        f"{study.pk}|{source}|{embeddings}|{captions}|{study.updated_at.isoformat()}|{annotations['n']}|"
        f"{annotations['last']}|{entries}|{items['n']}|{items['last']}|{consensus['n']}|{consensus['last']}|"
        f"{features_fingerprint(study)}"
    )
    return "metrics-report:" + hashlib.sha256(raw.encode()).hexdigest()


def metrics_report_cached(
    *,
    study: Study,
    source: str | None = CONSENSUS,
    embeddings: str | None = None,
    captions: str | None = None,
    timeout: int = 3600,
) -> dict[str, Any]:
    """``metrics_report`` kept in the cache until an annotation, a consensus label, the stereotype table,
    a stored embedding or caption, or the study changes."""
    key = _fingerprint(study, source or CONSENSUS, embeddings or None, captions or None)
    report = cache.get(key)
    if report is None:
        report = metrics_report(study=study, source=source, embeddings=embeddings, captions=captions)
        cache.set(key, report, timeout)
    return report
