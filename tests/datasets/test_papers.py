"""Tests for pymc_sfp.datasets.papers: the papers' real data sets, the glass split and embedding.

Tests marked ``dataset`` read the real data through the ``shared_data`` fixture (tests/conftest.py)
and skip when it is absent; the others run on small tables they build themselves.
"""

from __future__ import annotations

import numpy as np
import pytest

from pymc_sfp import datasets
from pymc_sfp.datasets import (
    GlassData,
    embed,
    glass_split,
    load_breath_rate,
    load_glass,
    load_laser,
    load_santafe_b,
    papers,
)
from pymc_sfp.datasets._fetch import RemoteFile, fetch, values_sha256

#: Labels with the class counts of the 185-row glass data, in a fixed scrambled order.
PAPER_LABELS = np.random.default_rng(185).permutation(np.repeat([0, 1, 2, 3], [70, 76, 17, 22]))


def _indexed(y: np.ndarray) -> GlassData:
    """Glass-shaped data whose one feature is the row number, to see which rows went where."""
    return GlassData(
        X=np.arange(float(len(y)))[:, None],
        y=y,
        feature_names=("row",),
        target_names=papers._GLASS_TARGETS,
        raw_type=np.zeros(len(y), dtype=int),
    )


# ---------------------------------------------------------------------------- glass


@pytest.mark.dataset("glass")
def test_glass_raw_rows_and_types(shared_data):
    raw = fetch(papers._GLASS, None, download_if_missing=False)
    assert raw.shape == (214, 11)
    types, counts = np.unique(raw[:, -1].astype(int), return_counts=True)
    assert dict(zip(types.tolist(), counts.tolist(), strict=True)) == {
        1: 70,
        2: 76,
        3: 17,
        5: 13,
        6: 9,
        7: 29,
    }


@pytest.mark.dataset("glass")
def test_load_glass_classes(shared_data):
    glass = load_glass(standardize=False)
    assert glass.X.shape == (185, 9)
    assert glass.y.dtype.kind == "i"
    assert np.bincount(glass.y).tolist() == [70, 76, 17, 22]
    assert np.bincount(glass.raw_type).tolist() == [0, 70, 76, 17, 0, 13, 9]
    assert np.all(glass.y[np.isin(glass.raw_type, [5, 6])] == 3)
    assert glass.feature_names == ("RI", "Na", "Mg", "Al", "Si", "K", "Ca", "Ba", "Fe")
    assert len(glass.target_names) == 4
    np.testing.assert_allclose(
        glass.X[0], [1.52101, 13.64, 4.49, 1.10, 71.78, 0.06, 8.75, 0.00, 0.00]
    )


@pytest.mark.dataset("glass")
def test_load_glass_standardized(shared_data):
    raw = load_glass(standardize=False)
    glass = load_glass()
    np.testing.assert_allclose(glass.X.mean(axis=0), 0.0, atol=1e-12)
    np.testing.assert_allclose(glass.X.std(axis=0), 1.0, rtol=1e-12)
    np.testing.assert_allclose(glass.X * raw.X.std(axis=0) + raw.X.mean(axis=0), raw.X)
    np.testing.assert_array_equal(glass.y, raw.y)


def test_load_glass_on_a_small_table(monkeypatch, tmp_path):
    """Type 7 (headlamps) is dropped and types 5 and 6 merged, on a table written here."""
    types = [1, 7, 2, 3, 5, 6, 1]
    rows = [[i + 1, 1.5 + i, *range(i, i + 8), t] for i, t in enumerate(types)]
    text = "".join(",".join(map(str, row)) + "\n" for row in rows)
    digest = values_sha256(np.array(rows, dtype=float))
    small = RemoteFile(
        folder="glass", name="glass.data", url="unused", sha256=digest, delimiter=","
    )
    monkeypatch.setattr(papers, "_GLASS", small)
    (tmp_path / "local" / "glass").mkdir(parents=True)
    (tmp_path / "local" / "glass" / "glass.data").write_text(text)
    monkeypatch.setenv(datasets.DATA_ENV_VAR, str(tmp_path / "local"))

    glass = load_glass(standardize=False)
    assert glass.raw_type.tolist() == [1, 2, 3, 5, 6, 1]
    assert glass.y.tolist() == [0, 1, 2, 3, 3, 0]
    kept = [row for row in rows if row[-1] != 7]
    np.testing.assert_array_equal(glass.X, np.array(kept, dtype=float)[:, 1:-1])
    standardized = load_glass().X
    np.testing.assert_allclose(standardized.mean(axis=0), 0.0, atol=1e-12)
    np.testing.assert_allclose(standardized.std(axis=0), 1.0, rtol=1e-12)


