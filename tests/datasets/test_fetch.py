"""Tests for pymc_sfp.datasets._fetch: data home, lookup order, checksums, download and retries.

All on small files the tests write themselves: nothing here needs the real data or the network
(see conftest.py, which also records retry pauses instead of sleeping).
"""

from __future__ import annotations

import hashlib
import http.client
import io
import urllib.error
import urllib.request
from pathlib import Path

import numpy as np
import pytest

from pymc_sfp import datasets
from pymc_sfp.datasets import clear_data_home, get_data_home, load_breath_rate, papers
from pymc_sfp.datasets._fetch import RemoteFile, fetch, parse_table, values_sha256

#: A tiny one-column series and its file, with a header line and a comment.
TINY_VALUES = [[1.5], [-2.0], [3.25]]
TINY_TEXT = "# a tiny series\nvalue\n1.5\n-2\n\n3.25\n"
#: The canonical CSV text of TINY_VALUES, whose SHA-256 is the expected digest.
TINY_CANONICAL = b"1.5\n-2.0\n3.25\n"
TINY_URL = "https://example.invalid/tiny/tiny.dat"


@pytest.fixture(autouse=True)
def _no_local_copy(monkeypatch):
    """Whatever the caller's environment says, no local copy unless a test sets one."""
    monkeypatch.delenv(datasets.DATA_ENV_VAR, raising=False)


@pytest.fixture
def tiny() -> RemoteFile:
    return RemoteFile(
        folder="tiny",
        name="tiny.dat",
        url=TINY_URL,
        sha256=hashlib.sha256(TINY_CANONICAL).hexdigest(),
    )


@pytest.fixture
def local(monkeypatch, tmp_path) -> Path:
    """PYMC_SFP_DATA pointing at an empty folder."""
    folder = tmp_path / "local"
    folder.mkdir()
    monkeypatch.setenv(datasets.DATA_ENV_VAR, str(folder))
    return folder


def _write(root: Path, remote: RemoteFile, text: str | bytes) -> Path:
    path = root / remote.folder / remote.name
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text)
    return path


def _serve(monkeypatch, *responses) -> list[str]:
    """Make urlopen answer with ``responses`` in turn (bytes, or an exception to raise).

    Returns the list of URLs asked for; a request beyond the responses fails the test.
    """
    urls: list[str] = []
    queue = list(responses)

    def fake_urlopen(url, *args, **kwargs):
        urls.append(url)
        if not queue:
            raise AssertionError(f"unexpected download of {url}")
        response = queue.pop(0)
        if isinstance(response, BaseException):
            raise response
        return response if hasattr(response, "read") else io.BytesIO(response)

    monkeypatch.setattr(urllib.request, "urlopen", fake_urlopen)
    return urls


def _cache_files(tmp_path) -> list[Path]:
    return [p for p in (tmp_path / "cache").rglob("*") if p.is_file()]


# ---------------------------------------------------------------------------- data home


def test_get_data_home(monkeypatch, tmp_path):
    assert get_data_home() == tmp_path / "cache"
    assert (tmp_path / "cache").is_dir()
    assert get_data_home(tmp_path / "explicit") == tmp_path / "explicit"
    monkeypatch.delenv(datasets.DATA_HOME_ENV_VAR)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert get_data_home() == tmp_path / "home" / ".cache" / "pymc_sfp"


def test_clear_data_home(monkeypatch, tmp_path, tiny, local):
    local_copy = _write(local, tiny, TINY_TEXT)
    cached = _write(get_data_home(), tiny, TINY_TEXT)
    clear_data_home()
    assert not (tmp_path / "cache").exists()
    assert local_copy.read_text() == TINY_TEXT  # the local copy is not the cache
    clear_data_home()  # already gone: nothing to do

    explicit = tmp_path / "explicit"
    _write(get_data_home(explicit), tiny, TINY_TEXT)
    clear_data_home(str(explicit))
    assert not explicit.exists()

    monkeypatch.delenv(datasets.DATA_HOME_ENV_VAR)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    _write(get_data_home("~/data"), tiny, TINY_TEXT)
    clear_data_home("~/data")
    assert not (tmp_path / "home" / "data").exists()

    # After clearing, the file is downloaded again.
    monkeypatch.delenv(datasets.DATA_ENV_VAR)
    monkeypatch.setenv(datasets.DATA_HOME_ENV_VAR, str(tmp_path / "cache"))
    urls = _serve(monkeypatch, TINY_TEXT.encode())
    np.testing.assert_array_equal(fetch(tiny, None, download_if_missing=True), TINY_VALUES)
    assert urls == [TINY_URL] and cached.read_text() == TINY_TEXT


def test_an_empty_data_home_is_refused_not_the_working_directory(monkeypatch, tmp_path):
    # Path("") is ".": clearing it would delete the working directory's contents.
    keep = tmp_path / "work" / "keep.txt"
    keep.parent.mkdir()
    keep.write_text("mine")
    monkeypatch.chdir(keep.parent)
    for call in (get_data_home, clear_data_home):
        with pytest.raises(ValueError, match="data_home is an empty path"):
            call("")
    with pytest.raises(ValueError, match="data_home is an empty path"):
        load_breath_rate(data_home="", download_if_missing=False)
    assert keep.read_text() == "mine"


