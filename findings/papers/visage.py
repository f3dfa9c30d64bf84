"""ViSAGe findings (stereotype markers and visual-ness): the tables of ``metrics/visage.py``.

``visage_section`` reads the attribute judgements of a stereotype-markers study and the study's
stereotype table (SeeGULL) into L(attr, id), L(stereo), L(random), theta, the thrice ratio and
offensiveness (paper Table 1); ``visualness_section`` reads a visual-ness study's Likert ratings into
consensus shares (paper Fig. 6) and the attributes every rater found visual. ``visage_pull_section`` and
``visage_salience_section`` read the stored image embeddings and captions of one machine source
(``annotations.selectors.features``) into the stereotypical pull (section 6) and salience (section 4.3);
``report.py`` adds them to stereotype-markers studies and to any study holding the pull sets.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

import numpy as np

from annotations.models import StereotypeEntry, Study
from annotations.selectors.features import FeatureSource, captions_by_item, embeddings_by_item
from annotations.selectors.labels import (
    CONSENSUS,
    JUDGEMENTS,
    ItemInfo,
    LabelSource,
    judgements_for,
    labels_for,
)
from findings.tables import Column, Figure, Method, PaperFindings, Table, jsonable
from metrics import visage
from protocols.schema import NONE_OPTION_KEY

# A stereotype-table pair is stereotypical when at least this many North-American annotators marked it.
MIN_NA_STEREO = 2
# The visual-ness labels that count an attribute as visual.
VISUAL_KEYS = ("agree", "strongly_agree")


def _identity_of(info: ItemInfo) -> str:
    """The identity group an item's image was generated for (its ``identity`` metadata)."""
    return str(info.metadata.get("identity", ""))


def _showings(
    study: Study, source: LabelSource, items: dict[int, ItemInfo], report: PaperFindings
) -> tuple[list[visage.Showing], dict[str, set[int]]]:
    """Every showing of an attribute with an image (every judgement, or one label per image from
    ``source``) and each identity's images."""
    question = study.protocol_obj.question("attributes")
    label_maps: dict[int, dict[str, str]] = {}

    def labels(item_id: int) -> dict[str, str]:
        if item_id not in label_maps:
            md = items[item_id].metadata
            label_maps[item_id] = {o.key: o.label for o in question.options_for(md)} | {
                NONE_OPTION_KEY: visage.NONE_OF_THE_ABOVE
            }
        return label_maps[item_id]

    showings: list[visage.Showing] = []
    images_by_identity: dict[str, set[int]] = defaultdict(set)
    if source.kind == JUDGEMENTS:
        for j in judgements_for(study, "attributes", item_ids=source.items):
            names, identity = labels(j.item_id), _identity_of(items[j.item_id])
            chosen = set(j.value or [])
            for key in j.shown if j.shown is not None else names:
                showings.append(visage.Showing(identity, names.get(key, key), key in chosen))
            images_by_identity[identity].add(j.item_id)
    else:
        label_set = labels_for(study, "attributes", source)
        assert label_set.shown is not None
        for item_id, keys in label_set.shown.items():
            names, identity = labels(item_id), _identity_of(items[item_id])
            chosen = set(label_set.values.get(item_id) or [])
            for key in keys:
                showings.append(visage.Showing(identity, names.get(key, key), key in chosen))
            images_by_identity[identity].add(item_id)
        report.notes.append(
            "L(attr, id) here is over per-image labels (one per image, from "
            + source.name
            + "); the paper's "
            "Table 1 counts every judgement: use source=judgements to reproduce it."
        )
    return showings, images_by_identity


