"""Data sets of the papers: loaders for the real data and generators for the synthetic problems.

Real data (Berrones 2009, §4), fetched in the style of scikit-learn's ``fetch_*`` functions
(:mod:`pymc_sfp.datasets.papers`):

* :func:`~papers.load_glass`, :func:`~papers.glass_split` — UCI forensic glass, 4 classes
  (§4.1).
* :func:`~papers.load_santafe_b`, :func:`~papers.load_breath_rate` — Santa Fe competition set
  B; the human breath-rate segment (§4.2).
* :func:`~papers.load_laser` — Santa Fe competition set A (far-infrared laser), a stand-in for
  the NMR laser series of §4.3, which has no known public copy; a user's own NMR laser file can
  be given.
* :func:`~papers.embed` — time-delay embedding for one-step-ahead prediction.

Synthetic problems, nothing downloaded (:mod:`pymc_sfp.datasets.synthetic`):

* :func:`~synthetic.make_robot_arm` — the robot-arm regression problem (MacKay 1992; Neal 1993,
  §3).
* :func:`~synthetic.make_teacher_perceptron` — a teacher perceptron with output noise (Opper &
  Winther 1996).

Multimodal test targets with exact mode weights and log evidence (:mod:`pymc_sfp.datasets.targets`):

* :class:`~targets.GaussianMixtureTarget` — a Gaussian mixture likelihood under a uniform or
  normal prior.
* :class:`~targets.RingTarget` — a ring in 3-D under a uniform prior.
* :func:`~targets.multimodal_targets` — the named set of the tests and the tempering benchmarks.

The cache: :func:`get_data_home` returns it, :func:`clear_data_home` deletes it.

Where a data file is looked for, in order:

1. ``$PYMC_SFP_DATA/<folder>/<file>``, when the environment variable ``PYMC_SFP_DATA`` is set and
   the file exists there: a local copy laid out like the project's shared data folder
   (``glass/glass.data``, ``santafe_b/b1.txt``, ``santafe_b/b2.txt``, ``santafe_a/laser.dat``).
2. The cache, ``get_data_home(data_home) / <folder> / <file>``.
3. A download from the canonical public source into the cache (``urllib``), unless
   ``download_if_missing=False``. A transient network failure (no connection, a timeout, HTTP
   408, 429 or 5xx) is retried twice, after 1 s and 2 s, with a ``UserWarning`` each time.

Every file is checked before use. The check is the SHA-256 of the *parsed values*, not of the
raw bytes: the file is parsed (``#`` comments, blank lines and at most one non-numeric header
line skipped) and the digest is taken over the canonical CSV text of the numeric table — rows
joined by ``"\\n"`` (with a final ``"\\n"``), values by ``","``, each value written as Python's
``repr(float(v))``. So a copy that differs from the original only in layout (the UCI glass file
has no header line, the copy in the project's shared folder has one; trailing spaces or line
endings may differ between mirrors) passes, while any changed value fails.
"""

from pymc_sfp.datasets._fetch import (
    DATA_ENV_VAR,
    DATA_HOME_ENV_VAR,
    clear_data_home,
    get_data_home,
)
from pymc_sfp.datasets.papers import (
    GlassData,
    embed,
    glass_split,
    load_breath_rate,
    load_glass,
    load_laser,
    load_santafe_b,
)
from pymc_sfp.datasets.synthetic import make_robot_arm, make_teacher_perceptron
from pymc_sfp.datasets.targets import GaussianMixtureTarget, RingTarget, multimodal_targets

__all__ = [
    "DATA_ENV_VAR",
    "DATA_HOME_ENV_VAR",
    "GaussianMixtureTarget",
    "GlassData",
    "RingTarget",
    "clear_data_home",
    "embed",
    "get_data_home",
    "glass_split",
    "load_breath_rate",
    "load_glass",
    "load_laser",
    "load_santafe_b",
    "make_robot_arm",
    "make_teacher_perceptron",
    "multimodal_targets",
]