def test_clear_data_home_keeps_a_local_copy_inside_the_cache(monkeypatch, tmp_path, tiny):
    cache = tmp_path / "cache"
    local_copy = _write(cache / "local", tiny, TINY_TEXT)
    monkeypatch.setenv(datasets.DATA_ENV_VAR, str(cache / "local"))
    with pytest.raises(ValueError, match=r"Not deleting .*PYMC_SFP_DATA"):
        clear_data_home()
    monkeypatch.setenv(datasets.DATA_ENV_VAR, str(cache))
    with pytest.raises(ValueError, match=r"Not deleting"):
        clear_data_home()
    assert local_copy.read_text() == TINY_TEXT


def test_download_if_missing_must_be_a_bool(tiny):
    with pytest.raises(TypeError, match="download_if_missing must be True or False"):
        fetch(tiny, None, download_if_missing="no")


# ---------------------------------------------------------------------------- checksum


def test_values_sha256_is_that_of_the_canonical_csv_text():
    assert values_sha256(np.array(TINY_VALUES)) == hashlib.sha256(TINY_CANONICAL).hexdigest()
    table = np.array([[1.0, 2.5e-7], [-3.0, 1e22]])
    expected = hashlib.sha256(b"1.0,2.5e-07\n-3.0,1e+22\n").hexdigest()
    assert values_sha256(table) == expected


def test_parse_table(tmp_path):
    path = tmp_path / "table.csv"
    path.write_text("a,b\r\n1, 2 \r\n# comment\r\n\r\n3,4  # trailing comment\r\n")
    np.testing.assert_array_equal(parse_table(path, ","), [[1.0, 2.0], [3.0, 4.0]])
    path.write_text("1 2\n3\n")
    with pytest.raises(ValueError, match="line 2 has 1 columns, expected 2"):
        parse_table(path, None)
    path.write_text("header\nsecond header\n1\n")
    with pytest.raises(ValueError, match="line 2 is not numeric"):
        parse_table(path, None)
    path.write_text("header\n# nothing else\n")
    with pytest.raises(ValueError, match="no numeric data rows"):
        parse_table(path, None)


@pytest.mark.parametrize(
    "text",
    [
        TINY_TEXT,
        "1.5\n-2\n3.25\n",  # no header (like the UCI glass file)
        "1.50\r\n-2.0 \r\n3.25",  # other line endings, trailing space, no final newline
    ],
)
def test_layout_does_not_change_the_checksum(tiny, local, text):
    _write(local, tiny, text)
    np.testing.assert_array_equal(fetch(tiny, None, download_if_missing=False), TINY_VALUES)


def test_checksum_mismatch_names_file_hashes_and_env_var(tiny, local):
    corrupted = _write(local, tiny, TINY_TEXT.replace("3.25", "3.26"))
    actual = values_sha256(parse_table(corrupted, None))
    with pytest.raises(OSError, match=r"Checksum mismatch for tiny.dat") as info:
        fetch(tiny, None, download_if_missing=False)
    message = str(info.value)
    assert str(corrupted) in message
    assert tiny.sha256 in message
    assert actual in message and actual != tiny.sha256
    assert datasets.DATA_ENV_VAR in message
    # The user's own copy is to be replaced, not deleted; a cached one may be deleted.
    assert "Replace it with an intact copy" in message and "delete" not in message.lower()


# ---------------------------------------------------------------------------- lookup order