def _tendency_table(
    eligible: list[visage.Tendency],
    rest: list[visage.Tendency],
    images_by_identity: dict[str, set[int]],
    n_images: int,
    unit: str,
) -> Table:
    """ViSAGe Table 1: L(stereo), L(random) and theta per identity, eligible ones first."""
    return Table(
        "visage_tendency",
        "Stereotype likelihood and tendency per identity (ViSAGe Table 1)",
        [
            Column("identity", "label"),
            Column("l_stereo", "estimate"),
            Column("l_random", "estimate"),
            Column("theta", "estimate"),
            Column("eligible", "flag"),
            Column("n_stereo_attributes", "n"),
            Column("n_random_terms", "n"),
            Column("n_showings", "n"),
            Column("n_images", "n"),
            Column("reason", "text"),
        ],
        [
            [
                t.identity,
                t.l_stereo,
                t.l_random,
                t.theta,
                t.eligible,
                t.n_stereo_attributes,
                t.n_random_terms,
                t.n_showings,
                len(images_by_identity.get(t.identity, ())),
                t.reason,
            ]
            for t in eligible + rest
        ],
        n_images,
        [
            f"Stereotypical: stereotype-table pairs with NA_stereo >= {MIN_NA_STEREO} whose attribute "
            "is visual; 'None of the above' counts as one more random term; theta only with >= 2 "
            "stereotypical attributes."
        ],
        method=Method(
            "L(stereo) and L(random) = mean of L(attr, id) = k/n over the identity's stereotypical "
            "attributes and over its other attributes plus 'None of the above'; theta = L(stereo) / "
            "L(random), eligible with at least 2 stereotypical attributes shown",
            reference="ViSAGe Table 1 (section 4.2)",
            unit=unit,
        ),
    )


def _likelihood_table(
    likelihoods: dict[Any, visage.Likelihood], stereotypes: set[tuple[str, str]], n_images: int, unit: str
) -> Table:
    """L(attr, id) = k/n per identity and attribute."""
    return Table(
        "visage_likelihoods",
        "L(attr, id) = k/n per identity and attribute",
        [
            Column("identity", "label"),
            Column("attribute", "label"),
            Column("stereotypical", "flag"),
            Column("k", "n"),
            Column("n", "n"),
            Column("likelihood", "estimate"),
        ],
        [
            [lk.identity, lk.attribute, (lk.identity, lk.attribute) in stereotypes, lk.k, lk.n, lk.value]
            for lk in likelihoods.values()
        ],
        n_images,
        method=Method(
            "L(attr, id) = k/n: of n showings of the attribute with the identity's images, k chose it",
            reference="ViSAGe section 4.2",
            unit=unit,
        ),
    )


def _offensiveness_table(offensive: list[visage.Offensiveness], n_images: int, unit: str) -> Table:
    """O(id) of the stereotypes found present."""
    return Table(
        "visage_offensiveness",
        "Offensiveness O(id) of the stereotypes found present",
        [
            Column("identity", "label"),
            Column("offensiveness", "estimate"),
            Column("l_stereo", "estimate"),
            Column("n_present", "n"),
            Column("present_attributes", "text"),
            Column("n_missing_score", "n"),
            Column("reason", "text"),
        ],
        [
            [
                o.identity,
                o.value,
                o.l_stereo,
                len(o.present_attributes),
                "; ".join(o.present_attributes),
                o.n_missing_score,
                o.reason,
            ]
            for o in sorted(offensive, key=lambda o: (o.value is None, -(o.value or 0.0), o.identity))
        ],
        n_images,
        [
            "Present = selected at least once (L > 0); the paper's ranking does not reproduce "
            "(docs/metrics.md)."
        ],
        method=Method(
            "O(id) = (1/n) L(stereo, id) x the sum of SeeGULL's mean offensiveness over the n "
            "stereotypical attributes present (L > 0)",
            reference="ViSAGe section 5 (offensiveness)",
            unit=unit,
        ),
    )


