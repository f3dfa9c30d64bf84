"""Rater pools as label sources (``consensus@KEY=VALUE``, ``judgements@KEY=VALUE``): the pools of one
attribute, the pool's consensus under the study's rule computed by hand from the pool's own judgements,
settled and partial against the pool's share of the overlap, the pool's reliability gate, and the sources
refused with their reason (the study of tests/findings/pool_study.py)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from annotations.models import Annotator, Enrollment, Study, User
from annotations.selectors.cross_pools import pool_reliability_entries
from annotations.selectors.labels import (
    CONSENSUS,
    consensus_rule_of,
    findings_reading,
    judgements_for,
    labels_for,
    pool_short_items,
    pool_source_split,
    source_parse,
)
from annotations.selectors.pools import attribute_pools, pool_keys, pools_fingerprint
from annotations.selectors.reliability import reliability_entries, reliability_thresholds
from annotations.services.consensus import consensus_compute, consensus_rule_choose
from common.errors import ValidationFailed
from tests.findings.pool_study import IN, NA, region_pool_study

pytestmark = pytest.mark.django_db


@pytest.fixture
def study(owner: User) -> Study:
    return region_pool_study(owner)


def _by_term(study: Study, values: dict[int, object]) -> dict[str, object]:
    terms = dict(study.items.values_list("id", "external_id"))
    return {terms[item]: value for item, value in values.items()}


def test_the_pools_of_an_attribute_are_its_values_among_the_people_who_judged(study: Study) -> None:
    pools = attribute_pools(study, "region")
    assert list(pools) == [IN, NA] and [len(ids) for ids in pools.values()] == [5, 5]
    assert pool_keys(study) == {"region": pools}
    assert attribute_pools(study, "age") == {}
    assert pool_source_split("consensus@region=in") == (CONSENSUS, "region", "in")
    assert pool_source_split(" judgements@ region = na ") == ("judgements", "region", "na")
    assert pool_source_split("vlm@1") is None and pool_source_split("consensus") is None


def test_a_pool_source_names_its_pool_and_the_judgements_it_waits_for(study: Study) -> None:
    parsed = source_parse(study, "consensus@region=in")
    assert parsed.name == "consensus@region=in" and parsed.kind == CONSENSUS and not parsed.is_machine
    assert parsed.pool is not None
    # overlap 10 shared by 2 pools: an item is settled for a pool at ceil(10 / 2) = 5 of its people
    assert (parsed.pool.key, parsed.pool.value, parsed.pool.needed, parsed.pool.pools) == (
        "region",
        IN,
        5,
        (IN, NA),
    )
    assert len(parsed.pool.members) == 5
    assert source_parse(study, " consensus@ region = na ").name == "consensus@region=na"


@pytest.mark.parametrize(
    ("source", "reason"),
    [
        ("consensus@nokey=x", "no annotator of this study gave 'nokey' (attributes given: region)"),
        ("consensus@region=", "names no value"),
        ("consensus@region=", "values of region: in, na"),
        (
            "consensus@region=mars",
            "no annotator of this study gave region = 'mars' (values of region: in, na)",
        ),
        ("consensus@region", "name a rater pool as consensus@KEY=VALUE"),
        ("consensus@=in", "name a rater pool as consensus@KEY=VALUE"),
        ("judgements@nokey=x", "no annotator of this study gave 'nokey'"),
    ],
)
def test_a_pool_that_is_not_there_is_refused_with_the_reason(study: Study, source: str, reason: str) -> None:
    with pytest.raises(ValidationFailed) as refused:
        source_parse(study, source)
    assert reason in refused.value.message
    assert "source" in refused.value.details


def test_each_pools_consensus_is_the_majority_of_its_own_judgements(study: Study) -> None:
    mine = labels_for(study, "visual", "consensus@region=in")
    assert _by_term(study, mine.values) == {
        "hat": "strongly_agree",
        "kind": "strongly_disagree",
        "poor": "agree",
        "tall": "agree",
    }
    assert mine.pending == frozenset() and mine.source == "consensus@region=in"
    theirs = labels_for(study, "visual", "consensus@region=na")
    # tall: 2 of the 5 judgements the na pool's consensus waits for: pending, never a label
    assert _by_term(study, theirs.values) == {
        "hat": "strongly_agree",
        "kind": "strongly_disagree",
        "poor": "disagree",
        "tall": None,
    }
    assert _by_term(study, dict.fromkeys(theirs.pending)) == {"tall": None}
    tall = study.items.get(external_id="tall").pk
    assert pool_short_items(study, source_parse(study, "consensus@region=na").pool) == frozenset({tall})
    # everyone: poor is agree 6 : disagree 4; tall has 7 of the overlap's 10 judgements
    pooled = labels_for(study, "visual", CONSENSUS)
    assert _by_term(study, pooled.values)["poor"] == "agree" and tall in pooled.pending


def test_a_pool_consensus_runs_the_studys_rule_not_a_stored_label(study: Study) -> None:
    consensus_rule_choose(study=study, question_keys=["visual"], rule={"rule": "unanimous"})
    assert consensus_rule_of(study, "visual") == ("unanimous", {})
    consensus_compute(study=study)  # stored labels are the pooled ones; pools never read them
    theirs = labels_for(study, "visual", "consensus@region=na")
    # unanimous: poor (4 disagree, 1 agree) is undecided in the na pool; in the in pool all 5 agree
    assert _by_term(study, theirs.values)["poor"] is None and theirs.n_unresolved == 1
    assert _by_term(study, labels_for(study, "visual", "consensus@region=in").values)["poor"] == "agree"
    assert _by_term(study, labels_for(study, "visual", CONSENSUS).values)["poor"] is None


def test_a_partial_pool_item_is_provisional_only_when_asked(study: Study) -> None:
    parsed = source_parse(study, "consensus@region=na")
    provisional = labels_for(study, "visual", replace(parsed, provisional=True))
    assert _by_term(study, provisional.values)["tall"] == "agree"
    assert _by_term(study, dict.fromkeys(provisional.partial)) == {"tall": None}
    assert provisional.pending == frozenset()


def test_inside_a_pool_reading_every_judgement_and_the_consensus_are_the_pools(study: Study) -> None:
    parsed = source_parse(study, "consensus@region=na")
    assert parsed.pool is not None
    everyone = judgements_for(study, "visual")
    with findings_reading(pool=parsed):
        theirs = judgements_for(study, "visual")
        consensus = labels_for(study, "visual", CONSENSUS)
    assert len(everyone) == 5 * 4 + 5 * 3 + 2 and len(theirs) == 5 * 3 + 2
    assert {j.annotator_id for j in theirs} == set(parsed.pool.members)
    assert consensus.values == labels_for(study, "visual", parsed).values


def test_the_gate_of_a_pool_reads_the_pools_own_alpha(study: Study) -> None:
    thresholds = reliability_thresholds(study)
    pools = attribute_pools(study, "region")
    (mine,) = pool_reliability_entries(study, ["visual"], thresholds, pools[IN])
    (everyone,) = reliability_entries(study, ["visual"], thresholds)
    assert mine["n_raters"] == 5 and everyone["n_raters"] == 10
    assert mine["n_items"] == 4 and mine["verdict"] == "undefined"  # 4 items: below the gate's 10
    # one pool alone reads as the whole study would with only its people
    assert set(mine) == set(everyone)


def test_the_pools_fingerprint_changes_with_a_raters_answers(study: Study) -> None:
    before = pools_fingerprint(study, "region")
    assert before == pools_fingerprint(study, "region")
    # an imported rater keeps the answers it gave this study on its own row (no enrolment)
    assert not Enrollment.objects.filter(study=study).exists()
    rater = Annotator.objects.get(study=study, name="na1")
    rater.study_attributes = {"region": IN}
    rater.save(update_fields=["study_attributes"])
    assert pools_fingerprint(study, "region") != before
    assert len(attribute_pools(study, "region")[IN]) == 6
