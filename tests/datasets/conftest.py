"""Every data-set test runs offline, with a fresh cache and without pausing between retries."""

from __future__ import annotations

import types
import urllib.request

import pytest

from pymc_sfp.datasets import DATA_HOME_ENV_VAR, _fetch


def _no_network(url, *args, **kwargs):
    # Not an OSError: a loader must not mistake a test that reaches for the network for a
    # failed download and carry on.
    raise AssertionError(f"a test tried to reach the network: {url}")


@pytest.fixture(autouse=True)
def offline(monkeypatch: pytest.MonkeyPatch, tmp_path) -> list[float]:
    """A fresh cache, no network; returns the retry pauses, recorded instead of slept."""
    monkeypatch.setenv(DATA_HOME_ENV_VAR, str(tmp_path / "cache"))
    monkeypatch.setattr(urllib.request, "urlopen", _no_network)
    sleeps: list[float] = []
    monkeypatch.setattr(_fetch, "time", types.SimpleNamespace(sleep=sleeps.append))
    return sleeps
