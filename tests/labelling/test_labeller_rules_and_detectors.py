"""The colour rule on drawn images, Haar faces on scikit-image's astronaut, RapidOCR on drawn text."""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pytest
from PIL import Image, ImageDraw, ImageFont
from skimage import data

from labelling.labellers.base import LabelItem, LabellerError
from labelling.labellers.colour import (
    ColourLabeller,
    ColourNamer,
    colour_vocabulary,
    dominant_rgb,
    rgb_to_lab,
)
from labelling.labellers.faces import FaceLabeller
from labelling.labellers.ocr import OcrLabeller
from labelling.labellers.registry import get_labeller_class


def question(key: str, kind: str, **fields: Any) -> dict[str, Any]:
    base = {
        "key": key,
        "kind": kind,
        "prompt": f"{key}?",
        "options": [],
        "unsure": None,
        "none_option": None,
        "reason": "none",
        "normaliser": "none",
        "linked_question": None,
    }
    return {**base, **fields}


YES_NO = [{"key": "yes", "label": "Yes"}, {"key": "no", "label": "No"}]
PRODUCT = question("product_color", "text", normaliser="colour")
BACKGROUND = question("background_color", "text", normaliser="colour")
RAW_PRODUCT = question("product_color", "text")  # normaliser none: the vocabulary name as is
PERSON = question("person", "single", options=YES_NO)
FACE_BOXES = question("face_boxes", "boxes", linked_question="attributes")
TEXT_PRESENCE = question("text_presence", "single", options=YES_NO)
TEXT_BOXES = question("text_boxes", "boxes", linked_question="marks")


def drawn(
    size: tuple[int, int],
    background: tuple[int, int, int],
    shapes: list[tuple[tuple[int, ...], tuple[int, int, int]]],
) -> Image.Image:
    image = Image.new("RGB", size, background)
    draw = ImageDraw.Draw(image)
    for box, colour in shapes:
        draw.rectangle(box, fill=colour)
    return image


def one(image: Image.Image, item_id: int = 1) -> LabelItem:
    return LabelItem(item_id=item_id, images=[image])


# --- colour rule -------------------------------------------------------------------------------


def test_lab_conversion_matches_published_values() -> None:
    # sRGB red is L*=53.24, a*=80.09, b*=67.20 and white is 100, 0, 0 (D65; e.g. Bruce Lindbloom's calculator)
    assert rgb_to_lab(np.array([255, 0, 0])) == pytest.approx([53.24, 80.09, 67.20], abs=0.01)
    assert rgb_to_lab(np.array([255, 255, 255])) == pytest.approx([100.0, 0.0, 0.0], abs=0.01)


def test_dominant_colour_is_the_fullest_bin_not_the_mean() -> None:
    # 6 red pixels (200, 10, 10) and 4 black ones: the mean would be (120, 6, 6), a colour that is in neither.
    pixels = np.array([[200, 10, 10]] * 6 + [[0, 0, 0]] * 4)
    assert dominant_rgb(pixels) == (200, 10, 10)


def test_red_car_on_white_background() -> None:
    image = drawn(
        (120, 90), (255, 255, 255), [((30, 30, 90, 60), (200, 20, 20)), ((35, 55, 45, 65), (10, 10, 10))]
    )
    outcomes = ColourLabeller(name="colour").label([one(image)], [PRODUCT, BACKGROUND, PERSON])
    values = {o.question_key: o.value for o in outcomes}
    assert values == {"product_color": "red", "background_color": "white"}
    assert json.loads(outcomes[0].raw)["rgb"] == [200, 20, 20]


@pytest.mark.parametrize(
    ("object_rgb", "background_rgb", "expected"),
    [
        ((20, 40, 160), (245, 245, 220), ("blue", "beige")),
        ((30, 140, 40), (128, 128, 128), ("green", "grey")),
        ((250, 220, 30), (10, 10, 10), ("yellow", "black")),
    ],
)
def test_known_colours_are_named(
    object_rgb: tuple[int, int, int], background_rgb: tuple[int, int, int], expected: tuple[str, str]
) -> None:
    image = drawn((100, 100), background_rgb, [((25, 25, 75, 75), object_rgb)])
    outcomes = ColourLabeller(name="colour").label([one(image)], [PRODUCT, BACKGROUND])
    assert tuple(o.value for o in outcomes) == expected


def test_nearest_css3_name_and_study_vocabulary() -> None:
    image = drawn((100, 100), (255, 255, 255), [((20, 20, 80, 80), (0, 0, 128))])
    (css,) = ColourLabeller(name="colour").label([one(image)], [RAW_PRODUCT])
    assert css.value == "navy"
    (basic,) = ColourLabeller(name="colour", config={"vocabulary": ["black", "white", "red", "blue"]}).label(
        [one(image)], [RAW_PRODUCT]
    )
    assert basic.value == "blue"
    custom = ColourLabeller(name="colour", config={"vocabulary": {"ink": "#000080", "paper": "#ffffff"}})
    assert custom.label([one(image)], [RAW_PRODUCT])[0].value == "ink"
    with pytest.raises(LabellerError, match="colour vocabulary"):
        colour_vocabulary(["not-a-colour"])


def test_object_filling_the_frame_falls_back_to_the_centre() -> None:
    flat = Image.new("RGB", (60, 60), (220, 30, 30))
    (product,) = ColourLabeller(name="colour").label([one(flat)], [PRODUCT])
    assert product.value == "red" and json.loads(product.raw)["pixels"] == 30 * 30


