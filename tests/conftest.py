"""Shared test helpers.

The papers' real data sets
--------------------------
Tests that need a real data set never download it: they read a local copy and skip when there is
none. The copy is the folder ``$PYMC_SFP_DATA`` when that variable is set, otherwise
``<repository root>/../shared/data`` (where CI keeps it), laid out like
``pymc_sfp.datasets`` expects (``glass/glass.data``, ``santafe_b/b1.txt`` ...). Use it so::

    @pytest.mark.dataset("glass")
    def test_something(shared_data):
        X_train, y_train, X_test, y_test = datasets.glass_split(0)

The ``shared_data`` fixture points ``$PYMC_SFP_DATA`` at that folder for the test, so the loaders
read it, and returns its path. It skips the test, with a one-line reason that says how to enable
it, when a file of a data set named by the ``dataset`` marker is missing; without the marker it
requires every data set. :func:`require_dataset` does the same check where no fixture fits.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from pymc_sfp.datasets import DATA_ENV_VAR

REPO_ROOT = Path(__file__).resolve().parents[1]
#: The shared data folder beside the repository, used when ``$PYMC_SFP_DATA`` is not set.
DEFAULT_DATA = REPO_ROOT.parent / "shared" / "data"

#: The files of each data set, relative to the data folder (the loaders' layout).
DATASET_FILES: dict[str, tuple[str, ...]] = {
    "glass": ("glass/glass.data",),
    "santafe_b": ("santafe_b/b1.txt", "santafe_b/b2.txt"),
    "laser": ("santafe_a/laser.dat",),
}


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "dataset(*names): the real data sets the shared_data fixture must find "
        f"(of {', '.join(DATASET_FILES)}); all when no name is given",
    )


def data_folder() -> Path:
    """The folder holding the real data: ``$PYMC_SFP_DATA`` if set, else ``../shared/data``."""
    return Path(os.environ.get(DATA_ENV_VAR) or DEFAULT_DATA).expanduser()


def require_dataset(name: str) -> Path:
    """Return the data folder, or skip the calling test if data set ``name`` is not all there.

    Parameters
    ----------
    name : str
        A key of :data:`DATASET_FILES`: ``"glass"``, ``"santafe_b"`` or ``"laser"``.

    Returns
    -------
    pathlib.Path
        The data folder (see :func:`data_folder`).
    """
    if name not in DATASET_FILES:
        raise ValueError(f"unknown data set {name!r}; known: {', '.join(DATASET_FILES)}")
    folder = data_folder()
    missing = [file for file in DATASET_FILES[name] if not (folder / file).is_file()]
    if missing:
        pytest.skip(
            f"{name} data set not found ({missing[0]} is not in {folder}): set {DATA_ENV_VAR} "
            "to a folder holding it (CI uses ../shared/data)"
        )
    return folder


@pytest.fixture
def shared_data(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The real data folder, with ``$PYMC_SFP_DATA`` pointing at it; skip if data are missing.

    Which data sets must be there: the names of the test's ``@pytest.mark.dataset(...)``
    marker, or all of :data:`DATASET_FILES` without one (or with no names). See the module
    docstring.
    """
    marker = request.node.get_closest_marker("dataset")
    names = marker.args if marker is not None and marker.args else tuple(DATASET_FILES)
    folder = data_folder()
    for name in names:
        require_dataset(name)
    monkeypatch.setenv(DATA_ENV_VAR, str(folder))
    return folder