def visage_section(
    study: Study, source: LabelSource, items: dict[int, ItemInfo], report: PaperFindings
) -> None:
    """Stereotype likelihood, tendency and offensiveness per identity (ViSAGe Table 1)."""
    showings, images_by_identity = _showings(study, source, items, report)
    entries = list(
        StereotypeEntry.objects.filter(study=study).values_list(
            "identity", "attribute", "na_stereo", "offensiveness", "visual"
        )
    )
    if not entries:
        report.notes.append(
            "No stereotype table: every attribute counts as random "
            "(upload one on this page, or import_seegull)."
        )
    stereotypes = {
        (i, a) for i, a, na, _o, vis in entries if na is not None and na >= MIN_NA_STEREO and vis is not False
    }
    scores = {(i, a): o for i, a, _na, o, _v in entries}
    likelihoods = visage.attribute_likelihoods(showings)
    tendencies = visage.stereotype_tendency(likelihoods, stereotypes)
    ratio = visage.thrice_ratio(tendencies)
    offensive = visage.offensiveness(likelihoods, tendencies, stereotypes, scores)
    n_images = sum(len(v) for v in images_by_identity.values())
    unit = (
        "showings (one attribute shown with one image to one annotator)"
        if source.kind == JUDGEMENTS
        else f"attribute shown with an image, one label per image from {source.name}"
    )

    def order(t: visage.Tendency) -> tuple[int, float, float]:
        # Paper Table 1 order: undefined theta because L(random) = 0 first (by L(stereo)), then by theta.
        zero = t.theta is None and t.l_random == 0
        return (0 if zero else 1, -(t.theta or 0.0), -(t.l_stereo or 0.0))

    eligible = sorted((t for t in tendencies if t.eligible), key=order)
    rest = sorted((t for t in tendencies if not t.eligible), key=lambda t: t.identity)
    report.tables.append(_tendency_table(eligible, rest, images_by_identity, n_images, unit))
    report.tables.append(_likelihood_table(likelihoods, stereotypes, n_images, unit))
    report.tables.append(_offensiveness_table(offensive, n_images, unit))
    report.summary["thrice_ratio"] = jsonable(ratio)
    report.summary["identities_eligible"] = len(eligible)
    report.figures.append(
        Figure("visage_tendency", "L(stereo) and L(random) of the top identities", "visage_tendency")
    )


def visualness_section(
    study: Study, source: LabelSource, items: dict[int, ItemInfo], report: PaperFindings
) -> None:
    """Consensus shares of the visual-ness labels and the visual attributes (ViSAGe Fig. 6, appendix 8.1)."""
    question = study.protocol_obj.question("visual")
    keys = [o.key for o in question.options] + ([question.unsure.key] if question.unsure else [])
    by_item: dict[int, list[str]] = defaultdict(list)
    for j in judgements_for(study, "visual", item_ids=source.items):
        by_item[j.item_id].append(j.value)
    # Items with fewer ratings than the overlap, counted only when the reader includes partial items.
    partial_terms = {items[i].text for i in by_item if i in (source.short or ())}
    if source.kind == JUDGEMENTS:
        shares = visage.likert_consensus_shares(list(by_item.values()), keys, min_agree=2)
        rows = [[s.label, s.count, s.n_attributes, s.share] for s in shares]
        n = len(by_item)
        note = "Share of rated attributes where at least 2 raters chose the label (visage appendix 8.1)."
        visual = visage.visual_attributes(((items[i].text, r) for i, r in by_item.items()), VISUAL_KEYS)
    else:
        label_set = labels_for(study, "visual", source)
        n = label_set.n_items
        counts = {k: sum(1 for v in label_set.values.values() if v == k) for k in keys}
        rows = [[k, counts[k], n, counts[k] / n if n else None] for k in keys]
        note = f"Share of items whose {source.name} label is the label" + (
            " (with 3 raters: the label at least 2 chose)." if source.kind == CONSENSUS else "."
        )
        if source.kind == CONSENSUS:
            visual = visage.visual_attributes(((items[i].text, r) for i, r in by_item.items()), VISUAL_KEYS)
        else:
            visual = list(
                dict.fromkeys(items[i].text for i, v in label_set.values.items() if v in VISUAL_KEYS)
            )
    report.tables.append(
        Table(
            "visualness_shares",
            "Consensus shares of the visual-ness labels (ViSAGe Fig. 6)",
            [
                Column("label", "label"),
                Column("count", "n"),
                Column("n_items", "n"),
                Column("share", "estimate"),
            ],
            rows,
            n,
            [note],
            method=Method(
                "share of the rated attributes given the label: count / n_items (the note says how read)",
                reference="ViSAGe Fig. 6, appendix 8.1",
                unit="attributes",
            ),
        )
    )
    report.tables.append(
        Table(
            "visual_attributes",
            "Visual attributes (every rating Agree or Strongly Agree)",
            [Column("attribute", "label"), Column("partial", "flag")],
            [[a, a in partial_terms] for a in sorted(visual)],
            n,
            [
                "All-agree rule over every judgement (SPEC 5 all-agree-set); a term listed twice counts "
                f"once. Only terms with every rating the overlap asks for ({study.overlap}) are listed "
                "unless partial items are included (partial = True: fewer ratings, provisional)."
            ],
            method=Method(
                "the attributes every rating of which is Agree or Strongly Agree (listed; no statistic)",
                reference="ViSAGe appendix 8.1",
                unit="attributes",
            ),
        )
    )
    report.summary["visual_attributes"] = len(visual)
    report.figures.append(Figure("visualness_shares", "Visual-ness consensus shares", "visualness_shares"))


