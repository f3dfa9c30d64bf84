"""Comparisons across studies (services.comparison): aligned values, n and differences against hand-computed
numbers; the page, CSV, figures, API and command; access (another researcher's study is refused)."""

from __future__ import annotations

import csv
import io
import json
from typing import Any

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from annotations.models import Study, User
from annotations.services.studies import enrollment_add, study_share
from common.errors import ValidationFailed
from findings.comparison import (
    ComparisonSide,
    comparison_long_rows,
    comparison_query_parse,
    comparison_report,
)
from tests.annotations.builders import A_MARKED, B_MARKED, OCCUPATIONAL, make_study, ssi_study, subgroup_study
from tests.helpers import client_for

pytestmark = pytest.mark.django_db


@pytest.fixture
def two_models(owner: User) -> tuple[Study, Study]:
    return (
        ssi_study(owner, "Model <b>A</b> & co", "m-a", A_MARKED),
        ssi_study(owner, "<script>alert('B')</script>", "m-b", B_MARKED),
    )


def rows_of(comparison: dict[str, Any], key: str) -> list[dict[str, Any]]:
    table = next(t for t in comparison["tables"] if t["key"] == key)
    return [dict(zip(table["columns"], row, strict=True)) for row in table["rows"]]


def compare(*sides: ComparisonSide) -> dict[str, Any]:
    return comparison_report(sides=list(sides), cached=False)


def test_model_a_vs_model_b_aligned_with_n_and_differences(two_models) -> None:
    a, b = two_models
    comparison = compare(ComparisonSide(study=a), ComparisonSide(study=b))
    assert [s["label"] for s in comparison["sides"]] == ["A", "B"]
    cells = {r["condition"]: r for r in rows_of(comparison, "ssi_cells")}
    # One model per study: 'model' leaves the key and the pooled 'all' rows (same numbers) are dropped.
    assert (
        set(cells) == {"initial", "refined"}
        and "category" in cells["initial"]
        and "model" not in cells["initial"]
    )
    ini, ref = cells["initial"], cells["refined"]
    assert ini["mean_ssi [A]"] == pytest.approx(1 / 2) and ini["mean_ssi [B]"] == pytest.approx(2 / 3)
    assert ini["n [A]"] == 2 and ini["n [B]"] == 2
    assert ini["mean_ssi [B-A]"] == pytest.approx(2 / 3 - 1 / 2)
    assert ref["mean_ssi [A]"] == pytest.approx(1 / 9) and ref["mean_ssi [B]"] == pytest.approx(1 / 3)
    assert ref["mean_ssi [B-A]"] == pytest.approx(1 / 3 - 1 / 9)
    table = next(t for t in comparison["tables"] if t["key"] == "ssi_cells")
    assert any("m-a" in n and "m-b" in n for n in table["notes"])
    (drop,) = rows_of(comparison, "ssi_comparisons")
    assert drop["relative_drop [A]"] == pytest.approx(7 / 9) and drop["relative_drop [B]"] == pytest.approx(
        1 / 2
    )
    assert drop["relative_drop [B-A]"] == pytest.approx(1 / 2 - 7 / 9) and drop["n [A]"] == 2
    assert (
        "p_value [B-A]" not in drop and "significant [B-A]" not in drop
    )  # no difference of p-values or booleans
    # Rubric item 7 (index 6) marked initially: A neither query (3 and 6 marked), B q1 only (9 and 3 marked).
    prevalence = {(r["item"], r["condition"]): r for r in rows_of(comparison, "ssi_prevalence")}
    seventh = prevalence[(OCCUPATIONAL[6], "initial")]
    assert (seventh["share [A]"], seventh["share [B]"], seventh["share [B-A]"]) == (0.0, 0.5, 0.5)
    assert comparison["only_in"] == {} and comparison["not_comparable"] == []


