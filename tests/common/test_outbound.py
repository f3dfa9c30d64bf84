"""User-given URLs are fetched only when an admin allows it, and never to local or private hosts."""

from __future__ import annotations

import pytest

from common.errors import NotAllowed, ValidationFailed
from common.outbound import outbound_url_check


def test_off_by_default(settings) -> None:
    settings.WORKBENCH_ALLOW_URL_FETCH = False
    with pytest.raises(NotAllowed, match="switched off"):
        outbound_url_check("https://93.184.216.34/v1")


@pytest.mark.parametrize(
    "url",
    [
        "http://127.0.0.1:8000/v1",
        "http://localhost/v1",
        "http://10.0.0.5/v1",
        "http://192.168.1.2/",
        "http://169.254.169.254/latest/meta-data",
        "http://[::1]/v1",
        "http://0.0.0.0/",
    ],
)
def test_local_and_private_addresses_are_refused_even_when_allowed(settings, url: str) -> None:
    settings.WORKBENCH_ALLOW_URL_FETCH = True
    with pytest.raises(NotAllowed, match="local or private address"):
        outbound_url_check(url)


def test_public_addresses_pass_and_other_schemes_do_not(settings) -> None:
    settings.WORKBENCH_ALLOW_URL_FETCH = True
    assert outbound_url_check("https://93.184.216.34/v1") == "https://93.184.216.34/v1"
    with pytest.raises(ValidationFailed, match="not an http"):
        outbound_url_check("file:///etc/passwd")
