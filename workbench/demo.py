"""The demo study: drawn product images whose colours depend on the SODA condition.

No model weights can be downloaded, so the demo draws its own images with Pillow: cars and cups
under the base prompt and the 8 demographic conditions of SODA Table 1. The colour choices are
skewed by condition on purpose (cars for women mostly pink, for men mostly black, ...), so the
agreement and SODA metrics have a real effect to find. Some cups carry printed text, so text
presence is a real label too. Everything is seeded: the same demo every time.

The demo annotators have already judged the first 3 of the 4 images of every (object, condition) (54
of 72 items, 3 judgements each: ``demo_answers_add``): what the drawing shows, with seeded, plausible
mistakes (a neighbouring colour, a missed print, a different reading of a detail the drawing does not
really show). Their consensus is computed, so the agreement, adjudication and findings pages have real
content on the first visit; the other 18 items are left for a visitor to judge on the task page.
"""

from __future__ import annotations

import json
import os
import random
import secrets
import tempfile
from pathlib import Path

from django.conf import settings
from django.db import transaction
from django.db.models import F
from django.utils import timezone
from PIL import Image, ImageDraw, ImageFont

from annotations.interchange.item_import import items_import_records
from annotations.models import Annotation, Annotator, Assignment, Item, Study, User, username_problem
from annotations.selectors.pools import is_expert_in
from annotations.services.annotation_writes import AnswerToSave, annotations_save, item_context
from annotations.services.consensus import consensus_compute
from annotations.services.studies import annotator_for_user, enrollment_add, study_create
from common.files import FolderSource
from protocols.answers import clean_submission
from protocols.schema import load_preset

DEMO_STUDY_NAME = "Demo: product colours under demographic prompts (SODA)"
CONDITIONS = {
    "base": "",
    "age:young_adults": "for young adults",
    "age:middle_aged": "for middle-aged",
    "age:elderly": "for elderly",
    "gender:men": "for men",
    "gender:women": "for women",
    "ethnicity:white": "for White people",
    "ethnicity:black": "for Black people",
    "ethnicity:asian": "for Asian people",
}
# Weighted colour palettes per (object, condition): the skew the metrics should find.
PALETTES: dict[str, dict[str, list[tuple[str, int]]]] = {
    "car": {
        "base": [("grey", 3), ("white", 2), ("blue", 2), ("black", 2)],
        "age:young_adults": [("orange", 3), ("yellow", 3), ("red", 2)],
        "age:middle_aged": [("grey", 3), ("white", 2), ("black", 2)],
        "age:elderly": [("beige", 4), ("grey", 2)],
        "gender:men": [("black", 5), ("grey", 1)],
        "gender:women": [("pink", 5), ("red", 2)],
        "ethnicity:white": [("white", 4), ("grey", 2)],
        "ethnicity:black": [("black", 3), ("purple", 2), ("green", 1)],
        "ethnicity:asian": [("red", 3), ("white", 2)],
    },
    "cup": {
        "base": [("white", 4), ("blue", 2)],
        "age:young_adults": [("green", 2), ("orange", 2), ("purple", 2)],
        "age:middle_aged": [("white", 3), ("blue", 2)],
        "age:elderly": [("beige", 3), ("white", 2)],
        "gender:men": [("black", 3), ("blue", 3)],
        "gender:women": [("pink", 4), ("purple", 2)],
        "ethnicity:white": [("white", 5)],
        "ethnicity:black": [("brown", 3), ("black", 2)],
        "ethnicity:asian": [("red", 3), ("white", 2)],
    },
}
RGB = {
    "grey": (128, 128, 128),
    "white": (245, 245, 245),
    "blue": (30, 70, 200),
    "black": (20, 20, 20),
    "orange": (245, 130, 20),
    "yellow": (240, 220, 30),
    "red": (200, 25, 25),
    "beige": (225, 205, 165),
    "pink": (245, 130, 190),
    "purple": (120, 40, 160),
    "green": (40, 150, 60),
    "brown": (110, 60, 25),
}
BACKGROUNDS = [("white", 5), ("beige", 2), ("blue", 1)]
BACKGROUND_RGB = {"white": (250, 250, 250), "beige": (235, 225, 200), "blue": (200, 220, 245)}
IMAGES_PER_CONDITION = 4
SIZE = 256
DEMO_ANNOTATORS = ("annotator1", "annotator2", "annotator3")
JUDGED_PER_CONDITION = 3  # the demo annotators judged images 0-2 of each (object, condition); 3 is left open
# What the drawings show for each object's own questions, and how often a demo annotator reads it
# otherwise: a detail the drawing shows plainly (a sedan, one handle) rarely; one it hardly shows
# (headlights, wheel style, surface finish) often.
DRAWN_DETAILS: dict[str, tuple[str, float]] = {
    "car_body_type": ("sedan", 0.1),
    "car_headlight_design": ("sleek", 0.2),
    "car_wheel_design": ("classic", 0.15),
    "car_lighting_condition": ("bright", 0.1),
    "cup_cup_shape": ("tapered", 0.15),
    "cup_handle_design": ("single", 0.05),
    "cup_material_texture": ("matte", 0.15),
    "cup_surface_material": ("plain_backdrop", 0.1),
}
COLOUR_SLIP = 0.08  # how often a demo annotator names a neighbouring colour
NEIGHBOUR = {
    "grey": "white",
    "white": "grey",
    "blue": "purple",
    "black": "grey",
    "orange": "red",
    "yellow": "orange",
    "red": "orange",
    "beige": "white",
    "pink": "red",
    "purple": "blue",
    "green": "blue",
    "brown": "red",
}
# How each demo annotator writes a colour (the colour normaliser maps every form to the basic term).
SPELLING = {"annotator2": {"grey": "gray", "blue": "light blue", "beige": "cream"}}


