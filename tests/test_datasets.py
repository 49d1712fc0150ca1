"""Tests for pymc_sfp.datasets: real-data loaders (offline), embedding and generators."""

from __future__ import annotations

import io
import os
import urllib.error
import urllib.request
from pathlib import Path

import numpy as np
import pytest

from pymc_sfp import datasets
from pymc_sfp.datasets import (
    GlassData,
    embed,
    get_data_home,
    glass_split,
    load_breath_rate,
    load_glass,
    load_laser,
    load_santafe_b,
    make_robot_arm,
    make_teacher_perceptron,
)

# The repository lives at <root>/main and the shared data at <root>/shared/data.
SHARED_DATA = Path(__file__).resolve().parents[2] / "shared" / "data"


def _no_network(url, *args, **kwargs):
    raise urllib.error.URLError(f"network disabled in tests ({url})")


@pytest.fixture(autouse=True)
def _offline(monkeypatch, tmp_path):
    """Every test: a fresh cache directory and no network."""
    monkeypatch.setenv(datasets.DATA_HOME_ENV_VAR, str(tmp_path / "cache"))
    monkeypatch.setattr(urllib.request, "urlopen", _no_network)


@pytest.fixture
def shared_data(monkeypatch) -> Path:
    """Point PYMC_SFP_DATA at the shared data folder unless it is already set."""
    if not os.environ.get(datasets.DATA_ENV_VAR):
        if not SHARED_DATA.is_dir():
            pytest.skip(f"no local data: set {datasets.DATA_ENV_VAR} or provide {SHARED_DATA}")
        monkeypatch.setenv(datasets.DATA_ENV_VAR, str(SHARED_DATA))
    return Path(os.environ[datasets.DATA_ENV_VAR])


@pytest.fixture
def empty_local(monkeypatch, tmp_path) -> Path:
    """PYMC_SFP_DATA pointing at an empty folder."""
    folder = tmp_path / "local"
    folder.mkdir()
    monkeypatch.setenv(datasets.DATA_ENV_VAR, str(folder))
    return folder


def _glass_lines(root: Path) -> list[str]:
    return (root / "glass" / "glass.data").read_text().splitlines(keepends=True)


# ---------------------------------------------------------------------------- data home


def test_get_data_home(monkeypatch, tmp_path):
    assert get_data_home() == tmp_path / "cache"
    assert (tmp_path / "cache").is_dir()
    assert get_data_home(tmp_path / "explicit") == tmp_path / "explicit"
    monkeypatch.delenv(datasets.DATA_HOME_ENV_VAR)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert get_data_home() == tmp_path / "home" / ".cache" / "pymc_sfp"


# ---------------------------------------------------------------------------- glass


def test_glass_raw_rows_and_types(shared_data):
    raw = datasets._fetch(datasets._GLASS, None, download_if_missing=False)
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


def test_load_glass_standardized(shared_data):
    raw = load_glass(standardize=False)
    glass = load_glass()
    np.testing.assert_allclose(glass.X.mean(axis=0), 0.0, atol=1e-12)
    np.testing.assert_allclose(glass.X.std(axis=0), 1.0, rtol=1e-12)
    np.testing.assert_allclose(glass.X * raw.X.std(axis=0) + raw.X.mean(axis=0), raw.X)
    np.testing.assert_array_equal(glass.y, raw.y)


def test_glass_uci_original_layout_passes_checksum(monkeypatch, tmp_path):
    if not SHARED_DATA.is_dir():
        pytest.skip(f"no shared data folder at {SHARED_DATA}")
    local = tmp_path / "local"
    (local / "glass").mkdir(parents=True)
    # The UCI file has no header line; the shared copy has one.
    (local / "glass" / "glass.data").write_text("".join(_glass_lines(SHARED_DATA)[1:]))
    monkeypatch.setenv(datasets.DATA_ENV_VAR, str(local))
    uci = load_glass(standardize=False)
    monkeypatch.setenv(datasets.DATA_ENV_VAR, str(SHARED_DATA))
    np.testing.assert_array_equal(uci.X, load_glass(standardize=False).X)


