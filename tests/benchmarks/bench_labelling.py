"""Items per second for each labeller: local ones at batch sizes 1, 8, 32; the VLM at concurrency 1, 8, 32.

Run: ``HF_HUB_OFFLINE=1 .venv/bin/python -m tests.benchmarks.bench_labelling [--items N]
[--device cpu|cuda] [--server-delay S]``

Local labellers (tiny random CLIP / BLIP models built into a temp folder, the colour rule, Haar
faces, RapidOCR) label ``--items`` single-image items (256x256 random-noise pictures with a drawn
word, so OCR has something to read) with one single-choice question (the captioner: k=3
captions; colour: product and background colour; faces: presence + boxes; OCR: presence +
boxes), ``labeller.label`` called once per batch. The VLM labeller runs against the local
chat-completions server of ``tests/fixtures/chat_server.py`` which answers every request with
valid JSON after ``--server-delay`` seconds (default 0.05, standing in for a model's latency),
with ``concurrency`` threads and the same client concurrency. Tiny models say nothing about a real
model's speed: these numbers measure the labellers' own overhead (preprocessing, batching,
threading, HTTP, JSON), which is what this code controls.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image, ImageDraw, ImageFont

from labelling.labellers.base import LabelItem, Labeller
from labelling.labellers.blip import BlipVqaLabeller
from labelling.labellers.captioner import CaptionLabeller
from labelling.labellers.clip import ClipLabeller
from labelling.labellers.colour import ColourLabeller
from labelling.labellers.faces import FaceLabeller
from labelling.labellers.ocr import OcrLabeller
from tests.fixtures.tiny_vision_models import save_tiny_blip_captioner, save_tiny_blip_vqa, save_tiny_clip

YES_NO = [{"key": "yes", "label": "Yes"}, {"key": "no", "label": "No"}]


def q(key: str, kind: str, **fields: Any) -> dict[str, Any]:
    return {
        "key": key,
        "kind": kind,
        "prompt": f"What is the {key} of the person?",
        "options": [],
        "unsure": None,
        "none_option": None,
        "reason": "none",
        "normaliser": "none",
        "linked_question": None,
        **fields,
    }


GENDER = q(
    "gender", "single", options=[{"key": "male", "label": "male"}, {"key": "female", "label": "female"}]
)


def items(count: int) -> list[LabelItem]:
    rng = np.random.default_rng(0)
    font = ImageFont.load_default(size=40)
    made = []
    for index in range(count):
        image = Image.fromarray(rng.integers(0, 256, size=(256, 256, 3), dtype=np.uint8))
        ImageDraw.Draw(image).rectangle((20, 90, 236, 160), fill="white")
        ImageDraw.Draw(image).text((30, 100), f"ITEM{index}", fill="black", font=font)
        made.append(LabelItem(item_id=index, images=[image], image_sha256=[f"{index:064x}"]))
    return made


def rate(labeller: Labeller, batch: list[LabelItem], questions: list[dict[str, Any]], size: int) -> float:
    labeller.label(batch[:1], questions)  # warm-up: lazy loads, first-call allocations
    started = time.perf_counter()
    for start in range(0, len(batch), size):
        labeller.label(batch[start : start + size], questions)
    return len(batch) / (time.perf_counter() - started)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--items", type=int, default=64)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--server-delay", type=float, default=0.05)
    parser.add_argument(
        "--labellers",
        default="clip,blip_vqa,captioner,colour,faces,ocr",
        help="comma-separated local labellers to time",
    )
    parser.add_argument("--local-only", action="store_true", help="skip the VLM (no HTTP client installed)")
    args = parser.parse_args()
    batch = items(args.items)
    folder = Path(tempfile.mkdtemp(prefix="bench-labelling-"))
    device = args.device
    local: list[tuple[str, Callable[[int], Labeller], list[dict[str, Any]]]] = [
        (
            "clip",
            lambda size: ClipLabeller(
                name="clip",
                config={"model": str(save_tiny_clip(folder / "clip")), "device": device, "batch_size": size},
            ),
            [GENDER],
        ),
        (
            "blip_vqa",
            lambda size: BlipVqaLabeller(
                name="vqa", config={"model": str(folder / "vqa"), "device": device, "batch_size": size}
            ),
            [GENDER],
        ),
        (
            "captioner",
            lambda size: CaptionLabeller(
                name="cap",
                config={
                    "model": str(folder / "cap"),
                    "device": device,
                    "batch_size": size,
                    "num_captions": 3,
                    "max_new_tokens": 10,
                },
            ),
            [q("caption", "text")],
        ),
        (
            "colour",
            lambda size: ColourLabeller(name="colour"),
            [
                q("product_color", "text", normaliser="colour"),
                q("background_color", "text", normaliser="colour"),
            ],
        ),
        (
            "faces",
            lambda size: FaceLabeller(name="faces", config={"box_question": "boxes", "box_option": "face"}),
            [q("person", "single", options=YES_NO), q("boxes", "boxes")],
        ),
        (
            "ocr",
            lambda size: OcrLabeller(name="ocr", config={"box_question": "boxes", "box_option": "text"}),
            [q("text_presence", "single", options=YES_NO), q("boxes", "boxes")],
        ),
    ]
    save_tiny_blip_vqa(folder / "vqa")
    save_tiny_blip_captioner(folder / "cap")
    print(f"{args.items} items of one 256x256 image, device {device}")
    print(f"{'labeller':<12}{'batch 1':>12}{'batch 8':>12}{'batch 32':>12}   (items/s)")
    for name, build, questions in local:
        if name not in args.labellers.split(","):
            continue
        figures = [rate(build(size), batch, questions, size) for size in (1, 8, 32)]
        print(f"{name:<12}" + "".join(f"{value:>12.1f}" for value in figures))

    if args.local_only:
        return
    from django.conf import settings as django_settings

    from labelling.labellers.vlm import VlmLabeller
    from tests.fixtures.chat_server import ChatServer, json_reply

    if not django_settings.configured:  # the chat client's outbound policy reads these settings
        django_settings.configure(WORKBENCH_OUTBOUND_ALLOWED_HOSTS=["127.0.0.1"])

    with ChatServer() as server:
        server.responder = lambda body: json_reply({"gender": "female"}, delay_s=args.server_delay)
        figures = []
        for concurrency in (1, 8, 32):
            labeller = VlmLabeller(
                name="vlm",
                config={
                    "base_url": server.base_url,
                    "model": "bench",
                    "api_key_env": None,
                    "template": "biasconnect",
                    "concurrency": concurrency,
                    "max_concurrency": concurrency,
                    "image_format": "png",
                },
            )
            figures.append(rate(labeller, batch, [GENDER], len(batch)))
            labeller.close()
    print(
        f"{'vlm':<12}"
        + "".join(f"{value:>12.1f}" for value in figures)
        + f"   (concurrency 1, 8, 32; server answers after {args.server_delay * 1000:.0f} ms)"
    )


if __name__ == "__main__":
    main()