def test_large_images_are_shrunk_first_and_agree() -> None:
    small = drawn((100, 80), (255, 255, 255), [((30, 20, 70, 60), (20, 160, 40))])
    big = small.resize((1000, 800), Image.Resampling.NEAREST)
    labeller = ColourLabeller(name="colour")
    assert (
        labeller.label([one(small)], [PRODUCT])[0].value
        == labeller.label([one(big)], [PRODUCT])[0].value
        == "green"
    )


def test_colour_namer_nearest() -> None:
    namer = ColourNamer({"black": (0, 0, 0), "white": (255, 255, 255)})
    assert namer.name((100, 100, 100)) == "black" and namer.name((200, 200, 200)) == "white"


# --- faces ---------------------------------------------------------------------------------------


def test_astronaut_has_a_face_and_its_box() -> None:
    labeller = FaceLabeller(name="faces", config={"box_question": "face_boxes", "box_option": "face"})
    outcomes = {
        o.question_key: o
        for o in labeller.label([one(Image.fromarray(data.astronaut()))], [PERSON, FACE_BOXES])
    }
    assert outcomes["person"].value == "yes"
    (box,) = outcomes["face_boxes"].value
    assert box["option"] == "face"
    # Eileen Collins' face lies around x 180-270, y 70-160 in the 512x512 photo
    centre_x, centre_y = box["x"] + box["w"] / 2, box["y"] + box["h"] / 2
    assert 180 < centre_x < 270 and 70 < centre_y < 160


def test_flat_image_has_no_face() -> None:
    labeller = FaceLabeller(name="faces", config={"box_question": "face_boxes", "box_option": "face"})
    outcomes = {
        o.question_key: o
        for o in labeller.label([one(Image.new("RGB", (200, 200), (128, 128, 128)))], [PERSON, FACE_BOXES])
    }
    assert outcomes["person"].value == "no" and outcomes["face_boxes"].value == []


def test_image_set_boxes_carry_the_image_index_and_binary_is_scored() -> None:
    labeller = FaceLabeller(
        name="faces",
        config={
            "box_question": "face_boxes",
            "box_option": "face",
            "presence_questions": ["person", "anyone"],
        },
    )
    item = LabelItem(item_id=5, images=[Image.new("RGB", (64, 64)), Image.fromarray(data.astronaut())])
    outcomes = {o.question_key: o for o in labeller.label([item], [FACE_BOXES, question("anyone", "binary")])}
    assert outcomes["anyone"].value == 1
    assert [box["image"] for box in outcomes["face_boxes"].value] == [1]


def test_presence_options_must_exist_on_the_question() -> None:
    odd = question(
        "person",
        "single",
        options=[{"key": "present", "label": "Present"}, {"key": "absent", "label": "Absent"}],
    )
    (outcome,) = FaceLabeller(name="faces").label([one(Image.new("RGB", (50, 50)))], [odd])
    assert outcome.value is None and outcome.error == "option 'no' is not one of present, absent"
    configured = FaceLabeller(name="faces", config={"yes_option": "present", "no_option": "absent"})
    assert configured.label([one(Image.new("RGB", (50, 50)))], [odd])[0].value == "absent"


def test_box_question_needs_its_option() -> None:
    with pytest.raises(LabellerError, match="box_option"):
        FaceLabeller(name="faces", config={"box_question": "face_boxes"})
    assert not FaceLabeller(name="faces").supports(FACE_BOXES)


# --- OCR -----------------------------------------------------------------------------------------


def text_image(text: str) -> Image.Image:
    image = Image.new("RGB", (420, 160), "white")
    ImageDraw.Draw(image).text((20, 40), text, fill="black", font=ImageFont.load_default(size=64))
    return image


@pytest.fixture(scope="module")
def ocr() -> OcrLabeller:
    return OcrLabeller(name="ocr", config={"box_question": "text_boxes", "box_option": "logo"})


def test_drawn_text_is_found_with_its_box(ocr: OcrLabeller) -> None:
    outcomes = {
        o.question_key: o for o in ocr.label([one(text_image("DOCTOR42"))], [TEXT_PRESENCE, TEXT_BOXES])
    }
    assert outcomes["text_presence"].value == "yes"
    (box,) = outcomes["text_boxes"].value
    assert box["option"] == "logo" and set(box) == {"option", "x", "y", "w", "h"}
    assert 5 <= box["x"] <= 40 and 30 <= box["y"] <= 70 and box["w"] > 250
    (detection,) = json.loads(outcomes["text_presence"].raw)[0]
    assert detection["text"] == "DOCTOR42"


def test_blank_image_has_no_text(ocr: OcrLabeller) -> None:
    outcomes = ocr.label([one(Image.new("RGB", (200, 120), "white"))], [TEXT_PRESENCE, TEXT_BOXES])
    assert [o.value for o in outcomes] == ["no", []]


def test_registry_knows_the_rule_and_detector_kinds() -> None:
    assert get_labeller_class("colour") is ColourLabeller
    assert get_labeller_class("faces") is FaceLabeller
    assert get_labeller_class("ocr") is OcrLabeller
    assert get_labeller_class("labelling.labellers.ocr.OcrLabeller") is OcrLabeller
    with pytest.raises(LabellerError, match="unknown labeller kind"):
        get_labeller_class("telepathy")