def test_glass_split_sizes_and_disjointness(shared_data):
    glass = load_glass()
    # Replace the features by row numbers to see which rows went where.
    indexed = GlassData(
        X=np.arange(185.0)[:, None],
        y=glass.y,
        feature_names=("row",),
        target_names=glass.target_names,
        raw_type=glass.raw_type,
    )
    X_train, y_train, X_test, y_test = glass_split(0, data=indexed)
    assert X_train.shape == (89, 1) and y_train.shape == (89,)
    assert X_test.shape == (96, 1) and y_test.shape == (96,)
    assert np.bincount(y_train).tolist() == [30, 39, 9, 11]
    assert np.bincount(y_test).tolist() == [40, 37, 8, 11]
    train_rows, test_rows = X_train[:, 0].astype(int), X_test[:, 0].astype(int)
    assert set(train_rows).isdisjoint(test_rows)
    assert sorted([*train_rows, *test_rows]) == list(range(185))
    np.testing.assert_array_equal(glass.y[train_rows], y_train)
    np.testing.assert_array_equal(glass.y[test_rows], y_test)

    X_train_full, _, X_test_full, _ = glass_split(np.random.default_rng(3))
    assert X_train_full.shape == (89, 9) and X_test_full.shape == (96, 9)
    again = glass_split(0, data=indexed)
    np.testing.assert_array_equal(again[0], X_train)
    assert not np.array_equal(glass_split(1, data=indexed)[0], X_train)


def test_glass_split_rejects_other_class_counts(shared_data):
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


def test_santafe_b(shared_data):
    b1 = load_santafe_b()
    assert b1.shape == (17000, 3)
    np.testing.assert_array_equal(b1[0], [76.53, 8320, 7771])
    assert load_santafe_b(part=2).shape == (17000, 3)
    with pytest.raises(ValueError, match="part must be 1 or 2"):
        load_santafe_b(part=3)


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


# ---------------------------------------------------------------------------- fetching


def test_checksum_mismatch_names_file_hashes_and_env_var(monkeypatch, tmp_path):
    if not SHARED_DATA.is_dir():
        pytest.skip(f"no shared data folder at {SHARED_DATA}")
    lines = _glass_lines(SHARED_DATA)
    assert lines[1].startswith("1,1.52101,13.64,")
    lines[1] = lines[1].replace("13.64", "13.65")
    corrupted = tmp_path / "local" / "glass" / "glass.data"
    corrupted.parent.mkdir(parents=True)
    corrupted.write_text("".join(lines))
    monkeypatch.setenv(datasets.DATA_ENV_VAR, str(tmp_path / "local"))
    actual = datasets._values_sha256(datasets._parse_table(corrupted, ","))
    with pytest.raises(OSError, match=r"Checksum mismatch for glass.data") as info:
        load_glass()
    message = str(info.value)
    assert str(corrupted) in message
    assert datasets._GLASS.sha256 in message
    assert actual in message and actual != datasets._GLASS.sha256
    assert datasets.DATA_ENV_VAR in message


def test_missing_file_and_failing_download(empty_local, tmp_path):
    with pytest.raises(OSError, match=r"downloading it from https://physionet.org") as info:
        load_breath_rate()
    message = str(info.value)
    assert "b1.txt" in message and datasets.DATA_ENV_VAR in message
    assert "network disabled" in message
    with pytest.raises(OSError, match="download_if_missing=False"):
        load_laser(download_if_missing=False)
    # Nothing, not even a partial download, is left in the cache.
    assert not any(p.is_file() for p in (tmp_path / "cache").rglob("*"))


def test_download_is_verified_and_cached(monkeypatch, empty_local, tmp_path):
    if not SHARED_DATA.is_dir():
        pytest.skip(f"no shared data folder at {SHARED_DATA}")
    payload = (SHARED_DATA / "santafe_a" / "laser.dat").read_bytes()
    urls = []

    def fake_urlopen(url, *args, **kwargs):
        urls.append(url)
        return io.BytesIO(payload)

    monkeypatch.setattr(urllib.request, "urlopen", fake_urlopen)
    series = load_laser(normalize=False)
    assert urls == [datasets._LASER.url]
    cached = tmp_path / "cache" / "santafe_a" / "laser.dat"
    assert cached.read_bytes() == payload
    # A second call uses the cache: the network is off again.
    monkeypatch.setattr(urllib.request, "urlopen", _no_network)
    np.testing.assert_array_equal(load_laser(normalize=False), series)

    # A corrupted cached copy is reported, not silently used.
    cached.write_bytes(payload.replace(b"\n72\n", b"\n73\n", 1))
    with pytest.raises(OSError, match=r"Checksum mismatch for laser.dat .*cached copy"):
        load_laser()