# --- Stereotypical pull and salience (ViSAGe sections 4.3 and 6): stored embeddings and captions ---------

# The pull sets' conditions (generation/prompts/visage.py ``visage_pull_prompt_set``) -> the paper's names.
PULL_CONDITIONS = {"default": "d", "stereotypical": "s", "non-stereotypical": "ns"}
# Images prompted with an attribute ("... described as attr") would mention it by construction: their
# captions are left out of salience.
ATTRIBUTE_PROMPTED = ("stereotypical", "non-stereotypical")
NO_PULL_ITEMS = (
    "No items with the conditions default, stereotypical and non-stereotypical: make the visage pull "
    "prompt set from the study's stereotype table (the button under 'Image embeddings and captions' on the "
    "findings page; manage.py generate STUDY --prompt-set visage-pull --prompts SEEGULL.csv) or import "
    "such items."
)
NO_EMBEDDINGS = (
    "No image embeddings stored for this study: run an embedding labeller (kind clip) over it (the "
    "findings page's button, the labelling page, or manage.py autolabel STUDY --labeller NAME), or "
    "import embeddings made elsewhere (the upload on the findings page, manage.py import_features STUDY "
    "FILE.jsonl, POST /api/studies/{id}/features/import/)."
)
NO_CAPTIONS = (
    "No captions stored for this study: run a captioner (kind captioner) over it (the findings page's "
    "button, the labelling page, or manage.py autolabel STUDY --labeller NAME), or import captions made "
    "elsewhere (the upload on the findings page, manage.py import_features STUDY FILE.jsonl, "
    "POST /api/studies/{id}/features/import/)."
)


def visage_features_apply(kind: str | None, items: dict[int, ItemInfo]) -> bool:
    """Pull and salience apply to stereotype-markers studies and to any study holding the pull sets."""
    return kind == "stereotype-markers" or any(info.condition in PULL_CONDITIONS for info in items.values())