@pytest.mark.dataset("glass")
def test_glass_uci_original_layout_passes_checksum(monkeypatch, tmp_path, shared_data):
    lines = (shared_data / "glass" / "glass.data").read_text().splitlines(keepends=True)
    local = tmp_path / "local"
    (local / "glass").mkdir(parents=True)
    # The UCI file has no header line; the shared copy has one.
    (local / "glass" / "glass.data").write_text("".join(lines[1:]))
    monkeypatch.setenv(datasets.DATA_ENV_VAR, str(local))
    uci = load_glass(standardize=False)
    monkeypatch.setenv(datasets.DATA_ENV_VAR, str(shared_data))
    np.testing.assert_array_equal(uci.X, load_glass(standardize=False).X)


@pytest.mark.dataset("glass")
def test_glass_checksum_mismatch_on_a_changed_value(monkeypatch, tmp_path, shared_data):
    lines = (shared_data / "glass" / "glass.data").read_text().splitlines(keepends=True)
    assert lines[1].startswith("1,1.52101,13.64,")
    lines[1] = lines[1].replace("13.64", "13.65")
    corrupted = tmp_path / "local" / "glass" / "glass.data"
    corrupted.parent.mkdir(parents=True)
    corrupted.write_text("".join(lines))
    monkeypatch.setenv(datasets.DATA_ENV_VAR, str(tmp_path / "local"))
    with pytest.raises(OSError, match=r"Checksum mismatch for glass.data") as info:
        load_glass()
    assert str(corrupted) in str(info.value) and papers._GLASS.sha256 in str(info.value)


def _check_paper_split(labels: np.ndarray) -> None:
    """glass_split on row-numbered data: the paper's sizes, disjoint, complete, reproducible."""
    indexed = _indexed(labels)
    X_train, y_train, X_test, y_test = glass_split(0, data=indexed)
    assert X_train.shape == (89, 1) and y_train.shape == (89,)
    assert X_test.shape == (96, 1) and y_test.shape == (96,)
    assert np.bincount(y_train).tolist() == [30, 39, 9, 11]
    assert np.bincount(y_test).tolist() == [40, 37, 8, 11]
    train_rows, test_rows = X_train[:, 0].astype(int), X_test[:, 0].astype(int)
    assert set(train_rows).isdisjoint(test_rows)
    assert sorted([*train_rows, *test_rows]) == list(range(185))
    np.testing.assert_array_equal(labels[train_rows], y_train)
    np.testing.assert_array_equal(labels[test_rows], y_test)
    again = glass_split(0, data=indexed)
    np.testing.assert_array_equal(again[0], X_train)
    assert not np.array_equal(glass_split(1, data=indexed)[0], X_train)


def test_glass_split_sizes_and_disjointness_on_paper_labels():
    _check_paper_split(PAPER_LABELS)


@pytest.mark.dataset("glass")
def test_glass_split_sizes_and_disjointness(shared_data):
    _check_paper_split(load_glass().y)
    X_train_full, y_train, X_test_full, y_test = glass_split(np.random.default_rng(3))
    assert X_train_full.shape == (89, 9) and X_test_full.shape == (96, 9)
    assert np.bincount(y_train).tolist() == [30, 39, 9, 11]
    assert np.bincount(y_test).tolist() == [40, 37, 8, 11]


def test_glass_split_rejects_other_class_counts():
    with pytest.raises(ValueError, match="class counts"):
        glass_split(0, data=_indexed(PAPER_LABELS[:100]))


@pytest.mark.dataset("glass")
def test_glass_split_rejects_other_class_counts_of_the_real_data(shared_data):
    glass = load_glass()
    subset = GlassData(
        X=glass.X[:100],
        y=glass.y[:100],
        feature_names=glass.feature_names,
        target_names=glass.target_names,
        raw_type=glass.raw_type[:100],
    )
    with pytest.raises(ValueError, match="class counts"):
        glass_split(0, data=subset)


# ---------------------------------------------------------------------------- Santa Fe B


@pytest.mark.dataset("santafe_b")
def test_santafe_b(shared_data):
    b1 = load_santafe_b()
    assert b1.shape == (17000, 3)
    np.testing.assert_array_equal(b1[0], [76.53, 8320, 7771])
    assert load_santafe_b(part=2).shape == (17000, 3)