def test_corrupted_download_is_rejected(monkeypatch, empty_local, tmp_path):
    monkeypatch.setattr(urllib.request, "urlopen", lambda url, **kw: io.BytesIO(b"1\n2\n"))
    with pytest.raises(OSError, match=r"Checksum mismatch .*downloaded from https://"):
        load_laser()
    monkeypatch.setattr(urllib.request, "urlopen", lambda url, **kw: io.BytesIO(b"<html>"))
    with pytest.raises(OSError, match="not a valid data file"):
        load_glass()
    assert not any(p.is_file() for p in (tmp_path / "cache").rglob("*"))


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
        (np.arange(5), True, "window must be a positive integer"),
        (np.arange(5), 5, "series must be longer than window"),
        (np.zeros((3, 2)), 1, "series must be 1-D"),
    ],
)
def test_embed_errors(series, window, match):
    with pytest.raises(ValueError, match=match):
        embed(series, window)


# ---------------------------------------------------------------------------- generators


def test_robot_arm():
    X, Y = make_robot_arm(4000, rng=0, noise_sd=0.0)
    assert X.shape == (4000, 2) and Y.shape == (4000, 2)
    x1, x2 = X.T
    assert np.all((np.abs(x1) >= 0.453) & (np.abs(x1) <= 1.932))
    assert (x1 < 0).mean() == pytest.approx(0.5, abs=0.05)
    assert np.all((x2 >= 0.534) & (x2 <= 3.142))
    np.testing.assert_allclose(Y[:, 0], 2.0 * np.cos(x1) + 1.3 * np.cos(x1 + x2))
    np.testing.assert_allclose(Y[:, 1], 2.0 * np.sin(x1) + 1.3 * np.sin(x1 + x2))

    X_noisy, Y_noisy = make_robot_arm(4000, rng=0)
    np.testing.assert_array_equal(X_noisy, X)
    assert (Y_noisy - Y).std() == pytest.approx(0.05, rel=0.04)
    np.testing.assert_array_equal(make_robot_arm(5, rng=1)[1], make_robot_arm(5, rng=1)[1])


def test_teacher_perceptron():
    m, n_features, beta = 20000, 20, 1.0
    S, sigma, w = make_teacher_perceptron(m, n_features, rng=np.random.default_rng(5), beta=beta)
    assert S.shape == (m, n_features) and sigma.shape == (m,) and w.shape == (n_features,)
    assert set(np.unique(sigma)) == {-1.0, 1.0}
    clean = np.sign(S @ w / np.sqrt(n_features))
    flip_rate = np.mean(sigma != clean)
    expected = np.exp(-beta) / (1 + np.exp(-beta))
    assert abs(flip_rate - expected) < 4 * np.sqrt(expected * (1 - expected) / m)

    S, sigma, w = make_teacher_perceptron(500, 10, rng=1, beta=np.inf)
    np.testing.assert_array_equal(sigma, np.sign(S @ w))


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (lambda: make_robot_arm(0, rng=0), "n must be a positive integer"),
        (lambda: make_robot_arm(-3, rng=0), "n must be a positive integer"),
        (lambda: make_robot_arm(2.5, rng=0), "n must be a positive integer"),
        (lambda: make_robot_arm(10, rng=0, noise_sd=-0.1), "noise_sd must be"),
        (lambda: make_robot_arm(10, rng=0, noise_sd=np.nan), "noise_sd must be"),
        (lambda: make_teacher_perceptron(0, 5, rng=0, beta=1.0), "m must be"),
        (lambda: make_teacher_perceptron(5, 0, rng=0, beta=1.0), "n_features must be"),
        (lambda: make_teacher_perceptron(5, 5, rng=0, beta=0.0), "beta must be > 0"),
        (lambda: make_teacher_perceptron(5, 5, rng=0, beta=-1.0), "beta must be > 0"),
        (lambda: make_teacher_perceptron(5, 5, rng=0, beta=np.nan), "beta must be > 0"),
    ],
)
def test_generator_argument_errors(call, match):
    with pytest.raises(ValueError, match=match):
        call()
