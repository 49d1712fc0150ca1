"""Synthetic problems of the papers: nothing is downloaded, the same seed gives the same data.

* :func:`make_robot_arm` — the robot-arm regression problem (MacKay 1992; Neal 1993, §3).
* :func:`make_teacher_perceptron` — a teacher perceptron with output noise (Opper & Winther 1996).
"""

from __future__ import annotations

import numpy as np

from pymc_sfp._validation import as_generator, check_positive_int, check_real

__all__ = ["make_robot_arm", "make_teacher_perceptron"]

_ROBOT_X1_RANGE = (0.453, 1.932)
_ROBOT_X2_RANGE = (0.534, 3.142)


def make_robot_arm(
    n: int, *, rng: np.random.Generator | int, noise_sd: float = 0.05
) -> tuple[np.ndarray, np.ndarray]:
    """Draw cases of the robot-arm problem (MacKay 1992; Neal 1993, §3).

    The position of a two-joint arm from its joint angles: ``x1`` uniform on
    ``[-1.932, -0.453] ∪ [0.453, 1.932]``, ``x2`` uniform on ``[0.534, 3.142]``, and ::

        y1 = 2.0 cos(x1) + 1.3 cos(x1 + x2)
        y2 = 2.0 sin(x1) + 1.3 sin(x1 + x2)

    plus independent Gaussian noise on each output. Neal uses 200 training and 200 test cases.

    Parameters
    ----------
    n : int
        Number of cases, ``> 0``.
    rng : numpy.random.Generator or int
        Random generator, or a seed for :func:`numpy.random.default_rng`.
    noise_sd : float, default 0.05
        Standard deviation of the output noise, ``>= 0``.

    Returns
    -------
    X : ndarray, shape (n, 2)
        The angles ``(x1, x2)``.
    Y : ndarray, shape (n, 2)
        The noisy positions ``(y1, y2)``.

    Raises
    ------
    TypeError
        If ``noise_sd`` is not a real number.
    ValueError
        If ``n`` is not a positive integer or ``noise_sd`` is negative or not finite.
    """
    n = check_positive_int(n, "n")
    noise_sd = check_real(noise_sd, "noise_sd")
    if not np.isfinite(noise_sd) or noise_sd < 0:
        raise ValueError(f"noise_sd must be finite and >= 0, got {noise_sd!r}")
    rng = as_generator(rng, "rng")
    sign = rng.choice([-1.0, 1.0], size=n)
    x1 = sign * rng.uniform(*_ROBOT_X1_RANGE, size=n)
    x2 = rng.uniform(*_ROBOT_X2_RANGE, size=n)
    Y = np.column_stack(
        [
            2.0 * np.cos(x1) + 1.3 * np.cos(x1 + x2),
            2.0 * np.sin(x1) + 1.3 * np.sin(x1 + x2),
        ]
    )
    return np.column_stack([x1, x2]), Y + noise_sd * rng.standard_normal((n, 2))


def make_teacher_perceptron(
    m: int, n_features: int, *, rng: np.random.Generator | int, beta: float
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Draw examples labelled by a noisy teacher perceptron (Opper & Winther 1996, Eq. 4).

    Teacher weights ``w* ~ N(0, I_N)``, inputs ``s ~ N(0, I_N)``; the label is
    ``sign(w*·s / √N)``, flipped independently with probability
    ``e^(−β) / (1 + e^(−β))``, i.e. ``P(σ | Δ) ∝ e^(−β Θ(−σΔ))``.

    Parameters
    ----------
    m : int
        Number of examples, ``> 0``.
    n_features : int
        Input dimension ``N``, ``> 0``.
    rng : numpy.random.Generator or int
        Random generator, or a seed for :func:`numpy.random.default_rng`.
    beta : float
        Output-noise parameter, ``> 0``; ``numpy.inf`` gives noise-free labels.

    Returns
    -------
    S : ndarray, shape (m, n_features)
        The inputs.
    sigma : ndarray, shape (m,)
        The labels, ``-1.0`` or ``+1.0``.
    w_teacher : ndarray, shape (n_features,)
        The teacher's weights.

    Raises
    ------
    TypeError
        If ``beta`` is not a real number.
    ValueError
        If ``m`` or ``n_features`` is not a positive integer, or ``beta`` is not ``> 0``.
    """
    m = check_positive_int(m, "m")
    n_features = check_positive_int(n_features, "n_features")
    beta = check_real(beta, "beta")
    if not beta > 0:
        raise ValueError(f"beta must be > 0, got {beta!r}")
    rng = as_generator(rng, "rng")
    w_teacher = rng.standard_normal(n_features)
    S = rng.standard_normal((m, n_features))
    clean = np.where(S @ w_teacher >= 0, 1.0, -1.0)
    flip_probability = np.exp(-np.logaddexp(0.0, beta))
    flipped = rng.random(m) < flip_probability
    return S, np.where(flipped, -clean, clean), w_teacher