def test_santafe_b_part_must_be_1_or_2():
    for part in (3, True):
        with pytest.raises(ValueError, match="part must be 1 or 2"):
            load_santafe_b(part=part)


@pytest.mark.dataset("santafe_b")
def test_breath_rate(shared_data):
    raw = load_breath_rate(normalize=False)
    assert raw.shape == (1000,)
    np.testing.assert_array_equal(raw[:5], [6668, 684, 859, 2239, 4606])
    assert raw.min() == -3404 and raw.max() == 14282
    normalized = load_breath_rate()
    assert abs(normalized.mean()) < 1e-12
    assert normalized.std() == pytest.approx(1.0, rel=1e-12)
    np.testing.assert_allclose(normalized, (raw - raw.mean()) / raw.std())


# ---------------------------------------------------------------------------- laser


@pytest.mark.dataset("laser")
def test_laser(shared_data):
    raw = load_laser(normalize=False)
    assert raw.shape == (9093,)
    assert raw.min() >= 0 and raw.max() <= 255
    np.testing.assert_array_equal(raw, np.round(raw))
    np.testing.assert_array_equal(raw[:4], [72, 178, 122, 36])
    normalized = load_laser()
    assert abs(normalized.mean()) < 1e-12
    assert normalized.std() == pytest.approx(1.0, rel=1e-12)


def test_laser_user_path(tmp_path):
    path = tmp_path / "nmr.dat"
    path.write_text("# NMR laser\n\n1.5\n-2\n# mid comment\n3.25\n")
    np.testing.assert_array_equal(load_laser(path=path, normalize=False), [1.5, -2.0, 3.25])
    assert load_laser(path=str(path)).std() == pytest.approx(1.0)

    with pytest.raises(FileNotFoundError, match="path="):
        load_laser(path=tmp_path / "missing.dat")
    two_columns = tmp_path / "two.dat"
    two_columns.write_text("1 2\n3 4\n")
    with pytest.raises(ValueError, match=r"path=.*one value per line"):
        load_laser(path=two_columns)
    garbage = tmp_path / "garbage.dat"
    garbage.write_text("1\nabc\n")
    with pytest.raises(ValueError, match=r"path=.*line 2 is not numeric"):
        load_laser(path=garbage)
    # float() reads "nan" and "inf": they are numbers, not data.
    not_finite = tmp_path / "not_finite.dat"
    not_finite.write_text("1\nnan\n3\ninf\n")
    with pytest.raises(ValueError, match=r"path=.*NaN or infinite values in 2 row\(s\): \[1, 3\]"):
        load_laser(path=not_finite, normalize=False)
    constant = tmp_path / "constant.dat"
    constant.write_text("2\n2\n2\n")
    with pytest.raises(ValueError, match=r"path=.*is constant.*normalize=False"):
        load_laser(path=constant)
    np.testing.assert_array_equal(load_laser(path=constant, normalize=False), [2.0, 2.0, 2.0])
    with pytest.raises(TypeError, match="normalize must be True or False"):
        load_laser(path=constant, normalize="no")


# ---------------------------------------------------------------------------- embed


def test_embed():
    X, y = embed([0.0, 1.0, 2.0, 3.0, 4.0], 2)
    np.testing.assert_array_equal(X, [[0, 1], [1, 2], [2, 3]])
    np.testing.assert_array_equal(y, [2, 3, 4])
    X, y = embed(np.arange(3), 1)
    np.testing.assert_array_equal(X, [[0], [1]])
    np.testing.assert_array_equal(y, [1, 2])


@pytest.mark.parametrize(
    ("series", "window", "match"),
    [
        (np.arange(5), 0, "window must be a positive integer"),
        (np.arange(5), 1.5, "window must be a positive integer"),
        (np.arange(5), 5, "series must be longer than window"),
        (np.zeros((3, 2)), 1, "series must be 1-D"),
        ([0.0, np.nan, 2.0, 3.0], 1, r"series has NaN or infinite values in 1 row\(s\): \[1\]"),
    ],
)
def test_embed_errors(series, window, match):
    with pytest.raises(ValueError, match=match):
        embed(series, window)


def test_embed_window_of_the_wrong_kind():
    for window in (True, "2"):
        with pytest.raises(TypeError, match="window must be a positive integer"):
            embed(np.arange(5), window)
