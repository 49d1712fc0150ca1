"""The real data sets of Berrones (2009, §4), fetched in the style of scikit-learn's ``fetch_*``.

* :func:`load_glass`, :func:`glass_split` — UCI forensic glass, 4 classes (§4.1).
* :func:`load_santafe_b`, :func:`load_breath_rate` — Santa Fe competition set B; the human
  breath-rate segment (§4.2).
* :func:`load_laser` — Santa Fe competition set A (far-infrared laser), a stand-in for the NMR
  laser series of §4.3, which has no known public copy; a user's own NMR laser file can be given.
* :func:`embed` — time-delay embedding for one-step-ahead prediction (§4.2, §4.3).

Each file is looked for in ``$PYMC_SFP_DATA``, then in the cache, then downloaded and checked;
see :mod:`pymc_sfp.datasets`.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from pymc_sfp._validation import (
    as_generator,
    check_bool,
    check_finite_rows,
    check_positive_int,
)
from pymc_sfp.datasets._fetch import RemoteFile, fetch, parse_table

__all__ = [
    "GlassData",
    "embed",
    "glass_split",
    "load_breath_rate",
    "load_glass",
    "load_laser",
    "load_santafe_b",
]

# Digests of the parsed values, computed from the copies in the project's shared data folder,
# whose raw-byte SHA-256s are: glass.data (with its added header line) 49de7f5a…0c9, b1.txt
# dc27dee4…7c5, b2.txt 92140a81…8a6, laser.dat f47df392…237. The glass digest is the same for
# the UCI original, which lacks the header line.
_GLASS = RemoteFile(
    folder="glass",
    name="glass.data",
    url="https://archive.ics.uci.edu/ml/machine-learning-databases/glass/glass.data",
    sha256="6fbf21af29fdaaccf78de3617609ccb4707259402d06725279d8a51f85a72fae",
    delimiter=",",
)
_SANTAFE_B = {
    1: RemoteFile(
        folder="santafe_b",
        name="b1.txt",
        url="https://physionet.org/files/santa-fe/1.0.0/b1.txt",
        sha256="9d7d6d930086593fff110cd716661abd04bad9d68f78d6ce69d0590ca02f9e04",
    ),
    2: RemoteFile(
        folder="santafe_b",
        name="b2.txt",
        url="https://physionet.org/files/santa-fe/1.0.0/b2.txt",
        sha256="a9712e6d596badb9273da69b02d84cde5442da985ef9718f6fee43b8d0c7a6c0",
    ),
}
# Pinned to the nolitsa commit the shared copy was read at, so the digest cannot drift.
_LASER = RemoteFile(
    folder="santafe_a",
    name="laser.dat",
    url=(
        "https://raw.githubusercontent.com/manu-mannattil/nolitsa/"
        "ccd9fab08a88fbc6ff63f0fae28730ccb74754de/examples/series/laser.dat"
    ),
    sha256="8b452f0aa22f23f41f55040caac7f411e091def693446f20c3d41076e25522bc",
)

_GLASS_FEATURES = ("RI", "Na", "Mg", "Al", "Si", "K", "Ca", "Ba", "Fe")
_GLASS_TARGETS = ("float window", "non-float window", "vehicle", "other")
#: UCI glass type -> class index of Berrones (2009, §4.1); type 7 (headlamps) is dropped.
_GLASS_CLASS_OF_TYPE = {1: 0, 2: 1, 3: 2, 5: 3, 6: 3}
#: Per-class (train, test) sizes stated in Berrones (2009, §4.1).
_GLASS_SPLIT_SIZES = {0: (30, 40), 1: (39, 37), 2: (9, 8), 3: (11, 11)}

#: Breath-rate segment of Berrones (2009, §4.2): b1.txt column 2, 1-based rows 12750..13749.
_BREATH_ROWS = slice(12749, 13749)
_BREATH_COLUMN = 1


def _standardize(values: np.ndarray) -> np.ndarray:
    """Zero mean and unit (population, ``ddof=0``) standard deviation along axis 0."""
    return (values - values.mean(axis=0)) / values.std(axis=0)


# --------------------------------------------------------------------------------------------
# Forensic glass (Berrones 2009, §4.1)
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class GlassData:
    """The forensic glass data as Berrones (2009, §4.1) uses it.

    Attributes
    ----------
    X : ndarray, shape (185, 9)
        Refractive index and the weight percent of the oxides of Na, Mg, Al, Si, K, Ca, Ba, Fe.
    y : ndarray of int, shape (185,)
        Class index into ``target_names``: 0 float-processed window (UCI type 1),
        1 non-float-processed window (2), 2 vehicle window (3), 3 other = containers (5) and
        tableware (6).
    feature_names : tuple of str
        The names of the columns of ``X``.
    target_names : tuple of str
        The names of the classes ``0..3``.
    raw_type : ndarray of int, shape (185,)
        The original UCI glass type of each row (1, 2, 3, 5 or 6).
    """

    X: np.ndarray
    y: np.ndarray
    feature_names: tuple[str, ...]
    target_names: tuple[str, ...]
    raw_type: np.ndarray


def load_glass(
    *,
    data_home: str | os.PathLike[str] | None = None,
    standardize: bool = True,
    download_if_missing: bool = True,
) -> GlassData:
    """Load the UCI forensic glass data with the classes of Berrones (2009, §4.1).

    The UCI "Glass Identification" data (B. German, 1987) has 214 rows. As in Berrones (2009,
    §4.1), following Ripley (1994) and Neal (1996), the 29 headlamp rows (type 7) are dropped and
    containers and tableware are merged into "other", leaving 185 rows in 4 classes of 70, 76,
    17 and 22 rows.

    Parameters
    ----------
    data_home : str or path-like, optional
        Cache directory; see :func:`~pymc_sfp.datasets.get_data_home`.
    standardize : bool, default True
        Scale each feature to zero mean and unit standard deviation over the 185 rows (population
        standard deviation, ``ddof=0``), as the paper does ("normalized to have zero mean and
        unit variance").
    download_if_missing : bool, default True
        Download ``glass.data`` from the UCI repository when no local or cached copy exists;
        otherwise raise ``OSError``.

    Returns
    -------
    GlassData
        ``X`` (185, 9), ``y``, ``feature_names``, ``target_names`` and ``raw_type``.

    Raises
    ------
    OSError
        If the file is missing and cannot be downloaded, or fails the checksum.
    """
    standardize = check_bool(standardize, "standardize")
    values = fetch(_GLASS, data_home, download_if_missing)
    raw_type = values[:, -1].astype(int)
    keep = np.isin(raw_type, list(_GLASS_CLASS_OF_TYPE))
    raw_type = raw_type[keep]
    X = values[keep, 1:-1]
    y = np.array([_GLASS_CLASS_OF_TYPE[t] for t in raw_type], dtype=int)
    return GlassData(
        X=_standardize(X) if standardize else X,
        y=y,
        feature_names=_GLASS_FEATURES,
        target_names=_GLASS_TARGETS,
        raw_type=raw_type,
    )


def glass_split(
    rng: np.random.Generator | int | None,
    *,
    data: GlassData | None = None,
    data_home: str | os.PathLike[str] | None = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """One random train/test split of the glass data with the paper's per-class sizes.

    Berrones (2009, §4.1) states the sizes: float-processed window glass 30 train / 40 test,
    non-float-processed window glass 39 / 37, vehicle glass 9 / 8, other 11 / 11 — 89 training
    and 96 test rows, all 185 rows used. Within each class the rows are assigned at random; each
    returned set is then shuffled. The paper repeats this for its 10 experiments (Table 2).

    Parameters
    ----------
    rng : numpy.random.Generator or int or None
        Random generator, or a seed for :func:`numpy.random.default_rng`.
    data : GlassData, optional
        The data to split (e.g. from :func:`load_glass` with ``standardize=False``). Its class
        counts must be 70, 76, 17 and 22. Default: ``load_glass(data_home=data_home)``.
    data_home : str or path-like, optional
        Cache directory, used only when ``data`` is not given.

    Returns
    -------
    X_train : ndarray, shape (89, 9)
    y_train : ndarray, shape (89,)
    X_test : ndarray, shape (96, 9)
    y_test : ndarray, shape (96,)

    Raises
    ------
    ValueError
        If ``data`` does not have the paper's class counts.
    """
    rng = as_generator(rng, "rng")
    if data is None:
        data = load_glass(data_home=data_home)
    counts = np.bincount(data.y, minlength=len(_GLASS_SPLIT_SIZES))
    expected = [n_train + n_test for n_train, n_test in _GLASS_SPLIT_SIZES.values()]
    if counts.tolist() != expected:
        raise ValueError(
            f"data must have the class counts {expected} of the 185-row glass data, "
            f"got {counts.tolist()}"
        )
    train, test = [], []
    for label, (n_train, _) in _GLASS_SPLIT_SIZES.items():
        rows = rng.permutation(np.flatnonzero(data.y == label))
        train.append(rows[:n_train])
        test.append(rows[n_train:])
    train_rows = rng.permutation(np.concatenate(train))
    test_rows = rng.permutation(np.concatenate(test))
    return data.X[train_rows], data.y[train_rows], data.X[test_rows], data.y[test_rows]


# --------------------------------------------------------------------------------------------
# Time series (Berrones 2009, §4.2 and §4.3)
# --------------------------------------------------------------------------------------------


def load_santafe_b(
    *,
    part: int = 1,
    data_home: str | os.PathLike[str] | None = None,
    download_if_missing: bool = True,
) -> np.ndarray:
    """Load Santa Fe competition set B (sleep apnea, 2 Hz), ``b1.txt`` or ``b2.txt``.

    Record ``slp60`` of the MIT-BIH Polysomnographic Database (Rigney et al. 1993), as
    distributed by PhysioNet's ``santa-fe`` database. ``b2`` follows ``b1`` directly in time.

    Parameters
    ----------
    part : {1, 2}, default 1
        Which file: ``b1.txt`` or ``b2.txt``.
    data_home : str or path-like, optional
        Cache directory; see :func:`~pymc_sfp.datasets.get_data_home`.
    download_if_missing : bool, default True
        Download the file from PhysioNet when no local or cached copy exists; otherwise raise
        ``OSError``.

    Returns
    -------
    ndarray, shape (17000, 3)
        Columns: heart rate (beats/min), chest volume / respiration (uncalibrated A/D units),
        blood oxygen concentration (uncalibrated A/D units).

    Raises
    ------
    ValueError
        If ``part`` is not 1 or 2.
    OSError
        If the file is missing and cannot be downloaded, or fails the checksum.
    """
    if isinstance(part, bool) or part not in _SANTAFE_B:
        raise ValueError(f"part must be 1 or 2, got {part!r}")
    return fetch(_SANTAFE_B[part], data_home, download_if_missing)


def load_breath_rate(
    *,
    data_home: str | os.PathLike[str] | None = None,
    normalize: bool = True,
    download_if_missing: bool = True,
) -> np.ndarray:
    """The human breath-rate series of Berrones (2009, §4.2).

    Santa Fe set B, the respiration (air flow) channel, "starting at measurement 12750, 1000
    data points": column 2 of ``b1.txt``, 1-based rows 12750..13749 — the approximately
    stationary stretch used by Kantz & Schreiber (2004). The paper trains on the first 500
    points and tests on the next 500.

    Parameters
    ----------
    data_home : str or path-like, optional
        Cache directory; see :func:`~pymc_sfp.datasets.get_data_home`.
    normalize : bool, default True
        Scale to zero mean and unit variance over these 1000 points (population variance,
        ``ddof=0``), as the paper does. Note that the statistics come from the whole segment,
        test half included, as the paper describes it.
    download_if_missing : bool, default True
        See :func:`load_santafe_b`.

    Returns
    -------
    ndarray, shape (1000,)
        Unnormalised, the series starts 6668, 684, 859, 2239, 4606 (A/D units).
    """
    normalize = check_bool(normalize, "normalize")
    series = load_santafe_b(part=1, data_home=data_home, download_if_missing=download_if_missing)
    series = series[_BREATH_ROWS, _BREATH_COLUMN]
    return _standardize(series) if normalize else series


def load_laser(
    *,
    data_home: str | os.PathLike[str] | None = None,
    path: str | os.PathLike[str] | None = None,
    normalize: bool = True,
    download_if_missing: bool = True,
) -> np.ndarray:
    """A laser time series for the NMR-laser experiment of Berrones (2009, §4.3).

    The paper's NMR laser series (Flepp et al.; Kantz & Schreiber 2004) has no known public copy.
    By default this returns the stand-in: Santa Fe competition set A (far-infrared NH3 laser,
    Huebner, Abraham & Weiss), the 9093-point excerpt ``laser.dat`` distributed with the
    ``nolitsa`` package; integers 0..255. Which part of set A the excerpt is, is not documented.
    A user with the NMR laser data can pass it as ``path``. The paper uses 200 training and 200
    test points with embedding dimension 2.

    Parameters
    ----------
    data_home : str or path-like, optional
        Cache directory; see :func:`~pymc_sfp.datasets.get_data_home`.
    path : str or path-like, optional
        A text file with one value per line (``#`` comments, blank lines and one header line
        allowed), e.g. the NMR laser series. It is read as is, without a checksum.
    normalize : bool, default True
        Scale to zero mean and unit variance over the whole series (population variance,
        ``ddof=0``).
    download_if_missing : bool, default True
        Download ``laser.dat`` from the nolitsa repository when ``path`` is not given and no local
        or cached copy exists; otherwise raise ``OSError``.

    Returns
    -------
    ndarray, shape (n,)
        The series; ``n = 9093`` for the default.

    Raises
    ------
    FileNotFoundError
        If ``path`` is given but is not a file.
    ValueError
        If the file at ``path`` is not one finite numeric value per line, or, with
        ``normalize=True``, holds a constant series.
    OSError
        If the default file is missing and cannot be downloaded, or fails the checksum.
    """
    normalize = check_bool(normalize, "normalize")
    if path is None:
        values = fetch(_LASER, data_home, download_if_missing)
    else:
        file = Path(path).expanduser()
        if not file.is_file():
            raise FileNotFoundError(f"path={str(path)!r} is not an existing file")
        try:
            values = parse_table(file, None)
        except ValueError as exc:
            raise ValueError(f"path={str(path)!r}: {exc}") from exc
        if values.shape[1] != 1:
            raise ValueError(
                f"path={str(path)!r} must hold one value per line, found {values.shape[1]} columns"
            )
        check_finite_rows(values, f"the series at path={str(path)!r}")
        if normalize and np.ptp(values) == 0:
            raise ValueError(
                f"the series at path={str(path)!r} is constant, so it cannot be scaled to unit "
                "variance; pass normalize=False to read it as is"
            )
    series = values[:, 0]
    return _standardize(series) if normalize else series


def embed(series: np.ndarray, window: int) -> tuple[np.ndarray, np.ndarray]:
    """Time-delay embedding for one-step-ahead prediction.

    Row ``t`` of the inputs is ``series[t : t + window]`` and its target is
    ``series[t + window]``: the previous ``window`` values predict the next one. Berrones (2009)
    uses ``window = 10`` for the breath rate (§4.2) and ``window = 2`` for the laser (§4.3).

    Parameters
    ----------
    series : array_like, shape (n,)
        The time series.
    window : int
        Embedding dimension, ``>= 1`` and ``< n``.

    Returns
    -------
    X : ndarray, shape (n - window, window)
    y : ndarray, shape (n - window,)

    Raises
    ------
    ValueError
        If ``series`` is not 1-D or has NaN or infinite values, ``window < 1`` or
        ``len(series) <= window``.
    """
    series = np.asarray(series, dtype=float)
    if series.ndim != 1:
        raise ValueError(f"series must be 1-D, got shape {series.shape}")
    check_finite_rows(series, "series")
    window = check_positive_int(window, "window")
    if len(series) <= window:
        raise ValueError(
            f"series must be longer than window: len(series)={len(series)}, window={window}"
        )
    X = np.lib.stride_tricks.sliding_window_view(series[:-1], window).copy()
    return X, series[window:].copy()