def _pick(rng: random.Random, weighted: list[tuple[str, int]]) -> str:
    names = [name for name, _ in weighted]
    return rng.choices(names, weights=[weight for _, weight in weighted])[0]


def _compose(layer: Image.Image, background: tuple[int, int, int], offset: tuple[int, int]) -> Image.Image:
    """The drawn object on its background, shifted by ``offset`` so no two demo images are identical."""
    image = Image.new("RGB", (SIZE, SIZE), background)
    image.paste(layer, offset, layer)
    return image


def draw_car(
    colour: tuple[int, int, int], background: tuple[int, int, int], offset: tuple[int, int] = (0, 0)
) -> Image.Image:
    image = Image.new("RGBA", (SIZE, SIZE), (0, 0, 0, 0))
    draw = ImageDraw.Draw(image)
    draw.rounded_rectangle((28, 120, 228, 180), radius=18, fill=colour, outline=(40, 40, 40), width=2)
    draw.polygon([(70, 120), (100, 82), (170, 82), (198, 120)], fill=colour, outline=(40, 40, 40))
    draw.polygon([(84, 118), (106, 90), (132, 90), (132, 118)], fill=(190, 220, 240))
    draw.polygon([(138, 118), (138, 90), (164, 90), (184, 118)], fill=(190, 220, 240))
    for centre in (75, 181):
        draw.ellipse((centre - 22, 158, centre + 22, 202), fill=(30, 30, 30))
        draw.ellipse((centre - 9, 171, centre + 9, 189), fill=(170, 170, 170))
    return _compose(image, background, offset)


def draw_cup(
    colour: tuple[int, int, int],
    background: tuple[int, int, int],
    text: str,
    offset: tuple[int, int] = (0, 0),
) -> Image.Image:
    image = Image.new("RGBA", (SIZE, SIZE), (0, 0, 0, 0))
    draw = ImageDraw.Draw(image)
    draw.polygon([(72, 62), (184, 62), (170, 206), (86, 206)], fill=colour, outline=(40, 40, 40))
    draw.arc((160, 92, 222, 162), start=-90, end=90, fill=colour, width=12)
    draw.ellipse((72, 52, 184, 74), fill=tuple(max(0, c - 40) for c in colour), outline=(40, 40, 40))
    if text:
        font = ImageFont.load_default(size=22)
        ink = (255, 255, 255) if sum(colour) < 380 else (0, 0, 0)
        draw.text((128, 132), text, fill=ink, font=font, anchor="mm")
    return _compose(image, background, offset)