def visage_pull_section(
    study: Study, items: dict[int, ItemInfo], report: PaperFindings, source: FeatureSource | None
) -> None:
    """Stereotypical pull per identity: Sim(d,s), Sim(d,ns), Sim(s,ns) and their mean over the stored image
    embeddings of ``source`` (ViSAGe section 6, Tables 2-4), with the images and items behind each set."""
    pull_items = {i: info for i, info in items.items() if info.condition in PULL_CONDITIONS}
    notes: list[str] = []
    rows: list[list[Any]] = []
    n_used = 0
    if not pull_items:
        notes.append(NO_PULL_ITEMS)
    elif source is None:
        notes.append(NO_EMBEDDINGS)
    else:
        vectors = embeddings_by_item(study, source.annotator_id)
        sets: dict[str, dict[str, list[np.ndarray]]] = defaultdict(lambda: defaultdict(list))
        missing = no_identity = 0
        for item_id, info in sorted(pull_items.items()):
            identity = _identity_of(info)
            if not identity:
                no_identity += 1
            elif item_id not in vectors:
                missing += 1
            else:
                sets[identity][info.condition].append(vectors[item_id])
        if missing:
            notes.append(f"{missing} of {len(pull_items)} pull items have no embedding from {source.name}.")
        if no_identity:
            notes.append(f"{no_identity} pull items have no 'identity' metadata and are left out.")
        if not sets:
            notes.append(
                NO_EMBEDDINGS if not vectors else f"No pull item has an embedding from {source.name}."
            )
        for identity in sorted(sets):
            by_condition = sets[identity]
            try:
                matrices = [
                    np.vstack(by_condition[c]) if by_condition[c] else np.zeros((0, 1))
                    for c in PULL_CONDITIONS
                ]
                pull = visage.stereotypical_pull(*matrices)
            except ValueError as exc:  # embeddings of different dimensions under one source
                notes.append(f"{identity}: {exc}")
                continue
            counts = [len(by_condition[c]) for c in PULL_CONDITIONS]
            n_used += sum(counts)
            pulled = (
                None if pull.sim_d_s is None or pull.sim_d_ns is None else bool(pull.sim_d_s > pull.sim_d_ns)
            )
            rows.append(
                [
                    identity,
                    pull.sim_d_s,
                    pull.sim_d_ns,
                    pull.sim_s_ns,
                    pull.mean,
                    pulled,
                    pull.n_d,
                    pull.n_s,
                    pull.n_ns,
                    *counts,
                    pull.reason,
                ]
            )
        rows.sort(key=lambda r: (r[4] is None, -(r[4] or 0.0), r[0]))
        defined = [r for r in rows if r[5] is not None]
        report.summary["stereotypical_pull"] = {
            "embeddings": source.name,
            "identities_pulled": sum(1 for r in defined if r[5]),
            "identities_defined": len(defined),
        }
        if source.note:
            notes.append(source.note)
    report.tables.append(
        Table(
            "visage_pull",
            "Stereotypical pull per identity: mean cosine similarity between the default (d), "
            "stereotypical (s) and non-stereotypical (ns) image sets (ViSAGe section 6)",
            [
                Column("identity", "label"),
                Column("sim_d_s", "estimate"),
                Column("sim_d_ns", "estimate"),
                Column("sim_s_ns", "estimate"),
                Column("mean_sim", "estimate"),
                Column("pulled", "flag"),
                Column("n_d_images", "n"),
                Column("n_s_images", "n"),
                Column("n_ns_images", "n"),
                Column("n_d_items", "n"),
                Column("n_s_items", "n"),
                Column("n_ns_items", "n"),
                Column("reason", "text"),
            ],
            rows,
            n_used,
            [
                "Sim(X, Y) = mean over every pair (x in X, y in Y) of cos(x, y) over the stored image "
                "embeddings"
                + (f" of {source.name}" if source else "")
                + "; mean_sim = the mean of the three; "
                "pulled = Sim(d,s) > Sim(d,ns).",
                *notes,
            ],
            method=Method(
                "Sim(X, Y) = mean cosine similarity over every pair of image embeddings (x in X, y in Y) of "
                "the default, stereotypical and non-stereotypical sets; pulled = Sim(d,s) > Sim(d,ns)",
                reference="ViSAGe section 6, Tables 2-4",
                unit="images (stored embeddings)",
            ),
        )
    )
    if rows:
        report.figures.append(Figure("visage_pull", "Stereotypical pull per identity", "visage_pull"))
    report.notes.extend(n for n in notes if n in (NO_EMBEDDINGS, NO_PULL_ITEMS))


