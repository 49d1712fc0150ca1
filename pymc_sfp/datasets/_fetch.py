"""Fetching the papers' data files: local copy, cache, download with retries, checksum.

The lookup order and the checksum are described in :mod:`pymc_sfp.datasets`. The design follows
scikit-learn's ``sklearn.datasets`` (``_base.py``: ``get_data_home``, ``clear_data_home`` and
remote files with a checksum; ``_openml.py``: retries on network errors, errors that say what to
do).
"""

from __future__ import annotations

import hashlib
import http.client
import os
import shutil
import tempfile
import time
import urllib.error
import urllib.request
import warnings
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from pymc_sfp._validation import check_bool

__all__ = [
    "DATA_ENV_VAR",
    "DATA_HOME_ENV_VAR",
    "RemoteFile",
    "clear_data_home",
    "fetch",
    "get_data_home",
    "parse_table",
    "values_sha256",
]

#: Environment variable naming a local copy of the data, laid out like the shared data folder.
DATA_ENV_VAR = "PYMC_SFP_DATA"
#: Environment variable overriding the default cache directory ``~/.cache/pymc_sfp``.
DATA_HOME_ENV_VAR = "PYMC_SFP_DATA_HOME"

_DOWNLOAD_TIMEOUT_S = 60.0
# A download is tried this many times in all; the pause before the first retry is doubled
# before each further one (1 s, 2 s), so a server that is briefly unavailable is waited out
# while a machine without network gives up within seconds.
_DOWNLOAD_ATTEMPTS = 3
_RETRY_DELAY_S = 1.0
# HTTP statuses that say "try again later"; any other (404, 403, ...) will not change on retry.
_TRANSIENT_HTTP_STATUS = frozenset({408, 429, 500, 502, 503, 504})


@dataclass(frozen=True)
class RemoteFile:
    """One data file: where it lives locally and remotely, and its expected digest."""

    folder: str
    name: str
    url: str
    #: SHA-256 of the canonical CSV text of the parsed values (see :func:`values_sha256`).
    sha256: str
    delimiter: str | None = None


def _data_home_path(data_home: str | os.PathLike[str] | None) -> Path:
    """The cache directory :func:`get_data_home` would return, without creating it."""
    if data_home is None:
        data_home = os.environ.get(DATA_HOME_ENV_VAR) or Path("~") / ".cache" / "pymc_sfp"
    elif not os.fspath(data_home):
        # Path("") is the working directory, which clear_data_home would then delete.
        raise ValueError(
            "data_home is an empty path; give a directory for the cache, or None for "
            f"${DATA_HOME_ENV_VAR} or ~/.cache/pymc_sfp"
        )
    return Path(data_home).expanduser()


def get_data_home(data_home: str | os.PathLike[str] | None = None) -> Path:
    """Return the cache directory for downloaded data, creating it if needed.

    Parameters
    ----------
    data_home : str or path-like, optional
        The directory to use. When omitted, ``$PYMC_SFP_DATA_HOME`` if set and non-empty,
        otherwise ``~/.cache/pymc_sfp``. A leading ``~`` is expanded.

    Returns
    -------
    pathlib.Path
        The (existing) cache directory.
    """
    path = _data_home_path(data_home)
    path.mkdir(parents=True, exist_ok=True)
    return path


def clear_data_home(data_home: str | os.PathLike[str] | None = None) -> None:
    """Delete the cache directory and everything in it.

    The next loader call downloads its file again (or reads it from ``$PYMC_SFP_DATA``). The
    local copy that ``$PYMC_SFP_DATA`` names is never touched. Nothing happens if the directory
    does not exist.

    Parameters
    ----------
    data_home : str or path-like, optional
        The cache directory to delete; resolved as in :func:`get_data_home`.

    Raises
    ------
    ValueError
        If ``data_home`` is an empty path, or if the directory holds the local copy that
        ``$PYMC_SFP_DATA`` names (or is that copy).
    """
    path = _data_home_path(data_home)
    local_root = os.environ.get(DATA_ENV_VAR)
    if local_root and path.exists():
        local = Path(local_root).expanduser().resolve()
        if local == path.resolve() or path.resolve() in local.parents:
            raise ValueError(
                f"Not deleting {path}: it holds the local copy of the data that "
                f"${DATA_ENV_VAR}={local_root!r} names. Delete the cache's data folders "
                "yourself, or move the local copy out of the cache."
            )
    if path.exists():
        shutil.rmtree(path)


def parse_table(path: Path, delimiter: str | None) -> np.ndarray:
    """Parse a numeric text table into a 2-D float array.

    ``#`` starts a comment; blank lines are skipped; one non-numeric line before the first data
    row is taken as a header and skipped. Raises ``ValueError`` on anything else.
    """
    rows: list[list[float]] = []
    header_skipped = False
    with open(path, encoding="utf-8") as stream:
        for lineno, line in enumerate(stream, start=1):
            text = line.split("#", 1)[0].strip()
            if not text:
                continue
            try:
                row = [float(field) for field in text.split(delimiter)]
            except ValueError:
                if rows or header_skipped:
                    raise ValueError(f"line {lineno} is not numeric: {line.rstrip()!r}") from None
                header_skipped = True
                continue
            if rows and len(row) != len(rows[0]):
                raise ValueError(
                    f"line {lineno} has {len(row)} columns, expected {len(rows[0])} "
                    "like the first data line"
                )
            rows.append(row)
    if not rows:
        raise ValueError("no numeric data rows")
    return np.array(rows, dtype=float)