def test_initial_vs_refined_inside_one_study(two_models) -> None:
    a, _b = two_models
    comparison = compare(
        ComparisonSide(study=a, condition="initial"), ComparisonSide(study=a, condition="refined")
    )
    cells = {r["model"]: r for r in rows_of(comparison, "ssi_cells")}
    assert set(cells) == {"m-a", "all"} and "condition" not in cells["m-a"]
    assert cells["m-a"]["mean_ssi [A]"] == pytest.approx(1 / 2) and cells["m-a"][
        "mean_ssi [B]"
    ] == pytest.approx(1 / 9)
    assert cells["m-a"]["mean_ssi [B-A]"] == pytest.approx(1 / 9 - 1 / 2)
    # ssi_comparisons is already initial vs refined: it has no condition column to narrow.
    assert [t["key"] for t in comparison["not_comparable"]] == ["ssi_comparisons"]
    assert any("narrowed" in n for n in comparison["notes"])


def test_same_study_two_sources(owner) -> None:
    # Human labels female, female, male; the machine's female, male, male (pair cook/female).
    study = subgroup_study(owner)
    comparison = compare(ComparisonSide(study=study), ComparisonSide(study=study, source="vlm@1"))
    (row,) = rows_of(comparison, "agent_scores")
    assert (row["majority [A]"], row["majority [B]"]) == ("female", "male")
    assert row["target_share [A]"] == pytest.approx(2 / 3) and row["target_share [B]"] == pytest.approx(1 / 3)
    assert row["target_share [B-A]"] == pytest.approx(-1 / 3) and row["score [B-A]"] == pytest.approx(0.0)
    assert (row["n [A]"], row["n [B]"]) == (3, 3) and "majority [B-A]" not in row
    # The summary's detection accuracy lines up too (the labeller vs humans is the same on both sides).
    summary = {r["metric"]: r for r in rows_of(comparison, "summary")}
    assert summary["detection_accuracy.vlm@1.detection_accuracy"]["value [B-A]"] == 0.0


def test_model_a_vs_model_b_inside_one_study(owner) -> None:
    # m1 base: red, red -> VAC 1 (one value); m2 base: red, blue -> 1 - ln2/ln2 = 0.
    colours = {"a1": ("m1", "red"), "a2": ("m1", "red"), "b1": ("m2", "red"), "b2": ("m2", "blue")}
    items = [
        {"external_id": k, "model": m, "condition": "base", "metadata": {"object": "car"}}
        for k, (m, _c) in colours.items()
    ]
    answers = [
        {"item": k, "annotator": "h1", "question": "product_color", "value": c}
        for k, (_m, c) in colours.items()
    ]
    study = make_study(owner, "object-attributes", items, answers)
    comparison = compare(ComparisonSide(study=study, model="m1"), ComparisonSide(study=study, model="m2"))
    (row,) = rows_of(comparison, "soda_vac")
    assert (row["object"], row["condition"]) == ("car", "base") and "model" not in row
    assert (row["vac [A]"], row["vac [B]"], row["vac [B-A]"]) == (
        pytest.approx(1.0),
        pytest.approx(0.0),
        pytest.approx(-1.0),
    )
    assert (row["n [A]"], row["n [B]"]) == (2, 2)
    assert "soda_cds" in [t["key"] for t in comparison["not_comparable"]]  # pooled over models


def test_groups_on_one_side_only_and_three_sides(owner, two_models) -> None:
    a, b = two_models
    c = ssi_study(owner, "only initial", "m-c", {("q1", "initial"): 9})
    comparison = compare(ComparisonSide(study=a), ComparisonSide(study=b), ComparisonSide(study=c))
    cells = {r["condition"]: r for r in rows_of(comparison, "ssi_cells")}
    assert cells["refined"]["mean_ssi [C]"] is None and cells["refined"]["n [C]"] is None
    assert cells["refined"]["mean_ssi [C-A]"] is None
    assert cells["initial"]["mean_ssi [C-A]"] == pytest.approx(1 - 1 / 2)


def test_different_protocols_only_in(owner, two_models) -> None:
    a, _b = two_models
    comparison = compare(ComparisonSide(study=a), ComparisonSide(study=subgroup_study(owner)))
    assert comparison["tables"] == []
    assert [t["key"] for t in comparison["only_in"]["A"]] == [
        "ssi_cells",
        "ssi_comparisons",
        "ssi_unpaired",  # (issue 14: the sets the paired t-test cannot use are listed)
        "ssi_prevalence",
    ]
    assert "agent_scores" in [t["key"] for t in comparison["only_in"]["B"]]
    assert "different protocols" in comparison["notes"][0]


