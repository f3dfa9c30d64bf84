"""The one outbound policy (common/outbound.py): public hosts pass; loopback, private, link-local and
reserved addresses, named directly or reached through DNS, only when WORKBENCH_OUTBOUND_ALLOWED_HOSTS
lists them; schemes from WORKBENCH_OUTBOUND_SCHEMES."""

from __future__ import annotations

import pytest

from common.outbound import OutboundRefused, outbound_url_check


@pytest.mark.parametrize(
    "url",
    [
        "http://127.0.0.1:8000/v1",
        "http://localhost/v1",  # resolved: 127.0.0.1
        "http://10.0.0.5/v1",
        "http://192.168.1.2/",
        "http://172.16.0.1/",
        "http://100.64.0.1/",  # shared address space
        "http://169.254.169.254/latest/meta-data",
        "http://[::1]/v1",
        "http://[::ffff:127.0.0.1]/v1",
        "http://[fe80::1]/v1",
        "http://0.0.0.0/",
        "http://224.0.0.1/",
        "http://2130706433/",  # 127.0.0.1 as one number, resolved by the resolver
    ],
)
def test_local_private_and_link_local_addresses_are_refused(settings, url: str) -> None:
    settings.WORKBENCH_OUTBOUND_ALLOWED_HOSTS = []
    with pytest.raises(OutboundRefused, match="WORKBENCH_OUTBOUND_ALLOWED_HOSTS"):
        outbound_url_check(url)


def test_public_addresses_pass_and_other_schemes_do_not(settings) -> None:
    settings.WORKBENCH_OUTBOUND_ALLOWED_HOSTS = []
    assert outbound_url_check("https://93.184.216.34/v1") == "https://93.184.216.34/v1"
    for url in ("file:///etc/passwd", "gopher://93.184.216.34/", "https:///v1", "ftp://93.184.216.34/"):
        with pytest.raises(OutboundRefused, match="must be"):
            outbound_url_check(url)
    settings.WORKBENCH_OUTBOUND_SCHEMES = ["https"]
    with pytest.raises(OutboundRefused, match="must be https://"):
        outbound_url_check("http://93.184.216.34/v1")


def test_the_setting_allows_hosts_addresses_and_networks(settings) -> None:
    settings.WORKBENCH_OUTBOUND_ALLOWED_HOSTS = ["127.0.0.1", "10.0.0.0/8", "localhost", "::1"]
    for url in ("http://127.0.0.1:8000/v1", "http://10.1.2.3/v1", "http://localhost/v1", "http://[::1]/"):
        assert outbound_url_check(url) == url
    for url in ("http://127.0.0.2/v1", "http://192.168.1.2/", "http://169.254.169.254/"):
        with pytest.raises(OutboundRefused):
            outbound_url_check(url)


def test_a_host_that_does_not_resolve_is_refused(settings) -> None:
    with pytest.raises(OutboundRefused, match="cannot resolve"):
        outbound_url_check("http://no-such-host.invalid/v1")