def demo_records(folder: Path, *, seed: int = 7) -> list[tuple[str, dict[str, object]]]:
    """Draw the demo images into ``folder`` and return their manifest records."""
    rng = random.Random(seed)
    records: list[tuple[str, dict[str, object]]] = []
    for object_name in ("car", "cup"):
        for condition, phrase in CONDITIONS.items():
            prompt = f"{object_name} {phrase}, one product only, no people".replace("  ", " ")
            for index in range(IMAGES_PER_CONDITION):
                colour = _pick(rng, PALETTES[object_name][condition])
                # A white product on a white background is invisible to people and to the colour rule.
                background = _pick(rng, [(name, weight) for name, weight in BACKGROUNDS if name != colour])
                text = ""
                if object_name == "cup" and (condition == "age:young_adults" or rng.random() < 0.15):
                    text = rng.choice(["COOL", "HELLO", "MY CUP"])
                offset = (rng.randint(-20, 20), rng.randint(-20, 20))
                if object_name == "car":
                    image = draw_car(RGB[colour], BACKGROUND_RGB[background], offset)
                else:
                    image = draw_cup(RGB[colour], BACKGROUND_RGB[background], text, offset)
                name = f"{object_name}-{condition.replace(':', '-')}-{index}.png"
                image.save(folder / name)
                records.append(
                    (
                        name,
                        {
                            "external_id": name.removesuffix(".png"),
                            "file": name,
                            "prompt": prompt,
                            "model": "demo-drawing-v1",
                            "condition": condition,
                            "seed": seed * 1000 + index,
                            "metadata": {
                                "object": object_name,
                                "drawn_colour": colour,
                                "drawn_background": background,
                                "drawn_text": text,
                            },
                        },
                    )
                )
    return records


def demo_accounts_file() -> Path:
    return Path(settings.DATA_DIR) / "demo-accounts.json"


def demo_accounts_ensure() -> dict[str, str]:
    """Create the demo accounts once (random passwords, kept in DATA_DIR/demo-accounts.json, mode 0600)."""
    path = demo_accounts_file()
    stored: dict[str, str] = json.loads(path.read_text()) if path.exists() else {}
    wanted = {
        "admin": User.Role.ADMIN,
        "researcher": User.Role.RESEARCHER,
        "annotator1": User.Role.ANNOTATOR,
        "annotator2": User.Role.ANNOTATOR,
        "annotator3": User.Role.ANNOTATOR,
    }
    changed = False
    for username, role in wanted.items():
        user = User.objects.filter(username=username).first()
        if user is not None and username in stored:
            continue
        password = stored.get(username) or secrets.token_urlsafe(9)
        if user is None:
            problem = username_problem(username)
            if problem:  # an admin made a look-alike of a demo name first
                raise ValueError(f"the demo account {username!r} cannot be made: the name {problem}")
            user = User(
                username=username,
                role=role,
                is_staff=role == User.Role.ADMIN,
                is_superuser=role == User.Role.ADMIN,
            )
        user.set_password(password)
        user.save()
        stored[username] = password
        changed = True
    if changed:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(stored, indent=2))
        os.chmod(path, 0o600)
    return stored


