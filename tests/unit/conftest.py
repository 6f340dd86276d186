"""Fixtures of the unit tests."""

import pytest

from runtime.network.security import ConnectionSecurity
from runtime.network.tls import job_certificate

_TLS = {}


def tls_security() -> ConnectionSecurity:
    """One job's worth of TLS material, made once per test process (a key costs milliseconds)."""
    if "material" not in _TLS:
        _TLS["material"] = job_certificate("unit tests")
    return ConnectionSecurity.new(_TLS["material"])


@pytest.fixture(params=["plain", "tls"])
def connection_security(request) -> ConnectionSecurity:
    """What both ends of a test's connections share: a secret, and TLS material in the "tls" variant."""
    return tls_security() if request.param == "tls" else ConnectionSecurity.new()