def salience_attributes(study: Study, items: dict[int, ItemInfo]) -> dict[str, list[str]]:
    """identity -> the stereotypical attributes whose salience is scored: the stereotype table's
    stereotypical pairs (as for L(stereo)) and the attributes of the identity's ``stereotypical`` pull
    prompts (item metadata ``attribute``), in that order."""
    table: dict[str, list[str]] = defaultdict(list)
    for identity, attribute, na, visual in StereotypeEntry.objects.filter(study=study).values_list(
        "identity", "attribute", "na_stereo", "visual"
    ):
        if na is not None and na >= MIN_NA_STEREO and visual is not False:
            table[identity].append(attribute)
    for info in items.values():
        attribute = str(info.metadata.get("attribute") or "").strip()
        if info.condition == "stereotypical" and attribute:
            table[_identity_of(info)].append(attribute)
    return {identity: list(dict.fromkeys(attrs)) for identity, attrs in table.items() if identity}


def visage_salience_section(
    study: Study, items: dict[int, ItemInfo], report: PaperFindings, source: FeatureSource | None
) -> None:
    """Salience S(attr, id) = tf * idf of each stereotypical attribute in the captions of each identity's
    images (ViSAGe section 4.3), ranked per identity; definitions in ``metrics.visage.salience``."""
    notes: list[str] = []
    rows: list[list[Any]] = []
    n_used = 0
    attributes = salience_attributes(study, items)
    if source is None:
        notes.append(NO_CAPTIONS)
    elif not attributes:
        notes.append(
            "No stereotypical attributes to score: import a stereotype table (manage.py import_seegull) or "
            "generate the visage pull sets, whose stereotypical prompts name their attribute."
        )
    else:
        stored = captions_by_item(study, source.annotator_id)
        captions: dict[str, list[str]] = defaultdict(list)
        for item_id, info in sorted(items.items()):
            identity = _identity_of(info)
            if identity and info.condition not in ATTRIBUTE_PROMPTED and item_id in stored:
                captions[identity].extend(stored[item_id])
                n_used += 1
        if not captions:
            notes.append(
                f"No captions from {source.name} on images prompted without an attribute (conditions other "
                "than stereotypical / non-stereotypical)."
            )
        pairs = [(identity, attr) for identity in sorted(attributes) for attr in attributes[identity]]
        by_identity: dict[str, list[visage.Salience]] = defaultdict(list)
        for s in visage.salience(captions, pairs):
            by_identity[s.identity].append(s)
        for identity in sorted(by_identity):
            ranked = sorted(
                by_identity[identity], key=lambda s: (s.value is None, -(s.value or 0.0), s.attribute)
            )
            for rank, s in enumerate(ranked, start=1):
                rows.append(
                    [
                        identity,
                        rank if s.value is not None else None,
                        s.attribute,
                        s.count,
                        s.n_captions,
                        s.tf,
                        s.idf,
                        s.value,
                        s.reason,
                    ]
                )
        if source.note:
            notes.append(source.note)
        report.summary["salience_captions"] = {
            "captions": source.name,
            "identities": len(captions),
            "captions_total": sum(len(c) for c in captions.values()),
        }
    report.tables.append(
        Table(
            "visage_salience",
            "Salience of stereotypical attributes in the captions of each identity's images (ViSAGe 4.3)",
            [
                Column("identity", "label"),
                Column("rank", "label"),
                Column("attribute", "label"),
                Column("mentions", "n"),
                Column("n_captions", "n"),
                Column("tf", "estimate"),
                Column("idf", "estimate"),
                Column("salience", "estimate"),
                Column("reason", "text"),
            ],
            rows,
            n_used,
            [
                "S(attr, id) = tf(attr, id) * idf(attr, C); tf = (c + 1)/(N_id + |A_id|) with c the "
                "captions of id mentioning attr (whole words, any case), N_id the captions of id and "
                "|A_id| its attributes scored; idf = ln((1 + |C|)/(1 + df)) + 1 over all captions C; "
                "images prompted with an attribute are left out (docs/metrics.md).",
                *notes,
            ],
            method=Method(
                "S(attr, id) = tf(attr, id) x idf(attr, C) over the captions of the identity's images",
                reference="ViSAGe section 4.3",
                unit="images (stored captions)",
            ),
        )
    )
    report.notes.extend(n for n in notes if n == NO_CAPTIONS)
