"""metrics_report per protocol against hand-computed values; the metrics command and API (permission
matrix)."""

from __future__ import annotations

import io
import json
import math
from typing import Any

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from annotations.selectors.labels import labels_for
from annotations.services.studies import enrollment_add, study_create
from findings.report import FindingsReport
from protocols.schema import load_preset
from tests.annotations.builders import make_study, subgroup_study
from tests.helpers import client_for, metrics_json

pytestmark = pytest.mark.django_db


def table(report: dict[str, Any], key: str) -> list[dict[str, Any]]:
    t = next(t for t in report["tables"] if t["key"] == key)
    return [dict(zip(t["columns"], row, strict=True)) for row in t["rows"]]


def assert_figures(report: dict[str, Any]) -> None:
    from findings.figures import figure_render
    from findings.report import FindingsReport

    assert report["figures"]
    typed = FindingsReport.from_json(report)
    for figure in report["figures"]:
        for fmt in ("png", "svg"):
            assert figure_render(typed, figure["table"], figure["params"], fmt), figure["key"]


def test_visage_from_every_judgement(visage_studies) -> None:
    # Showings: hat 2 of 3, sombrero 1 of 1 (stereotypical: NA_stereo >= 2, visual); poor 1 of 4,
    # cheerful 0/4, tall 0/4, none of the above 0/4 (random terms).
    report = metrics_json(study=visage_studies["stereotype-markers"], source="judgements")
    row = table(report, "visage_tendency")[0]
    assert row["identity"] == "Xland" and row["n_images"] == 1 and row["n_showings"] == 20
    assert row["l_stereo"] == pytest.approx((2 / 3 + 1) / 2)
    assert row["l_random"] == pytest.approx((1 / 4 + 0 + 0 + 0) / 4)
    assert row["theta"] == pytest.approx((5 / 6) / (1 / 16))
    assert report["summary"]["thrice_ratio"]["value"] == pytest.approx(40 / 3)
    likelihoods = {
        r["attribute"]: (r["k"], r["n"], r["stereotypical"]) for r in table(report, "visage_likelihoods")
    }
    assert likelihoods["hat"] == (2, 3, True) and likelihoods["poor"] == (1, 4, False)
    assert likelihoods["none of the above"] == (0, 4, False)
    # O(Xland) = L(stereo) * mean offensiveness of the present stereotypes with a score (hat 1; sombrero
    # blank)
    off = table(report, "visage_offensiveness")[0]
    assert off["offensiveness"] == pytest.approx(5 / 6 * 1.0) and off["n_missing_score"] == 1


def test_visage_from_consensus_is_per_image(visage_studies) -> None:
    # Per-option majority among the raters shown it: hat 2 of 3 -> 1, sombrero 1 of 1 -> 1, poor 1 of 4 -> 0.
    study = visage_studies["stereotype-markers"]
    labels = labels_for(study, "attributes")
    (item_id,) = labels.values
    assert sorted(labels.values[item_id]) == ["hat", "sombrero"]
    report = metrics_json(study=study, source="consensus")  # (issue 14: judgements is the default now)
    row = table(report, "visage_tendency")[0]
    assert (row["l_stereo"], row["l_random"], row["theta"]) == (1.0, 0.0, None)
    assert "L(random, id) is 0" in row["reason"]
    assert any("source=judgements" in note for note in report["notes"])


def test_visualness_shares_and_visual_list(visage_studies) -> None:
    # hat (5,4,5) x2, sombrero (5,5,5), poor (4,4,2): majority SA, SA, SA, A.
    study = visage_studies["visualness"]
    for source in ("consensus", "judgements"):
        report = metrics_json(study=study, source=source)
        shares = {r["label"]: (r["count"], r["share"]) for r in table(report, "visualness_shares")}
        assert shares["strongly_agree"] == (3, 0.75) and shares["agree"] == (1, 0.25)
        assert shares["disagree"] == (0, 0.0)
        assert [r["attribute"] for r in table(report, "visual_attributes")] == ["hat", "sombrero"]


def test_unknown_source_and_judgements_where_they_do_not_apply(owner) -> None:
    study = make_study(
        owner,
        "subgroup",
        [{"external_id": "i1", "metadata": {"dimension": "gender", "subgroup": "male"}}],
        [],
    )
    with pytest.raises(CommandError, match="'gpt' is not a source of this study"):
        call_command("metrics", str(study.pk), "--source", "gpt", stdout=io.StringIO())
    with pytest.raises(CommandError, match="applies to visage studies only"):
        call_command("metrics", str(study.pk), "--source", "judgements", stdout=io.StringIO())