def values_sha256(values: np.ndarray) -> str:
    """SHA-256 of the canonical CSV text of a 2-D array.

    Rows joined by ``"\\n"`` (with a final ``"\\n"``), values by ``","``, each value written as
    Python's ``repr(float(v))``: a digest of the values, blind to the file's layout.
    """
    text = "".join(",".join(map(repr, row)) + "\n" for row in values.tolist())
    return hashlib.sha256(text.encode("ascii")).hexdigest()


def _verified_values(path: Path, remote: RemoteFile, origin: str, remedy: str) -> np.ndarray:
    """Parse ``path`` and check its values' digest; raise ``OSError`` ending with ``remedy``."""
    try:
        values = parse_table(path, remote.delimiter)
    except (ValueError, UnicodeDecodeError) as exc:
        raise OSError(
            f"{remote.name} at {path} ({origin}) is not a valid data file: {exc}. {remedy}"
        ) from exc
    actual = values_sha256(values)
    if actual != remote.sha256:
        raise OSError(
            f"Checksum mismatch for {remote.name} at {path} ({origin}): expected SHA-256 of the "
            f"parsed values {remote.sha256}, got {actual}. {remedy}"
        )
    return values


def _is_transient(exc: Exception) -> bool:
    """Whether a failed download may succeed when tried again."""
    if isinstance(exc, urllib.error.HTTPError):
        return exc.code in _TRANSIENT_HTTP_STATUS
    # No connection, a timeout, a connection dropped mid-transfer, a garbled response.
    return isinstance(
        exc, urllib.error.URLError | TimeoutError | ConnectionError | http.client.HTTPException
    )


def _read_once(url: str) -> bytes:
    with urllib.request.urlopen(url, timeout=_DOWNLOAD_TIMEOUT_S) as response:
        return response.read()


def _read_url(url: str) -> bytes:
    """The body at ``url``, tried up to ``_DOWNLOAD_ATTEMPTS`` times on transient errors."""
    delay = _RETRY_DELAY_S
    for attempt in range(1, _DOWNLOAD_ATTEMPTS):
        try:
            return _read_once(url)
        except (OSError, http.client.HTTPException) as exc:
            if not _is_transient(exc):
                raise
            warnings.warn(
                f"Downloading {url} failed ({exc}); retrying in {delay:g} s "
                f"(attempt {attempt + 1} of {_DOWNLOAD_ATTEMPTS}).",
                UserWarning,
                stacklevel=2,
            )
            time.sleep(delay)
            delay *= 2
    return _read_once(url)


def _download(remote: RemoteFile, target: Path, help_text: str) -> np.ndarray:
    """Download ``remote`` to ``target`` atomically, verify it and return its values."""
    try:
        payload = _read_url(remote.url)
    except (OSError, http.client.HTTPException) as exc:
        raise OSError(
            f"{remote.name} not found locally and downloading it from {remote.url} failed "
            f"({exc}). {help_text}"
        ) from exc
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(dir=target.parent, prefix=f".{remote.name}.", suffix=".part")
    tmp = Path(tmp_name)
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(payload)
        values = _verified_values(
            tmp,
            remote,
            f"downloaded from {remote.url}",
            "The download was discarded. Try again later, or set "
            f"{DATA_ENV_VAR} to a folder holding an intact copy as "
            f"{remote.folder}/{remote.name}.",
        )
        os.replace(tmp, target)
    finally:
        tmp.unlink(missing_ok=True)
    return values


def fetch(
    remote: RemoteFile, data_home: str | os.PathLike[str] | None, download_if_missing: bool
) -> np.ndarray:
    """Return the verified values of ``remote``: local copy, else cache, else download."""
    download_if_missing = check_bool(download_if_missing, "download_if_missing")
    local_root = os.environ.get(DATA_ENV_VAR)
    if local_root:
        local = Path(local_root).expanduser() / remote.folder / remote.name
        if local.is_file():
            return _verified_values(
                local,
                remote,
                f"local copy from ${DATA_ENV_VAR}",
                f"Replace it with an intact copy, or unset {DATA_ENV_VAR} to use the cache "
                f"or download it from {remote.url}.",
            )
    cached = get_data_home(data_home) / remote.folder / remote.name
    if cached.is_file():
        return _verified_values(
            cached,
            remote,
            "cached copy",
            f"Delete the cached file to download it again from {remote.url}, or set "
            f"{DATA_ENV_VAR} to a folder holding an intact copy as "
            f"{remote.folder}/{remote.name}.",
        )

    where = f"with {DATA_ENV_VAR}={local_root!r}" if local_root else f"{DATA_ENV_VAR} is not set"
    help_text = (
        f"Looked in ${DATA_ENV_VAR}/{remote.folder}/{remote.name} ({where}) and in the cache "
        f"{cached}. Set {DATA_ENV_VAR} to a folder holding {remote.folder}/{remote.name}, or "
        f"download {remote.url} to {cached}."
    )
    if not download_if_missing:
        raise OSError(f"{remote.name} not found locally and download_if_missing=False. {help_text}")
    return _download(remote, cached, help_text)