def test_local_copy_comes_first_then_the_cache(monkeypatch, tmp_path, tiny, local):
    # A corrupted cached copy shows which one was read.
    cached = _write(get_data_home(), tiny, "1\n")
    _write(local, tiny, TINY_TEXT)
    np.testing.assert_array_equal(fetch(tiny, None, download_if_missing=False), TINY_VALUES)

    # No file in the local folder, or PYMC_SFP_DATA unset or empty: the cache is read.
    for value in (str(tmp_path / "elsewhere"), ""):
        monkeypatch.setenv(datasets.DATA_ENV_VAR, value)
        with pytest.raises(OSError, match=r"Checksum mismatch for tiny.dat .*cached copy"):
            fetch(tiny, None, download_if_missing=False)
    monkeypatch.delenv(datasets.DATA_ENV_VAR)
    cached.write_text(TINY_TEXT)
    np.testing.assert_array_equal(fetch(tiny, None, download_if_missing=False), TINY_VALUES)

    # data_home overrides the cache directory; "~" in PYMC_SFP_DATA is expanded.
    with pytest.raises(OSError, match="download_if_missing=False"):
        fetch(tiny, tmp_path / "other_cache", download_if_missing=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv(datasets.DATA_ENV_VAR, "~/local")
    _write(local, tiny, TINY_TEXT)
    np.testing.assert_array_equal(
        fetch(tiny, tmp_path / "other_cache", download_if_missing=False), TINY_VALUES
    )


def test_loaders_read_their_registry_entry(monkeypatch, tiny, local):
    """A loader fetches its file through the registry entry (here pointed at the tiny file)."""
    monkeypatch.setattr(papers, "_LASER", tiny)
    _write(local, tiny, TINY_TEXT)
    np.testing.assert_array_equal(papers.load_laser(normalize=False), np.ravel(TINY_VALUES))
    normalized = datasets.load_laser()
    assert normalized.std() == pytest.approx(1.0)


# ---------------------------------------------------------------------------- download


def test_missing_file_and_failing_download(monkeypatch, local, tmp_path, offline):
    urls = _serve(monkeypatch, *[urllib.error.URLError("network disabled")] * 3)
    with pytest.warns(UserWarning, match="retrying") as warned:
        with pytest.raises(OSError, match=r"downloading it from https://physionet.org") as info:
            load_breath_rate()
    message = str(info.value)
    assert "b1.txt" in message and datasets.DATA_ENV_VAR in message
    assert "network disabled" in message
    assert urls == [papers._SANTAFE_B[1].url] * 3 and len(warned) == 2
    with pytest.raises(OSError, match="download_if_missing=False"):
        datasets.load_laser(download_if_missing=False)
    # Nothing, not even a partial download, is left in the cache.
    assert not _cache_files(tmp_path)


def test_download_is_verified_and_cached(monkeypatch, tmp_path, tiny):
    urls = _serve(monkeypatch, TINY_TEXT.encode())
    values = fetch(tiny, None, download_if_missing=True)
    np.testing.assert_array_equal(values, TINY_VALUES)
    assert urls == [TINY_URL]
    cached = tmp_path / "cache" / "tiny" / "tiny.dat"
    assert cached.read_text() == TINY_TEXT
    assert _cache_files(tmp_path) == [cached]  # no temporary file left
    # A second call uses the cache.
    np.testing.assert_array_equal(fetch(tiny, None, download_if_missing=True), values)
    assert urls == [TINY_URL]

    # A corrupted cached copy is reported, not silently used.
    cached.write_text(TINY_TEXT.replace("-2", "-3"))
    with pytest.raises(OSError, match=r"Checksum mismatch for tiny.dat .*cached copy"):
        fetch(tiny, None, download_if_missing=True)


def test_corrupted_download_is_rejected(monkeypatch, local, tmp_path):
    monkeypatch.setattr(urllib.request, "urlopen", lambda url, **kw: io.BytesIO(b"1\n2\n"))
    with pytest.raises(OSError, match=r"Checksum mismatch .*downloaded from https://"):
        datasets.load_laser()
    monkeypatch.setattr(urllib.request, "urlopen", lambda url, **kw: io.BytesIO(b"<html>"))
    with pytest.raises(OSError, match="not a valid data file"):
        datasets.load_glass()
    assert not _cache_files(tmp_path)


class _DroppedConnection:
    """A response whose body breaks off mid-transfer."""

    def __enter__(self):
        return self

    def __exit__(self, *exc_info):
        return False

    def read(self):
        raise http.client.IncompleteRead(b"1.5\n", 10)


@pytest.mark.parametrize(
    "failure",
    [
        urllib.error.URLError("connection refused"),
        TimeoutError("timed out"),
        urllib.error.HTTPError(TINY_URL, 503, "Service Unavailable", None, None),
        urllib.error.HTTPError(TINY_URL, 429, "Too Many Requests", None, None),
        _DroppedConnection(),
    ],
    ids=["no-connection", "timeout", "http-503", "http-429", "incomplete-read"],
)
def test_transient_failures_are_retried(monkeypatch, tmp_path, tiny, offline, failure):
    urls = _serve(monkeypatch, failure, failure, TINY_TEXT.encode())
    with pytest.warns(UserWarning, match=r"retrying in \d s \(attempt \d of 3\)") as warned:
        values = fetch(tiny, None, download_if_missing=True)
    np.testing.assert_array_equal(values, TINY_VALUES)
    assert urls == [TINY_URL] * 3
    assert offline == [1.0, 2.0]  # the pauses double
    assert [str(w.message).count(TINY_URL) for w in warned] == [1, 1]
    assert (tmp_path / "cache" / "tiny" / "tiny.dat").read_text() == TINY_TEXT


def test_retries_give_up_after_three_attempts(monkeypatch, tmp_path, tiny, offline):
    urls = _serve(monkeypatch, *[TimeoutError("timed out")] * 3)
    with pytest.warns(UserWarning, match="retrying"):
        with pytest.raises(OSError, match=r"downloading it from .* failed \(timed out\)"):
            fetch(tiny, None, download_if_missing=True)
    assert len(urls) == 3 and offline == [1.0, 2.0]
    assert not _cache_files(tmp_path)


@pytest.mark.parametrize("status", [403, 404, 410])
def test_permanent_http_errors_are_not_retried(monkeypatch, tiny, offline, status):
    error = urllib.error.HTTPError(TINY_URL, status, "No", None, None)
    urls = _serve(monkeypatch, error)
    with pytest.raises(OSError, match=rf"HTTP Error {status}"):
        fetch(tiny, None, download_if_missing=True)
    assert urls == [TINY_URL] and offline == []