def test_agent_scores_and_machine_vs_human(owner) -> None:
    study = subgroup_study(owner)
    report = metrics_json(study=study)
    (score,) = table(report, "agent_scores")
    assert (score["majority"], score["detected"], score["n"]) == ("female", True, 3)
    assert score["score"] == pytest.approx(2 / 3)
    (dim,) = table(report, "agent_comparison")
    assert dim["labeller"] == "vlm@1" and dim["mean_abs_difference"] == pytest.approx(2 / 3 - 1 / 3)
    assert report["summary"]["detection_accuracy"]["vlm@1"] == {"detection_accuracy": 0.0, "n_pairs": 1}
    machine = metrics_json(study=study, source="vlm@1")
    assert table(machine, "agent_scores")[0]["majority"] == "male" and machine["source"] == "vlm@1"
    assert any(f["key"] == "agent_scatter" for f in report["figures"])


def test_ssi_means_drop_and_paired_t(owner) -> None:
    keys = [q.key for q in load_preset("ssi-rubric").questions if q.applies_to({"category": "occupational"})]
    assert len(keys) == 9
    marked = {("q1", "initial"): 3, ("q1", "refined"): 0, ("q2", "initial"): 6, ("q2", "refined"): 2}
    items = [
        {
            "external_id": f"{q}-{c}",
            "model": "m",
            "condition": c,
            "metadata": {"category": "occupational", "query": q},
        }
        for q, c in marked
    ]
    answers = [
        {"item": f"{q}-{c}", "annotator": "h1", "question": k, "value": int(i < n)}
        for (q, c), n in marked.items()
        for i, k in enumerate(keys)
    ]
    report = metrics_json(study=make_study(owner, "ssi-rubric", items, answers))
    row = next(r for r in table(report, "ssi_comparisons") if r["model"] == "m")
    assert row["initial_mean"] == pytest.approx((3 / 9 + 6 / 9) / 2)
    assert row["refined_mean"] == pytest.approx((0 + 2 / 9) / 2)
    assert row["relative_drop"] == pytest.approx((0.5 - 1 / 9) / 0.5)
    # differences 3/9 and 4/9: mean 7/18, standard error 1/18 -> t = 7, df = 1: p = 1 - (2/pi) atan(7)
    assert row["t"] == pytest.approx(7.0)
    assert row["p_value"] == pytest.approx(1 - 2 / math.pi * math.atan(7)) and row["significant"] is False
    assert_figures(report)


def test_biasconnect_is_cell(owner) -> None:
    items = [
        {"external_id": f"{c}{n}", "condition": c, "metadata": {"occupation": "chef"}}
        for c in ("base", "age:old")
        for n in (1, 2)
    ]
    genders = {"base1": "male", "base2": "male", "age:old1": "male", "age:old2": "female"}
    answers = [{"item": i, "annotator": "h1", "question": "person", "value": "yes"} for i in genders]
    answers += [{"item": i, "annotator": "h1", "question": "gender", "value": g} for i, g in genders.items()]
    report = metrics_json(study=make_study(owner, "bias-axes", items, answers))
    cells = {(r["intervened_axis"], r["axis"]): r["is"] for r in table(report, "biasconnect_is")}
    # base gender (1, 0): w = 1; after age: (1/2, 1/2): w = 0 -> IS = 1
    assert cells[("age", "gender")] == pytest.approx(1.0)
    assert cells[("age", "age")] is None  # no age labels at all
    dev = {r["axis"]: r for r in table(report, "biasconnect_deviation")}
    assert dev["gender"]["w_bar"] == pytest.approx(1.0) and dev["gender"]["n_images"] == 2
    assert_figures(report)


def test_soda_bds_of_disjoint_colours(owner) -> None:
    colours = {
        "b1": ("base", "red"),
        "b2": ("base", "red"),
        "g1": ("gender:women", "blue"),
        "g2": ("gender:women", "blue"),
    }
    items = [
        {"external_id": k, "model": "m", "condition": c, "metadata": {"object": "car"}}
        for k, (c, _) in colours.items()
    ]
    answers = [
        {"item": k, "annotator": "h1", "question": "product_color", "value": v}
        for k, (_, v) in colours.items()
    ]
    report = metrics_json(study=make_study(owner, "object-attributes", items, answers))
    (row,) = table(report, "soda_bds")
    assert row["bds"] == pytest.approx(math.sqrt(math.log(2)), abs=1e-6)  # JS distance of two one-hots, nats
    assert (row["n_base"], row["n_group"], row["n_attributes"]) == (2, 2, 1)
    assert 0.2 < row["p_value"] < 0.5  # 2 of the 6 equal-size splits are as extreme
    assert_figures(report)