def test_refusals(two_models) -> None:
    a, b = two_models
    with pytest.raises(ValidationFailed, match="at least two"):
        compare(ComparisonSide(study=a))
    with pytest.raises(ValidationFailed, match="side B repeats side A"):
        compare(ComparisonSide(study=a), ComparisonSide(study=a))
    with pytest.raises(ValidationFailed, match="condition to every study or to none"):
        compare(ComparisonSide(study=a, condition="initial"), ComparisonSide(study=b))
    with pytest.raises(ValidationFailed, match=r"side B \(.*\): 'gpt' is not a source"):
        compare(ComparisonSide(study=a), ComparisonSide(study=b, source="gpt"))
    with pytest.raises(ValidationFailed, match="one source for all studies or one per study"):
        comparison_query_parse(studies=["1", "2"], sources=["a", "b", "c"])
    with pytest.raises(ValidationFailed, match="study must be a study id"):
        comparison_query_parse(studies=["1", "x"])
    sides = comparison_query_parse(studies=["1", "", "2"], sources=["gpt", "x", ""], conditions=["initial"])
    assert [(s.study_id, s.source, s.condition) for s in sides] == [
        (1, "gpt", "initial"),
        (2, "consensus", "initial"),
    ]


def test_long_rows(two_models) -> None:
    a, b = two_models
    columns, rows = comparison_long_rows(compare(ComparisonSide(study=a), ComparisonSide(study=b)))
    long = [dict(zip(columns, r, strict=True)) for r in rows]
    mine = [
        r
        for r in long
        if r["table"] == "ssi_cells" and r["group"] == "category=occupational; condition=initial"
    ]
    assert [(r["side"], r["study"], r["n"]) for r in mine] == [("A", a.pk, 2), ("B", b.pk, 2)]
    assert mine[0]["difference"] is None and mine[1]["difference"] == pytest.approx(1 / 6)


# --- page, CSV, figures, API, command ------------------------------------------------------------------


def url(*studies: Study, **extra: str) -> str:
    return "?" + "&".join([f"study={s.pk}" for s in studies] + [f"{k}={v}" for k, v in extra.items()])


def test_page_renders_aligned_tables_with_names_escaped(two_models, owner, client) -> None:
    a, b = two_models
    client.force_login(owner)
    page = client.get(f"/compare/{url(a, b)}").content.decode()
    assert "Model &lt;b&gt;A&lt;/b&gt; &amp; co" in page and "Model <b>A</b>" not in page
    assert "&lt;script&gt;alert(&#x27;B&#x27;)&lt;/script&gt;" in page and "<script>alert" not in page
    assert "<script" not in page.split("<main", 1)[-1]
    assert "Mean SSI by category, model and condition" in page
    assert "mean_ssi [B-A]" not in page  # the page shows grouped headers: A | B | B − A
    assert "B − A" in page and "0.1667" in page and "0.6667" in page
    assert f"/compare/csv/?study={a.pk}&amp;source=consensus" in page
    assert f"/compare/figures/ssi_cells.png?study={a.pk}" in page
    detail = client.get(f"/studies/{a.pk}/").content.decode()
    assert f"/compare/?study={a.pk}" in detail
    assert (
        f"/compare/?study={a.pk}&amp;source=consensus"
        in client.get(f"/studies/{a.pk}/findings/").content.decode()
    )


def test_page_form_and_messages(two_models, owner, client) -> None:
    a, b = two_models
    client.force_login(owner)
    landing = client.get("/compare/")
    assert landing.status_code == 200 and f'<option value="{a.pk}">' in landing.content.decode()
    one = client.get(f"/compare/{url(a)}")
    assert one.status_code == 200 and "Pick at least one more study" in one.content.decode()
    assert f'<option value="{a.pk}" selected>' in one.content.decode()
    bad = client.get(f"/compare/?study={a.pk}&study=%3Cb%3E")
    assert (
        bad.status_code == 400 and "&lt;b&gt;" in bad.content.decode() and "<b>'" not in bad.content.decode()
    )
    mixed = client.get(f"/compare/{url(a, b)}&condition=initial&condition=")
    assert mixed.status_code == 400 and "to every study or to none" in mixed.content.decode()


