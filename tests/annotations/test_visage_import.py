"""import_visage / import_seegull on small hand-made files: screens, raters, boxes, refusals."""

from __future__ import annotations

import io
import json

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from annotations.models import Annotation, Annotator, Item, StereotypeEntry, Study
from tests.annotations.builders import HEADER, ratings, screen, seegull

pytestmark = pytest.mark.django_db


def run(*args: str) -> dict:
    out = io.StringIO()
    call_command(*args, stdout=out, stderr=io.StringIO())
    return json.loads(out.getvalue())


def test_screens_become_annotations_of_task_raters(owner, tmp_path) -> None:
    box = "['-3.4,10.2', '50.6,4.0']"  # corners in any order, one slightly negative
    csv_text = (
        HEADER
        + screen("A0", "Xland1.png", "Xland", ["hat", "poor", "cheerful", "tall"], {"hat": box})
        + screen("A0", "Xland1.png", "Xland", ["hat", "poor", "cheerful", "tall"])
        + screen("A0", "Xland1.png", "Xland", ["hat", "poor", "cheerful", "tall"])
        + screen("A0", "Xland1.png", "Xland", ["sombrero", "poor", "cheerful", "tall"])
    )  # 4th showing: r4
    (tmp_path / "ann.csv").write_text(csv_text)
    xlsx = ratings(
        tmp_path / "r.xlsx", [("hat", 5, 4, 5), ("sombrero", 5, 5, 5), ("poor", 4, 4, 2), ("hat", 5, 4, 5)]
    )  # "hat" listed twice, like "handsome"
    out = run(
        "import_visage",
        "--annotations",
        str(tmp_path / "ann.csv"),
        "--seegull",
        str(seegull(tmp_path / "s.csv")),
        "--visual-attributes",
        str(xlsx),
        "--owner",
        "owner",
    )
    markers = Study.objects.get(pk=out["studies"]["stereotype-markers"])
    assert markers.preset == "stereotype-markers" and markers.owner == owner
    item = Item.objects.get(study=markers)
    assert item.is_reference and item.metadata["identity"] == "Xland"
    assert item.metadata["attributes"] == ["cheerful", "hat", "poor", "sombrero", "tall"]
    names = sorted(Annotator.objects.filter(study=markers).values_list("name", flat=True))
    assert names == ["A0-r1", "A0-r2", "A0-r3", "A0-r4"]
    first = Annotation.objects.get(item=item, annotator__name="A0-r1", question_key="attributes")
    assert first.value == ["hat"] and first.shown == ["hat", "poor", "cheerful", "tall", "none_of_the_above"]
    boxes = Annotation.objects.get(item=item, annotator__name="A0-r1", question_key="attribute_boxes")
    assert boxes.value == [{"option": "hat", "x": 0, "y": 4, "w": 51, "h": 6}]
    assert Annotation.objects.get(annotator__name="A0-r4", question_key="attributes").shown[0] == "sombrero"
    assert (out["showings"], out["screens"], out["annotations"]["stereotype-markers"]) == (20, 4, 5)
    # SeeGULL rows with the visual flag from the ratings (poor: one region Disagree -> not visual)
    flags = dict(StereotypeEntry.objects.filter(study=markers).values_list("attribute", "visual"))
    assert flags == {"hat": True, "sombrero": True, "poor": False}
    assert StereotypeEntry.objects.get(study=markers, attribute="sombrero").offensiveness is None
    visualness = Study.objects.get(pk=out["studies"]["visualness"])
    assert markers.visualness_study_id == visualness.pk and markers.imported_from == "ann.csv"
    assert visualness.imported_from == "r.xlsx"
    assert sorted(Item.objects.filter(study=visualness).values_list("external_id", flat=True)) == [
        "hat",
        "hat #2",
        "poor",
        "sombrero",
    ]
    assert Item.objects.get(study=visualness, external_id="hat #2").text == "hat"
    assert sorted(
        Annotation.objects.filter(item__study=visualness, item__external_id="poor").values_list(
            "annotator__name", "value"
        )
    ) == [("asia", "agree"), ("emea", "agree"), ("na", "disagree")]
    assert out["duplicate_terms"] == ["hat"]


def test_a_screen_without_none_of_the_above_refuses_everything(owner, tmp_path) -> None:
    text = HEADER + screen("A0", "Xland1.png", "Xland", ["hat"]) + "A1,Xland2.png,Xland,hat,no,[]\n"
    (tmp_path / "ann.csv").write_text(text)
    with pytest.raises(CommandError, match="line 4: the last screen ends without"):
        run(
            "import_visage",
            "--annotations",
            str(tmp_path / "ann.csv"),
            "--seegull",
            str(seegull(tmp_path / "s.csv")),
        )
    assert not Study.objects.exists() and not Annotation.objects.exists()


def test_a_box_on_an_unselected_attribute_is_refused(owner, tmp_path) -> None:
    text = (
        HEADER
        + "A0,Xland1.png,Xland,hat,no,\"['1,1', '5,5']\"\nA0,Xland1.png,Xland,none of the above,no,[]\n"
    )
    (tmp_path / "ann.csv").write_text(text)
    with pytest.raises(CommandError, match="line 2: a box for an attribute that is not marked present"):
        run(
            "import_visage",
            "--annotations",
            str(tmp_path / "ann.csv"),
            "--seegull",
            str(seegull(tmp_path / "s.csv")),
        )
    assert not Study.objects.exists()


def test_import_seegull_replaces_a_study_table_and_refuses_bad_numbers(study, tmp_path) -> None:
    assert run("import_seegull", str(study.pk), str(seegull(tmp_path / "s.csv"))) == {
        "study": study.pk,
        "rows": 3,
    }
    hat = StereotypeEntry.objects.get(study=study, attribute="hat")
    assert (hat.na_stereo, hat.offensiveness, hat.visual, hat.extra["Annotation1"]) == (3, 1.0, None, "1")
    bad = tmp_path / "bad.csv"
    bad.write_text("identity,attribute,NA_stereo\nXland,cap,two\n")
    with pytest.raises(CommandError, match="bad.csv line 2: NA_stereo 'two' is not a number"):
        run("import_seegull", str(study.pk), str(bad))
    assert StereotypeEntry.objects.filter(study=study).count() == 3  # the refused import changed nothing
    states = tmp_path / "states.csv"
    states.write_text("identity,attribute,region_stereo,offensiveness_score\nTexan,cowboy hat,3,0.5\n")
    assert run("import_seegull", str(study.pk), str(states))["rows"] == 1
    assert list(StereotypeEntry.objects.filter(study=study).values_list("attribute", "offensiveness")) == [
        ("cowboy hat", 0.5)
    ]
