"""Sphinx configuration for pymc_sfp.

Build with ``make docs`` (full example budgets) or ``make docs-quick`` (small budgets, warnings
as errors, what CI runs); by hand, ``pip install -e '.[docs]'`` then
``sphinx-build -W -b html docs docs/_build/html``.

Nothing here needs the network: no intersphinx (CI has no network), and the example gallery
reads data sets only from a local copy (``$PYMC_SFP_DATA``) or the cache, skipping what is
missing.
"""

from __future__ import annotations

import importlib
import inspect
import os
import re
import sys
from importlib import metadata
from pathlib import Path

from sphinx.util import logging

DOCS = Path(__file__).resolve().parent
ROOT = DOCS.parent
# Import the package from this checkout even when it is not installed.
sys.path.insert(0, str(ROOT))

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
    "sphinx.ext.autosummary",
    "sphinx.ext.mathjax",
    "sphinx.ext.viewcode",
    "numpydoc",
    "myst_parser",
    "sphinx_gallery.gen_gallery",
]

templates_path = ["_templates"]
exclude_patterns = ["_build", "Thumbs.db", ".DS_Store", "auto_examples/*.ipynb"]
root_doc = "index"

# docs/benchmarks.md includes benchmarks/RESULTS.md as the scripts write it; its sections get
# anchors so that the user guide can point at them.
source_suffix = {".rst": "restructuredtext", ".md": "markdown"}
myst_heading_anchors = 3
myst_enable_extensions = ["html_admonition"]

# -- API reference ------------------------------------------------------------------------------
# docs/api.rst lists every public name in autosummary tables; the pages are generated into
# docs/generated/ at each build. `check_public_api` below makes a missing name a warning (an
# error under -W), so the reference cannot fall behind the package's __all__ lists.
autosummary_generate = True
autosummary_imported_members = False
autodoc_member_order = "bysource"
autodoc_typehints = "none"
autodoc_default_options = {"members": False}

# numpydoc: the class template lists the members; numpydoc's own tables would repeat them.
numpydoc_show_class_members = False
numpydoc_class_members_toctree = False
numpydoc_xref_param_type = False

# -- HTML: the PyData theme --------------------------------------------------------------------
html_theme = "pydata_sphinx_theme"
html_title = f"pymc_sfp {release}"
html_static_path: list[str] = []
html_theme_options = {
    "navbar_align": "left",
    "show_toc_level": 2,
    "navigation_with_keys": False,
    "secondary_sidebar_items": ["page-toc", "sourcelink"],
    # No version switcher, no analytics, no icons fetched from the network.
    "icon_links": [],
}
html_sidebars = {"index": []}

# -- Example gallery -------------------------------------------------------------------------
# Every examples/plot_*.py script is executed and rendered with its figures and output.
# PYMC_SFP_DOCS_QUICK=1 (``make docs-quick``, CI) makes each script use its small budgets;
# PYMC_SFP_DOCS_EXAMPLES=<regex> runs only the matching scripts (the others are rendered
# without output), e.g. to iterate on one example.
QUICK = os.environ.get("PYMC_SFP_DOCS_QUICK", "") not in ("", "0")
_only = os.environ.get("PYMC_SFP_DOCS_EXAMPLES", "")

sphinx_gallery_conf = {
    "examples_dirs": str(ROOT / "examples"),
    "gallery_dirs": "auto_examples",
    "filename_pattern": re.escape(os.sep) + "plot_" + (f".*({_only})" if _only else ""),
    "ignore_pattern": r"__init__\.py|quickstart\.py",
    "within_subsection_order": "FileNameSortKey",
    # A script that raises fails the build (a broken example is a broken doc).
    "abort_on_example_error": False,
    "only_warn_on_example_error": False,
    "image_scrapers": ("matplotlib",),
    "matplotlib_animations": False,
    "remove_config_comments": True,
    "capture_repr": (),
    "min_reported_time": 1,
    "download_all_examples": False,
    "show_signature": False,
    "doc_module": ("pymc_sfp",),
    "backreferences_dir": "generated/backreferences",
}


# -- Checks ------------------------------------------------------------------------------------
PUBLIC_MODULES = (
    "pymc_sfp",
    "pymc_sfp.nn",
    "pymc_sfp.datasets",
    "pymc_sfp.learning",
    "pymc_sfp.sbc",
)
_logger = logging.getLogger(__name__)


def _listed_names(text: str) -> set[str]:
    """Full names of the entries of the autosummary tables in ``text``, resolved against the
    ``currentmodule`` / ``automodule`` in force where each table stands."""
    current, names, in_table = "", set(), False
    for line in text.splitlines():
        if directive := re.match(r"\.\. (?:currentmodule|automodule):: ([\w.]+)", line):
            current = directive.group(1)
        if line.startswith(".. "):
            in_table = line.startswith(".. autosummary::")
        elif in_table and (entry := re.fullmatch(r"   ~?([\w.]+)", line)):
            names.add(f"{current}.{entry.group(1)}" if current else entry.group(1))
    return names


def _resolve(full_name: str):
    """The object a dotted name refers to (the longest importable module, then attributes)."""
    parts = full_name.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            value = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for attribute in parts[cut:]:
            value = getattr(value, attribute)
        return value
    raise ImportError(full_name)


def check_public_api(app) -> None:
    """Warn about every public name that docs/api.rst does not list.

    A name counts as listed when an autosummary table lists it under its own module or lists
    the same class or function under another public path (``pymc_sfp.IncrementalSFP`` covers
    ``pymc_sfp.learning.IncrementalSFP``).
    """
    listed = _listed_names((DOCS / "api.rst").read_text(encoding="utf-8"))
    listed_objects = [_resolve(name) for name in listed]
    for module_name in PUBLIC_MODULES:
        module = importlib.import_module(module_name)
        for name in module.__all__:
            value = getattr(module, name)
            if isinstance(value, type(module)):
                continue  # a subpackage: its own names are checked
            if f"{module_name}.{name}" in listed:
                continue
            if callable(value) and any(value is obj for obj in listed_objects):
                continue
            _logger.warning(
                f"docs/api.rst does not list the public name {module_name}.{name}",
                type="pymc_sfp",
                subtype="api",
            )


def init_signature(app, what, name, obj, options, signature, return_annotation):
    """Show a step method's ``__init__`` signature instead of PyMC's generic ``__new__``.

    PyMC's ``BlockedStep.__new__(cls, *args, **kwargs)`` hides the parameters from autodoc.
    """
    if what == "class" and signature == "(*args, **kwargs)":
        parameters = [
            parameter.replace(annotation=inspect.Parameter.empty)  # as autodoc_typehints="none"
            for parameter in list(inspect.signature(obj.__init__).parameters.values())[1:]
        ]
        return str(inspect.Signature(parameters)), return_annotation
    return None


def setup(app) -> None:
    app.connect("builder-inited", check_public_api)
    app.connect("autodoc-process-signature", init_signature)
