"""Shared test fixtures (provisional: only what the nn and learning tests need).

``shared_data`` is the folder of the papers' real data sets: ``$PYMC_SFP_DATA`` when set, else
``<repository root>/../shared/data``; a test that requests it is skipped when the folder lacks
the data sets named by its ``@pytest.mark.dataset(...)`` marker.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from pymc_sfp.datasets import DATA_ENV_VAR

#: The files of each data set, relative to the data folder (the loaders' layout).
DATASET_FILES = {
    "glass": ("glass/glass.data",),
    "santafe_b": ("santafe_b/b1.txt", "santafe_b/b2.txt"),
    "laser": ("santafe_a/laser.dat",),
}


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "dataset(*names): the real data sets the shared_data fixture must find"
    )


@pytest.fixture
def shared_data(request: pytest.FixtureRequest) -> Path:
    """The real data folder; skips the test if a data set of its ``dataset`` marker is missing."""
    default = Path(__file__).resolve().parents[1].parent / "shared" / "data"
    folder = Path(os.environ.get(DATA_ENV_VAR) or default)
    marker = request.node.get_closest_marker("dataset")
    names = marker.args if marker is not None and marker.args else tuple(DATASET_FILES)
    for name in names:
        missing = [f for f in DATASET_FILES[name] if not (folder / f).is_file()]
        if missing:
            pytest.skip(f"{name} data not found ({missing[0]} not in {folder}): set {DATA_ENV_VAR}")
    return folder