def test_csv_of_one_table_and_of_everything(two_models, owner, client) -> None:
    a, b = two_models
    client.force_login(owner)
    response = client.get(f"/compare/csv/{url(a, b, table='ssi_cells')}")
    assert response["Content-Type"].startswith("text/csv")
    assert f'filename="compare-{a.pk}-{b.pk}-ssi_cells.csv"' in response["Content-Disposition"]
    reader = list(csv.reader(io.StringIO(response.content.decode())))
    assert reader[0] == [
        "category",
        "condition",
        "mean_ssi [A]",
        "n [A]",
        "mean_ssi [B]",
        "n [B]",
        "mean_ssi [B-A]",
    ]
    initial = next(r for r in reader[1:] if r[1] == "initial")
    assert initial[:2] == ["occupational", "initial"] and (initial[3], initial[5]) == ("2", "2")
    assert [float(v) for v in (initial[2], initial[4], initial[6])] == pytest.approx([1 / 2, 2 / 3, 1 / 6])
    everything = list(csv.DictReader(io.StringIO(client.get(f"/compare/csv/{url(a, b)}").content.decode())))
    mine = [r for r in everything if r["table"] == "ssi_cells" and r["group"].endswith("condition=refined")]
    assert [(r["side"], r["study_name"], r["n"]) for r in mine] == [
        ("A", "Model <b>A</b> & co", "2"),
        ("B", "<script>alert('B')</script>", "2"),
    ]
    assert float(mine[1]["difference"]) == pytest.approx(1 / 3 - 1 / 9)
    assert client.get(f"/compare/csv/{url(a, b, table='nope')}").status_code == 404
    assert client.get(f"/compare/csv/{url(a)}").status_code == 400


def test_figures(two_models, owner, client) -> None:
    a, b = two_models
    b.name = "cost $x^$ <b>"  # '$' would start matplotlib mathtext
    b.save(update_fields=["name"])
    client.force_login(owner)
    png = client.get(f"/compare/figures/ssi_cells.png{url(a, b)}")
    assert png.status_code == 200 and png.content[:8] == b"\x89PNG\r\n\x1a\n"
    svg = client.get(f"/compare/figures/ssi_comparisons.svg{url(a, b, value='relative_drop')}")
    assert svg["Content-Type"] == "image/svg+xml" and b"<svg" in svg.content and b"<b>" not in svg.content
    assert "sandbox" in svg["Content-Security-Policy"]
    assert client.get(f"/compare/figures/nope.png{url(a, b)}").status_code == 404


@pytest.mark.parametrize(
    ("role", "page", "api"),
    [
        ("owner", 200, 200),
        ("admin", 200, 200),
        ("other", 404, 404),
        ("shared", 200, 200),
        ("annotator", 403, 403),
        ("anonymous", 302, 401),
    ],
)
def test_permissions(
    role, page, api, two_models, owner, other_researcher, annotator_user, admin_user, client
) -> None:
    a, b = two_models
    enrollment_add(study=a, user=annotator_user)
    enrollment_add(study=b, user=annotator_user)
    if role == "shared":
        study_share(study=a, username=other_researcher.username)
        study_share(study=b, username=other_researcher.username)
    user = {
        "owner": owner,
        "admin": admin_user,
        "other": other_researcher,
        "shared": other_researcher,
        "annotator": annotator_user,
        "anonymous": None,
    }[role]
    if user is not None:
        client.force_login(user)
    for path in (
        f"/compare/{url(a, b)}",
        f"/compare/csv/{url(a, b)}",
        f"/compare/figures/ssi_cells.png{url(a, b)}",
    ):
        response = client.get(path)
        assert response.status_code == page, path
        if page != 200:
            assert b"0.6666" not in response.content and b"alert(" not in response.content
    response = client_for(user).get(f"/api/compare/{url(a, b)}")
    assert response.status_code == api
    if api == 200:
        assert rows_of(response.json(), "ssi_cells")[0]["n [B]"] == 2


