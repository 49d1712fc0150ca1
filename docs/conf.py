"""Sphinx configuration for pymc_sfp.

Build with ``pip install -e '.[docs]'`` then ``sphinx-build -b html docs docs/_build/html``.
"""

from __future__ import annotations

import sys
from importlib import metadata
from pathlib import Path

# Import the package from this checkout even when it is not installed.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

project = "pymc_sfp"
author = "pymc_sfp contributors"
copyright = "pymc_sfp contributors"
try:
    release = metadata.version("pymc-sfp")
except metadata.PackageNotFoundError:
    release = "0.1.0.dev0"
version = ".".join(release.split(".")[:2])

extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.mathjax",
    "sphinx.ext.viewcode",
    "numpydoc",
]

# autodoc
autodoc_member_order = "bysource"
autodoc_typehints = "none"

# numpydoc: do not generate autosummary tables of every inherited class member.
numpydoc_show_class_members = False
numpydoc_class_members_toctree = False
numpydoc_xref_param_type = False

templates_path: list[str] = []
exclude_patterns = ["_build", "Thumbs.db", ".DS_Store"]
root_doc = "index"

html_theme = "alabaster"
html_title = f"pymc_sfp {release}"