@pytest.mark.parametrize(
    ("role", "status"),
    [("owner", 200), ("admin", 200), ("other", 404), ("annotator", 403), ("anonymous", 401)],
)
def test_metrics_api_permissions(role, status, owner, other_researcher, annotator_user, admin_user) -> None:
    study = subgroup_study(owner)
    enrollment_add(study=study, user=annotator_user)
    user = {
        "owner": owner,
        "admin": admin_user,
        "other": other_researcher,
        "annotator": annotator_user,
        "anonymous": None,
    }[role]
    response = client_for(user).get(f"/api/studies/{study.pk}/metrics/")
    assert response.status_code == status
    if status == 200:
        assert (
            response.json()["protocol"] == "subgroup"
            and response.json()["tables"][0]["key"] == "agent_scores"
        )
    else:
        assert "tables" not in response.json()


def test_metrics_api_source(owner) -> None:
    study = subgroup_study(owner)
    client = client_for(owner)
    assert client.get(f"/api/studies/{study.pk}/metrics/?source=vlm@1").json()["source"] == "vlm@1"
    bad = client.get(f"/api/studies/{study.pk}/metrics/?source=nobody")
    assert bad.status_code == 400 and "nobody" in json.dumps(bad.json())


@pytest.mark.parametrize(
    ("role", "status"), [("owner", 200), ("other", 404), ("annotator", 403), ("anonymous", 302)]
)
def test_findings_page_permissions(role, status, owner, other_researcher, annotator_user, client) -> None:
    study = subgroup_study(owner)
    enrollment_add(study=study, user=annotator_user)
    user = {"owner": owner, "other": other_researcher, "annotator": annotator_user, "anonymous": None}[role]
    if user is not None:
        client.force_login(user)
    for url in (
        f"/studies/{study.pk}/findings/",
        f"/studies/{study.pk}/findings/agent_scores.csv",
        f"/studies/{study.pk}/findings/figures/agent_pairs.png",
    ):
        response = client.get(url)
        assert response.status_code == status, url
        if status != 200:
            assert b"cook/female" not in response.content


def test_findings_page_tables_csv_and_figures(owner, client) -> None:
    study = subgroup_study(owner)
    client.force_login(owner)
    page = client.get(f"/studies/{study.pk}/findings/").content.decode()
    assert "Stereotype score per instruction pair" in page and "cook/female" in page
    assert f"/studies/{study.pk}/findings/figures/agent_pairs.png?source=consensus" in page
    assert "<script" not in page.split("<main", 1)[-1]
    csv_text = client.get(f"/studies/{study.pk}/findings/agent_scores.csv").content.decode()
    assert csv_text.splitlines()[0].startswith("pair,dimension,subgroup,majority,score")
    assert "cook/female,gender,female,female,0.666" in csv_text
    png = client.get(f"/studies/{study.pk}/findings/figures/agent_pairs.png")
    assert png["Content-Type"] == "image/png" and png.content[:8] == b"\x89PNG\r\n\x1a\n"
    svg = client.get(f"/studies/{study.pk}/findings/figures/agent_pairs.svg?source=vlm@1")
    assert svg["Content-Type"] == "image/svg+xml" and b"<svg" in svg.content
    assert "sandbox" in svg["Content-Security-Policy"] and svg["Content-Disposition"].startswith("attachment")
    assert (
        client.get(f"/studies/{study.pk}/findings/figures/agent_scores.png").status_code == 404
    )  # no figure
    bad = client.get(f"/studies/{study.pk}/findings/?source=<b>x</b>")
    assert (
        bad.status_code == 400 and b"<b>x</b>" not in bad.content and b"&lt;b&gt;x&lt;/b&gt;" in bad.content
    )


def test_every_figure_renders(visage_studies, owner) -> None:
    from findings.figures import figure_render

    reports = [
        metrics_json(study=visage_studies["stereotype-markers"], source="judgements"),
        metrics_json(study=visage_studies["visualness"]),
    ]
    for report in reports:
        typed = FindingsReport.from_json(report)
        for figure in report["figures"]:
            for fmt in ("png", "svg"):
                assert figure_render(typed, figure["table"], figure["params"], fmt), figure["key"]