def test_another_researchers_study_is_refused(two_models, owner, other_researcher, client) -> None:
    a, _b = two_models
    theirs = ssi_study(other_researcher, "their secret study", "m-x", A_MARKED)
    client.force_login(owner)
    response = client.get(f"/compare/{url(a, theirs)}")
    assert (
        response.status_code == 404
        and f"study {theirs.pk} does not exist or is not yours" in response.content.decode()
    )
    assert "their secret study" not in response.content.decode()
    assert client.get(f"/compare/{url(theirs)}").status_code == 404
    assert client_for(owner).get(f"/api/compare/{url(a, theirs)}").status_code == 404
    assert client.get(f"/compare/?study={a.pk}&study=999999").status_code == 404


def test_api_messages(two_models, owner) -> None:
    a, b = two_models
    api = client_for(owner)
    one = api.get(f"/api/compare/{url(a)}")
    assert one.status_code == 400 and "at least two" in one.json()["detail"]
    body = api.get(f"/api/compare/{url(a, b, source='consensus')}").json()
    assert [s["name"] for s in body["sides"]] == [a.name, b.name] and body["reference"] == "A"


def test_command(two_models) -> None:
    a, b = two_models
    out = io.StringIO()
    call_command("compare_studies", str(a.pk), str(b.pk), "--json", stdout=out)
    comparison = json.loads(out.getvalue())
    initial = next(r for r in rows_of(comparison, "ssi_cells") if r["condition"] == "initial")
    assert initial["mean_ssi [B-A]"] == pytest.approx(1 / 6)
    out = io.StringIO()
    call_command(
        "compare_studies",
        str(a.pk),
        str(a.pk),
        "--condition",
        "initial",
        "--condition",
        "refined",
        stdout=out,
    )
    text = out.getvalue()
    assert "ssi_cells" in text and "condition initial" in text and "not narrowed: ssi_comparisons" in text
    with pytest.raises(CommandError, match="at least two"):
        call_command("compare_studies", str(a.pk), stdout=io.StringIO())


def test_visage_every_judgement_vs_consensus(visage_studies) -> None:
    # Same showings as test_metrics_report: judgements L(stereo) = (2/3 + 1)/2, L(random) = 1/16 over 20
    # showings; per-image consensus L(stereo) = 1, L(random) = 0 (theta undefined) over the 6 decided options.
    study = visage_studies["stereotype-markers"]
    comparison = compare(ComparisonSide(study=study, source="judgements"), ComparisonSide(study=study))
    (row,) = rows_of(comparison, "visage_tendency")
    assert row["identity"] == "Xland" and (row["n [A]"], row["n [B]"]) == (20, 6)
    assert row["l_stereo [B-A]"] == pytest.approx(1 - 5 / 6) and row["l_random [B-A]"] == pytest.approx(
        -1 / 16
    )
    assert (
        row["theta [A]"] == pytest.approx(40 / 3) and row["theta [B]"] is None and row["theta [B-A]"] is None
    )
    likelihood = {r["attribute"]: r for r in rows_of(comparison, "visage_likelihoods")}
    assert (likelihood["hat"]["likelihood [A]"], likelihood["hat"]["n [A]"]) == (pytest.approx(2 / 3), 3)
    assert (likelihood["hat"]["likelihood [B]"], likelihood["hat"]["n [B]"]) == (1.0, 1)
    summary = {r["metric"]: r for r in rows_of(comparison, "summary")}
    assert summary["thrice_ratio.value"]["value [A]"] == pytest.approx(40 / 3)
    # The visual-ness study shares no table with the markers study: listed, not aligned.
    other = compare(ComparisonSide(study=study), ComparisonSide(study=visage_studies["visualness"]))
    assert "visual_attributes" in [t["key"] for t in other["only_in"]["B"]]
    assert "summary" in [t["key"] for t in other["tables"]]


def visualness_study(owner: User, ratings: dict[str, tuple[str, str, str]]) -> Study:
    items = [{"external_id": term, "text": term} for term in ratings]
    answers = [
        {"item": term, "annotator": f"r{i}", "question": "visual", "value": v}
        for term, values in ratings.items()
        for i, v in enumerate(values)
    ]
    return make_study(owner, "visualness", items, answers)


