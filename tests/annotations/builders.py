"""Studies, items and files that several annotation test modules build the same way."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import openpyxl
from django.core.files.base import ContentFile

from annotations.interchange.annotation_import import annotations_import_records
from annotations.interchange.item_import import items_import_records
from annotations.models import (
    Annotation,
    AnnotationRevision,
    Annotator,
    Assignment,
    Item,
    ItemImage,
    Study,
    User,
)
from annotations.services.studies import study_create
from protocols.schema import load_preset
from tests.annotations.imagefiles import png_bytes
from tests.factories import ItemFactory

LABELSTUDIO_FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "labelstudio"


def row_counts(media: Path | None = None) -> dict[str, int]:
    """Rows of every table an import writes (and files under ``media``): equal before and after a refusal."""
    counts = {
        model.__name__: model.objects.count()
        for model in (Study, Item, ItemImage, Annotation, AnnotationRevision, Annotator, Assignment, User)
    }
    if media is not None:
        counts["files"] = sum(1 for path in media.rglob("*") if path.is_file())
    return counts


def image_item(study: Study, name: str, size: tuple[int, int] = (2000, 1000)) -> Item:
    item = ItemFactory.create(study=study, external_id=name, is_reference=False)
    image = ItemImage(
        item=item,
        position=0,
        width=size[0],
        height=size[1],
        content_type="image/png",
        sha256=f"{name:0>64}"[:64],
        original_name=f"{name}.png",
    )
    image.file.save(f"{name}.png", ContentFile(png_bytes(size=size)), save=False)
    image.save()
    return item


HEADER = "worker_id,img,identity,attribute,present,coords\n"


def screen(task: str, img: str, identity: str, attrs: list[str], yes: dict[str, str] | None = None) -> str:
    yes = yes or {}
    lines = []
    for attr in [*attrs, "none of the above"]:
        coords = yes.get(attr)
        present = "yes" if attr in yes else "no"
        lines.append(f'{task},{img},{identity},{attr},{present},"{coords or []}"\n')
    return "".join(lines)


def seegull(path: Path) -> Path:
    path.write_text(
        "identity,attribute,region_stereo,region_nonstereo,region_unsure,NA_stereo,NA_nonstereo,NA_unsure,"
        "Annotation1,Annotation2,Annotation3,mean offensiveness_score\n"
        "Xland,hat,2,1,0,3,0,0,1,1,1,1\n"
        "Xland,sombrero,2,1,0,2,1,0,,,,\n"
        "Xland,poor,1,2,0,1,2,0,2,2,2,2\n"
    )
    return path


def ratings(path: Path, rows: list[tuple[str, int, int, int]]) -> Path:
    wb = openpyxl.Workbook()
    ws = wb.active
    ws.title = "all_visual_attr"
    ws.append(
        [
            "attribute",
            "rating_asia",
            "score_asia",
            "rating_emea",
            "score_emea",
            "rating_na",
            "score_na",
            "mean",
        ]
    )
    for attr, a, e, n in rows:
        ws.append([attr, "", a, "", e, "", n, (a + e + n) / 3])
    wb.save(path)
    return path


def full_overlap(answers: list[dict[str, Any]]) -> int:
    """The overlap under which every item a person answered is fully rated: the fewest people on one."""
    people: dict[str, set[str]] = {}
    for answer in answers:
        if answer.get("annotator_kind", "human") == "human":
            people.setdefault(str(answer["item"]), set()).add(str(answer["annotator"]))
    return min((len(who) for who in people.values()), default=1)


def make_study(owner: User, preset: str, items: list[dict[str, Any]], answers: list[dict[str, Any]]) -> Study:
    """A study whose judged items are fully rated (its overlap: the fewest people on one item)."""
    study = study_create(
        owner=owner, name=preset, protocol=load_preset(preset), overlap=full_overlap(answers)
    )
    items_import_records(study=study, records=[(f"row {i}", r) for i, r in enumerate(items)])
    annotations_import_records(study=study, records=list(enumerate(answers, start=1)))
    return study


def subgroup_study(owner: User) -> Study:
    items = [
        {
            "external_id": f"i{n}",
            "prompt": "people who cook",
            "metadata": {"dimension": "gender", "subgroup": "female", "pair": "cook/female"},
        }
        for n in (1, 2, 3)
    ]
    human = ["female", "female", "male"]
    machine = ["female", "male", "male"]
    answers = [
        {"item": f"i{n}", "annotator": "h1", "question": "gender", "value": v}
        for n, v in zip((1, 2, 3), human, strict=True)
    ]
    answers += [
        {
            "item": f"i{n}",
            "annotator": "vlm",
            "annotator_kind": "machine",
            "annotator_version": "1",
            "question": "gender",
            "value": v,
        }
        for n, v in zip((1, 2, 3), machine, strict=True)
    ]
    return make_study(owner, "subgroup", items, answers)


def ssi_study(owner: User, name: str, model: str, marked: dict[tuple[str, str], int]) -> Study:
    """An ssi-rubric study of one model: (query, condition) -> how many of the 9 rubric items are marked
    (the first n in the rubric's order), one human label each."""
    items = [
        {
            "external_id": f"{q}-{c}",
            "model": model,
            "condition": c,
            "metadata": {"category": "occupational", "query": q},
        }
        for q, c in marked
    ]
    answers = [
        {"item": f"{q}-{c}", "annotator": "h1", "question": k, "value": int(i < n)}
        for (q, c), n in marked.items()
        for i, k in enumerate(OCCUPATIONAL)
    ]
    study = make_study(owner, "ssi-rubric", items, answers)
    study.name = name
    study.save(update_fields=["name"])
    return study


# Study A (model m-a): SSI q1 3/9 -> 0/9, q2 6/9 -> 2/9: initial mean 1/2, refined 1/9, drop 7/9.
A_MARKED = {("q1", "initial"): 3, ("q1", "refined"): 0, ("q2", "initial"): 6, ("q2", "refined"): 2}


# Study B (model m-b): q1 9/9 -> 3/9, q2 3/9 -> 3/9: initial mean 2/3, refined 1/3, drop 1/2.
B_MARKED = {("q1", "initial"): 9, ("q1", "refined"): 3, ("q2", "initial"): 3, ("q2", "refined"): 3}

OCCUPATIONAL = [
    q.key for q in load_preset("ssi-rubric").questions if q.applies_to({"category": "occupational"})
]


RELIABILITY_ITEMS = 30
AGES = ("young", "middle", "old")


def reliability_study(owner: User) -> Study:
    """A bias-axes study of 30 nurses judged by 3 people and the labeller ``vlm@1``, built for the
    reliability gate (docs/metrics.md): ``gender`` answered at random (alpha near 0), ``age`` in full
    agreement (alpha 1), ``person`` "yes" from everyone (a consensus of one class; the labeller says "no"
    on 5 of 30), and a subgroup of 3 items (condition ``gender:female``)."""
    rng = random.Random(11)
    n_items = RELIABILITY_ITEMS
    items = [
        {
            "external_id": f"i{n}",
            "prompt": "a nurse",
            "condition": "gender:female" if n >= n_items - 3 else "base",
            "metadata": {"occupation": "nurse"},
        }
        for n in range(n_items)
    ]
    answers: list[dict[str, Any]] = []
    for rater in ("h1", "h2", "h3"):
        for n in range(n_items):
            answers += [
                {"item": f"i{n}", "annotator": rater, "question": "person", "value": "yes"},
                {"item": f"i{n}", "annotator": rater, "question": "age", "value": AGES[n % 3]},
                {
                    "item": f"i{n}",
                    "annotator": rater,
                    "question": "gender",
                    "value": rng.choice(["male", "female"]),
                },
            ]
    for n in range(n_items):
        for key, value in (
            ("person", "no" if n % 6 == 0 else "yes"),
            ("age", AGES[n % 3]),
            ("gender", "female" if n % 2 else "male"),
        ):
            answers.append(
                {
                    "item": f"i{n}",
                    "annotator": "vlm",
                    "annotator_kind": "machine",
                    "annotator_version": "1",
                    "question": key,
                    "value": value,
                }
            )
    return make_study(owner, "bias-axes", items, answers)


def visage_files(folder: Path) -> list[str]:
    """Small ViSAGe-shaped files written to ``folder`` (four screens of two images, a SeeGULL table and
    visual-ness ratings) and the ``import_visage`` arguments that read them."""
    attrs = ["hat", "poor", "cheerful", "tall"]
    text = HEADER
    for worker, image in (
        ("A0", "Xland1.png"),
        ("A1", "Xland1.png"),
        ("A2", "Xland2.png"),
        ("A3", "Xland2.png"),
    ):
        text += screen(worker, image, "Xland", attrs, {"hat": "['1,1', '9,9']"} if worker != "A1" else {})
        text += screen(
            worker, image, "Xland", ["sombrero", "poor", "cheerful", "tall"], {"poor": "['2,2', '8,8']"}
        )
    (folder / "a.csv").write_text(text)
    visual = ratings(
        folder / "r.xlsx", [("hat", 5, 4, 5), ("sombrero", 5, 5, 5), ("poor", 4, 4, 2), ("tall", 2, 2, 2)]
    )
    return [
        "--annotations",
        str(folder / "a.csv"),
        "--seegull",
        str(seegull(folder / "s.csv")),
        "--visual-attributes",
        str(visual),
    ]