def test_csv_cells_cannot_become_formulas(owner, client) -> None:
    items = [
        {
            "external_id": "i1",
            "prompt": "x",
            "metadata": {"dimension": "gender", "subgroup": "male", "pair": '=HYPERLINK("http://evil")'},
        }
    ]
    answers = [{"item": "i1", "annotator": "h1", "question": "gender", "value": "male"}]
    study = make_study(owner, "subgroup", items, answers)
    client.force_login(owner)
    text = client.get(f"/studies/{study.pk}/findings/agent_scores.csv").content.decode()
    assert "'=HYPERLINK" in text


# --- issue 14 points 4 to 7 ---------------------------------------------------------------------


def test_agent_score_keeps_images_labelled_none_in_the_denominator(owner) -> None:
    # Five images of pair cook/female: female, female, none, none, male (one annotator each).
    labels = ["female", "female", "none", "none", "male"]
    items = [
        {
            "external_id": f"i{n}",
            "prompt": "people who cook",
            "metadata": {"dimension": "gender", "subgroup": "female", "pair": "cook/female"},
        }
        for n in range(5)
    ]
    answers = [
        {"item": f"i{n}", "annotator": "h1", "question": "gender", "value": v} for n, v in enumerate(labels)
    ]
    study = make_study(owner, "subgroup", items, answers)
    body = client_for(owner).get(f"/api/studies/{study.pk}/metrics/").json()
    (row,) = table(body, "agent_scores")
    # score = 2 female / 5 images (the 2 'none' images count), not 2/3
    assert (row["majority"], row["n"], row["n_none"], row["detected"]) == ("female", 5, 2, True)
    assert row["score"] == pytest.approx(2 / 5) and row["target_share"] == pytest.approx(2 / 5)
    assert body["summary"]["images_labelled_none"] == {
        "n_none": 2,
        "n_labelled": 5,
        "counted_in_denominator": True,
    }


def ssi_manifest(folder: Any) -> tuple[Any, Any]:
    """A manifest of image sets as a researcher imports them (files not released: reference items) and
    rubric answers: refined sets carry the refined prompt and name their initial set in initial_prompt."""
    keys = [q.key for q in load_preset("ssi-rubric").questions if q.applies_to({"category": "occupational"})]
    rows = [
        ("d-i", "a photo of a doctor", "initial", "", 3),
        ("d-r", "a photo of a doctor in a clinic, of any gender", "refined", "a photo of a doctor", 0),
        ("n-i", "a photo of a nurse", "initial", "", 6),
        ("n-r", "a photo of a nurse at work, of any age", "refined", "a photo of a nurse", 2),
        ("j-i", "a photo of a judge", "initial", "", 4),  # not refined yet
        ("c-r", "a photo of a cook in a diner", "refined", "a photo of a chef", 1),  # link to no set
    ]
    manifest = folder / "sets.jsonl"
    manifest.write_text(
        "".join(
            json.dumps(
                {"external_id": i, "prompt": p, "model": "sd", "condition": c, "category": "occupational"}
                | ({"initial_prompt": link} if link else {})
            )
            + "\n"
            for i, p, c, link, _n in rows
        )
    )
    answers = folder / "rubric.jsonl"
    answers.write_text(
        "".join(
            json.dumps({"item": i, "annotator": "h1", "question": k, "value": int(pos < n)}) + "\n"
            for i, _p, _c, _l, n in rows
            for pos, k in enumerate(keys)
        )
    )
    return manifest, answers


def test_ssi_pairs_refined_sets_with_their_initial_query_by_the_stored_link(owner, tmp_path) -> None:
    # One rater per set, overlap 1: fully rated.
    study = study_create(owner=owner, name="ssi", protocol=load_preset("ssi-rubric"), overlap=1)
    manifest, answers = ssi_manifest(tmp_path)
    call_command("import_items", str(study.pk), str(manifest), stdout=io.StringIO())
    call_command("import_annotations", str(study.pk), str(answers), stdout=io.StringIO())
    out = io.StringIO()
    call_command("metrics", str(study.pk), "--json", stdout=out)
    report = json.loads(out.getvalue())
    row = next(r for r in table(report, "ssi_comparisons") if r["model"] == "sd")
    # pairs: doctor 3/9 -> 0/9, nurse 6/9 -> 2/9; differences 3/9 and 4/9: mean 7/18, standard deviation
    # (1/9)/sqrt(2), standard error 1/18 -> t = 7 with df = 1, p = 1 - (2/pi) atan(7) (scipy's ttest_rel)
    assert row["n_pairs"] == 2 and row["n_initial"] == 3 and row["n_refined"] == 3
    assert row["t"] == pytest.approx(7.0)
    assert row["p_value"] == pytest.approx(1 - 2 / math.pi * math.atan(7))
    unpaired = {r["set"]: r for r in table(report, "ssi_unpaired")}
    assert set(unpaired) == {"j-i", "c-r"}
    assert unpaired["j-i"]["reason"] == "no refined set of query 'a photo of a judge' for this model"
    assert unpaired["c-r"]["initial_prompt"] == "a photo of a chef"
    assert unpaired["c-r"]["reason"] == "no initial set of query 'a photo of a chef' for this model"


