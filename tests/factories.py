"""factory_boy factories for the annotations models."""

from __future__ import annotations

import factory

from annotations.models import Annotator, Item, Study, User
from protocols.schema import load_protocol_text

EXAMPLE_PROTOCOL = """
name: Example
unit: image
questions:
  - key: gender
    kind: single
    prompt: What is the gender of the person?
    options: [male, female]
  - key: attributes
    kind: multi
    prompt: Which attributes are depicted?
    options: [hat, glasses, beard]
    none_option: None of the above
  - key: boxes
    kind: boxes
    prompt: Draw a box around each selected attribute
    linked_question: attributes
    required: false
  - key: colour
    kind: text
    prompt: Main colour?
    normaliser: colour
    required: false
  - key: smiling
    kind: binary
    prompt: Is the person smiling?
    reason: optional
    required: false
"""


def example_protocol_dict() -> dict:
    return load_protocol_text(EXAMPLE_PROTOCOL).to_dict()


class UserFactory(factory.django.DjangoModelFactory[User]):
    class Meta:
        model = User
        django_get_or_create = ("username",)

    username = factory.Sequence(lambda n: f"user{n}")
    role = User.Role.RESEARCHER
    password = factory.django.Password("correct horse battery")


class StudyFactory(factory.django.DjangoModelFactory[Study]):
    class Meta:
        model = Study

    name = factory.Sequence(lambda n: f"Study {n}")
    owner = factory.SubFactory(UserFactory)
    protocol = factory.LazyFunction(example_protocol_dict)
    overlap = 3


class ItemFactory(factory.django.DjangoModelFactory[Item]):
    class Meta:
        model = Item

    study = factory.SubFactory(StudyFactory)
    external_id = factory.Sequence(lambda n: f"item-{n}")
    kind = Item.Kind.IMAGE
    is_reference = True


class MachineAnnotatorFactory(factory.django.DjangoModelFactory[Annotator]):
    class Meta:
        model = Annotator

    kind = Annotator.Kind.MACHINE
    name = factory.Sequence(lambda n: f"labeller-{n}")
    version = "1"
