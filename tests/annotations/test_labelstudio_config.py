"""Labeling configs <-> protocols: the mapping, untrusted XML refused, the kept protocol restored only
while the config still fits it."""

from __future__ import annotations

import pytest

from annotations.interchange.labelstudio.config import (
    COMMENT_RE,
    ConfigError,
    config_to_protocol,
    protocol_to_config,
)
from protocols.schema import list_presets, load_preset, load_protocol_text
from tests.factories import EXAMPLE_PROTOCOL

CAPTIONED = """<View>
  <Text name="caption" value="$caption"/>
  <Image name="img" value="$photo"/>
  <Header value="Who is shown?"/>
  <Choices name="Who Is It" toName="img" choice="single-radio">
    <Choice value="A nurse" alias="nurse"/>
    <Choice value="A doctor!"/>
  </Choices>
  <RectangleLabels name="marks" toName="img">
    <Label value="Stethoscope"/><Label value="Cap"/>
  </RectangleLabels>
</View>"""


def test_a_caption_beside_the_image_is_only_shown_and_names_become_keys() -> None:
    config = config_to_protocol(CAPTIONED, name="Captioned")
    assert (config.object_name, config.data_field, config.protocol.unit) == ("img", "photo", "image")
    who = config.protocol.question("who_is_it")
    assert who.prompt == "Who is shown?" and [(o.key, o.label) for o in who.options] == [
        ("nurse", "A nurse"),
        ("a_doctor", "A doctor!"),
    ]
    assert config.controls["Who Is It"].values == {
        "A nurse": "nurse",
        "nurse": "nurse",
        "A doctor!": "a_doctor",
    }
    marks = config.protocol.question("marks")
    assert (
        marks.linked_question == "marks_labels" and config.controls["marks"].derived_multi == "marks_labels"
    )
    assert [o.key for o in config.protocol.question("marks_labels").options] == ["stethoscope", "cap"]
    assert not config.restored


@pytest.mark.parametrize(
    "text,message",
    [
        (
            '<!DOCTYPE View [<!ENTITY a "x"><!ENTITY b "&a;&a;&a;&a;&a;&a;&a;&a;">]><View>&b;</View>',
            "refused: the config declares a DTD",
        ),
        ('<!DOCTYPE View [<!ENTITY e SYSTEM "file:///etc/passwd">]><View>&e;</View>', "refused"),
        (
            '<View><Image name="a" value="$a"/><Image name="b" value="$b"/><TextArea name="t" '
            'toName="a"/></View>',
            "line 1: a second <Image>",
        ),
        ("<Task/>", "must start with <View>"),
        ('<View><Image name="a" value="$a"/><Choice value="x"/></View>', "<Choice> belongs inside <Choices>"),
        (
            '<View><Image name="a" value="$a"/><Choices name="c" toName="a"><Choice value="X"/><Choice '
            'value="x"/>'
            "</Choices></View>",
            "gives the option key 'x' twice",
        ),
    ],
)
def test_untrusted_or_unsupported_configs_are_refused(text: str, message: str) -> None:
    with pytest.raises(ConfigError) as caught:
        config_to_protocol(text, name="x")
    assert message in caught.value.message


def test_every_preset_comes_back_whole_from_its_config() -> None:
    presets = list_presets()
    assert len(presets) >= 3, presets
    for key in presets:
        protocol = load_preset(key)
        config = config_to_protocol(protocol_to_config(protocol), name="x")
        assert config.restored and config.protocol == protocol, key


def test_the_kept_protocol_is_dropped_once_the_config_no_longer_fits_it() -> None:
    protocol = load_protocol_text(EXAMPLE_PROTOCOL)
    text = protocol_to_config(protocol)
    edited = text.replace(
        '<Choice value="female" alias="female"/>',
        '<Choice value="female" alias="female"/>\n    <Choice value="other"/>',
    )
    config = config_to_protocol(edited, name="edited")
    assert not config.restored and [o.key for o in config.protocol.question("gender").options] == [
        "male",
        "female",
        "other",
    ]
    assert (
        config.protocol.question("smiling").kind == "single"
    )  # without the kept protocol, a binary is a choice
    assert COMMENT_RE.search(text) and "--" not in COMMENT_RE.search(text).group(1)