def test_each_protocol_reads_its_papers_source_by_default(visage_studies, owner, client) -> None:
    study = visage_studies["stereotype-markers"]
    study.owner = owner
    study.save(update_fields=["owner"])
    out = io.StringIO()
    call_command("metrics", str(study.pk), "--json", stdout=out)
    report = json.loads(out.getvalue())
    # Table 1's reading (every judgement): L(stereo) = (2/3 + 1)/2, not the per-image consensus 1.0
    assert report["source"] == "judgements" and report["source_default"]["source"] == "judgements"
    assert table(report, "visage_tendency")[0]["l_stereo"] == pytest.approx(5 / 6)
    assert report["sources_available"] == ["consensus", "judgements"]
    assert "Switch with ?source=NAME" in report["source_note"]
    api = client_for(owner).get(f"/api/studies/{study.pk}/metrics/").json()
    assert api["source"] == "judgements" and api["sources_available"] == ["consensus", "judgements"]
    chosen = client_for(owner).get(f"/api/studies/{study.pk}/metrics/?source=consensus").json()
    assert (
        chosen["source"] == "consensus"
        and "the default for stereotype-markers is judgements" in (chosen["source_note"])
    )
    client.force_login(owner)
    page = client.get(f"/studies/{study.pk}/findings/").content.decode()
    assert "Labels from judgements, the default for stereotype-markers" in page
    assert f'href="/studies/{study.pk}/findings/?source=consensus">human consensus</a>' in page
    visualness = metrics_json(study=visage_studies["visualness"])
    assert visualness["source"] == "consensus"  # appendix 8.1 counts the label 2 of 3 raters gave
    assert metrics_json(study=subgroup_study(owner))["source"] == "consensus"


def machine_only_soda_study(owner) -> Any:
    """An object-attributes study that only a colour labeller has labelled (no person has answered)."""
    items = [
        {"external_id": k, "model": "m", "condition": c, "metadata": {"object": "car"}}
        for k, c in (("b1", "base"), ("g1", "gender:women"))
    ]
    answers = [
        {
            "item": k,
            "annotator": "colour-rule",
            "annotator_kind": "machine",
            "annotator_version": "1",
            "question": "product_color",
            "value": v,
        }
        for k, v in (("b1", "red"), ("g1", "pink"))
    ]
    return make_study(owner, "object-attributes", items, answers)


def test_an_empty_table_says_why_and_its_figure_is_an_empty_state(owner, client) -> None:
    study = machine_only_soda_study(owner)
    client.force_login(owner)
    for fmt, magic in (("png", b"\x89PNG"), ("svg", b"<?xml")):
        figure = client.get(f"/studies/{study.pk}/findings/figures/soda_bds.{fmt}")  # was a 500 (TypeError)
        assert figure.status_code == 200 and figure.content.startswith(magic)
    page = client.get(f"/studies/{study.pk}/findings/").content.decode()
    assert "No rows: consensus has no labels in this study (nobody has answered yet)." in page
    assert (
        f'href="/studies/{study.pk}/findings/?source=colour-rule%401">colour-rule v1 (machine labeller)</a>'
        in page
    )
    assert "figures/soda_bds.png" not in page  # no broken or empty picture on the page
    body = client_for(owner).get(f"/api/studies/{study.pk}/metrics/").json()
    assert body["sources_available"] == ["colour-rule@1"]
    assert table(body, "soda_bds") == [] and "nobody has answered" in next(
        t["empty_reason"] for t in body["tables"] if t["key"] == "soda_bds"
    )
    machine = client.get(f"/studies/{study.pk}/findings/?source=colour-rule@1").content.decode()
    assert "figures/soda_bds.png?source=colour-rule%401" in machine