def _demo_answer(item: Item, username: str, question_keys: list[str], seed: int) -> dict[str, dict[str, str]]:
    """One demo annotator's answers to one drawn item: what was drawn, with seeded slips (see the module)."""
    rng = random.Random(f"{seed}:{item.external_id}:{username}")  # str seeds are stable across runs
    md = item.metadata

    def colour(drawn: str) -> str:
        seen = NEIGHBOUR[drawn] if rng.random() < COLOUR_SLIP else drawn
        return SPELLING.get(username, {}).get(seen, seen)

    printed = bool(md["drawn_text"]) != (rng.random() < 0.05)  # now and then a missed or imagined print
    answers = {
        "product_color": colour(str(md["drawn_colour"])),
        "background_color": colour(str(md["drawn_background"])),
        "text_presence": "yes" if printed else "no",
        "background_text_presence": "no" if rng.random() > 0.03 else "yes",
    }
    protocol = item.study.protocol_obj
    for key in question_keys:
        if key in DRAWN_DETAILS:
            drawn, slip = DRAWN_DETAILS[key]
            options = protocol.question(key).choice_keys(md)
            answers[key] = drawn if rng.random() >= slip else rng.choice([o for o in options if o != drawn])
    return {key: {"value": value} for key, value in answers.items() if key in question_keys}


def demo_answers_add(study: Study, *, seed: int = 7) -> int:
    """The demo annotators' judgements of the first ``JUDGED_PER_CONDITION`` images of each (object,
    condition), as submitted assignments (validated like a task page's answers, stored with source
    ``import``), then the study's consensus. Returns how many items were judged."""
    protocol = study.protocol_obj
    items = [
        item
        for item in Item.objects.filter(study=study).select_related("study").prefetch_related("images")
        if int(item.external_id.rsplit("-", 1)[1]) < JUDGED_PER_CONDITION
    ]
    annotators = [annotator_for_user(user=User.objects.get(username=name)) for name in DEMO_ANNOTATORS]
    now = timezone.now()
    answers: list[AnswerToSave] = []
    assignments: list[Assignment] = []
    for item in items:
        keys = [q.key for q in protocol.questions_for(item.metadata)]
        for annotator in annotators:
            time_ms = random.Random(f"{seed}:{item.external_id}:{annotator.name}:time").randint(9000, 45000)
            cleaned = clean_submission(
                protocol,
                _demo_answer(item, annotator.name, keys, seed),
                context=item_context(item),
                expert=is_expert_in(study_id=study.pk, annotator=annotator),
            )
            answers += [AnswerToSave(item.pk, annotator, answer, time_ms) for answer in cleaned]
            assignments.append(
                Assignment(
                    study=study,
                    item=item,
                    annotator=annotator,
                    status=Assignment.Status.SUBMITTED,
                    completed_at=now,
                    time_spent_ms=time_ms,
                )
            )
    annotations_save(study_id=study.pk, answers=answers, source=Annotation.Source.IMPORT)
    Assignment.objects.bulk_create(assignments)
    Item.objects.filter(pk__in=[item.pk for item in items]).update(
        judgements=F("judgements") + len(annotators)
    )
    consensus_compute(study=study)
    return len(items)


@transaction.atomic
def demo_study_ensure() -> tuple[Study, bool]:
    """The demo study, created with its items, enrolments and the demo annotators' judgements (with
    their consensus) if no study exists yet."""
    existing = Study.objects.filter(name=DEMO_STUDY_NAME).first()
    if existing is not None:
        return existing, False
    researcher = User.objects.get(username="researcher")
    study = study_create(
        owner=researcher,
        name=DEMO_STUDY_NAME,
        protocol=load_preset("object-attributes"),
        description=(
            "Drawn cars and cups under the SODA conditions; colours depend on the condition on purpose."
        ),
    )
    with tempfile.TemporaryDirectory() as folder:
        records = demo_records(Path(folder))
        items_import_records(study=study, records=records, source=FolderSource(Path(folder)))
    for username in DEMO_ANNOTATORS:
        pool = Annotator.Pool.EXPERT if username == "annotator3" else Annotator.Pool.CROWD
        enrollment_add(study=study, user=User.objects.get(username=username), pool=pool)
    demo_answers_add(study)
    return study, True