def test_visualness_shares_and_listed_attributes(owner) -> None:
    # X: hat SA (2 of 3), poor A (2 of 3): shares SA 1/2, A 1/2; visual (every rating agree): hat only.
    # Y: hat SA, poor A, tall D: shares 1/3 each; visual: hat and poor.
    x = visualness_study(
        owner, {"hat": ("strongly_agree", "strongly_agree", "agree"), "poor": ("agree", "disagree", "agree")}
    )
    y = visualness_study(
        owner,
        {
            "hat": ("strongly_agree",) * 3,
            "poor": ("agree",) * 3,
            "tall": ("disagree", "disagree", "strongly_disagree"),
        },
    )
    comparison = compare(ComparisonSide(study=x), ComparisonSide(study=y))
    shares = {r["label"]: r for r in rows_of(comparison, "visualness_shares")}
    sa = shares["strongly_agree"]
    assert (sa["share [A]"], sa["n [A]"], sa["n [B]"]) == (0.5, 2, 3)
    assert sa["share [B-A]"] == pytest.approx(1 / 3 - 1 / 2) and sa["count [B-A]"] == 0
    assert shares["disagree"]["share [B-A]"] == pytest.approx(1 / 3)
    listed = {
        r["attribute"]: (r["listed [A]"], r["listed [B]"]) for r in rows_of(comparison, "visual_attributes")
    }
    assert listed == {"hat": (True, True), "poor": (False, True)}
    summary = {r["metric"]: r for r in rows_of(comparison, "summary")}
    assert summary["visual_attributes"]["value [B-A]"] == 1


def bias_axes_study(owner: User, metadata: dict[str, str], genders: dict[str, str]) -> Study:
    """item id (base1, base2, age:old1, ...) -> gender label; the condition is the id without its digit."""
    items = [{"external_id": i, "condition": i[:-1], "metadata": metadata} for i in genders]
    answers = [{"item": i, "annotator": "h1", "question": "person", "value": "yes"} for i in genders]
    answers += [{"item": i, "annotator": "h1", "question": "gender", "value": g} for i, g in genders.items()]
    return make_study(owner, "bias-axes", items, answers)


def test_original_vs_mitigated_narrowed_to_one_group_each(owner) -> None:
    # Original (occupation chef): base gender (male, male) -> w = 1; after age (male, female) -> 0: IS = 1.
    # Mitigated set (metadata 'subject' only, so the report's group is 'all'): base (male, female) -> w = 0;
    # after age (male, male) -> 1: IS = -1.
    original = bias_axes_study(
        owner,
        {"occupation": "chef"},
        {"base1": "male", "base2": "male", "age:old1": "male", "age:old2": "female"},
    )
    mitigated = bias_axes_study(
        owner,
        {"subject": "chef"},
        {"base1": "male", "base2": "female", "age:old1": "male", "age:old2": "male"},
    )
    plain = compare(ComparisonSide(study=original), ComparisonSide(study=mitigated))
    groups = {(r["group"], r["intervened_axis"], r["axis"]): r for r in rows_of(plain, "biasconnect_is")}
    assert groups[("chef", "age", "gender")]["is [B]"] is None  # 'chef' vs 'all': no common group
    comparison = compare(
        ComparisonSide(study=original, where=(("group", "chef"),)),
        ComparisonSide(study=mitigated, where=(("group", "all"),)),
    )
    cells = {(r["intervened_axis"], r["axis"]): r for r in rows_of(comparison, "biasconnect_is")}
    cell = cells[("age", "gender")]
    assert "group" not in cell and (cell["is [A]"], cell["is [B]"]) == (
        pytest.approx(1.0),
        pytest.approx(-1.0),
    )
    assert cell["is [B-A]"] == pytest.approx(-2.0)
    deviation = {r["axis"]: r for r in rows_of(comparison, "biasconnect_deviation")}["gender"]
    assert (deviation["w_bar [A]"], deviation["w_bar [B]"], deviation["n [A]"], deviation["n [B]"]) == (
        pytest.approx(1.0),
        pytest.approx(0.0),
        2,
        2,
    )
    # Distribution shares: n is the labelled base images of the axis (2), not the option's count.
    male = {
        (r["condition"], r["axis"], r["option"]): r for r in rows_of(comparison, "biasconnect_distributions")
    }[("base", "gender", "male")]
    assert (male["share [A]"], male["share [B]"], male["n [A]"], male["count [B]"]) == (1.0, 0.5, 2, 1)
    assert comparison["sides"][1]["where"] == {"group": "all"}


def test_where_in_the_query(owner, client, two_models) -> None:
    a, b = two_models
    sides = comparison_query_parse(studies=["1", "2"], wheres=["group=chef; object=car", "group=all"])
    assert [s.where for s in sides] == [(("group", "chef"), ("object", "car")), (("group", "all"),)]
    for bad in ("group", "Group=x", "condition=base", "=x"):
        with pytest.raises(ValidationFailed):
            comparison_query_parse(studies=["1", "2"], wheres=[bad])
    client.force_login(owner)
    page = client.get(f"/compare/{url(a, b)}&where=category%3Doccupational").content.decode()
    assert "Each side is narrowed to its category" in page and "0.1667" in page


def test_every_report_table_has_an_alignment_spec() -> None:
    # A table added to metrics_report without a TableSpec would be aligned by a guess: make it a decision.
    import re
    from pathlib import Path

    from findings import report as metrics_report
    from findings.comparison import TABLE_SPECS

    source = "".join(f.read_text() for f in sorted(Path(metrics_report.__file__).parent.rglob("*.py")))
    keys = set(re.findall(r'Table\(\s*"(\w+)"', source))
    assert len(keys) >= 20 and keys <= set(TABLE_SPECS), keys - set(TABLE_SPECS)


def test_a_narrowing_that_matches_nothing_says_so(two_models) -> None:
    a, b = two_models
    comparison = compare(
        ComparisonSide(study=a, condition="initial"), ComparisonSide(study=b, condition="refind")
    )
    assert any(n.startswith("B: no row of") and "condition = refind" in n for n in comparison["notes"])
    (row,) = [r for r in rows_of(comparison, "ssi_cells") if r["model"] == "all"]
    assert row["mean_ssi [A]"] == pytest.approx(1 / 2) and row["mean_ssi [B]"] is None


def test_figure_legend_names_each_side_with_its_n_and_is_never_clipped(owner) -> None:
    """Issue 25 point 5: two sides of one study (model m1, model m2) had the same legend ("the study's
    name, 4 items"), cut off at the figure's edge; each side is now named by what it is, with its n."""
    from findings.figures import comparison_figure

    colours = {"a1": ("m1", "red"), "a2": ("m1", "red"), "b1": ("m2", "red"), "b2": ("m2", "blue")}
    items = [
        {"external_id": k, "model": m, "condition": "base", "metadata": {"object": "car"}}
        for k, (m, _c) in colours.items()
    ]
    answers = [
        {"item": k, "annotator": "h1", "question": "product_color", "value": c}
        for k, (_m, c) in colours.items()
    ]
    study = make_study(owner, "object-attributes", items, answers)
    study.name = "A study whose name is long enough to have been cut off at the edge of the figure before"
    study.save()
    comparison = compare(ComparisonSide(study=study, model="m1"), ComparisonSide(study=study, model="m2"))
    fig = comparison_figure(comparison, "soda_vac", None)
    assert fig is not None
    (legend,) = fig.legends
    texts = [t.get_text() for t in legend.get_texts()]
    assert len(texts) == 2 and texts[0] != texts[1]
    assert "model m1" in texts[0] and "model m2" in texts[1]
    assert all("n = 2 per group" in t and "consensus" in t for t in texts)
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    canvas = FigureCanvasAgg(fig)
    canvas.draw()  # laid out as it is saved
    renderer = canvas.get_renderer()
    box, frame = legend.get_window_extent(renderer), fig.bbox
    assert box.x0 >= frame.x0 and box.x1 <= frame.x1 and box.y0 >= frame.y0  # inside the figure
