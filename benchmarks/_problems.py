"""The targets, data sets and models the benchmarks run on, built with ``pymc_sfp.datasets`` and
``pymc_sfp.nn`` wherever those give the model the benchmark measures.

* SFP targets: the multimodal mixtures of Berrones (2009, §4), a separable target of any
  dimension, and 1-8-1 / 2-16-2 tanh networks with N(0, 1) weights (``nn.mlp``).
* Neal's (1993, §3) robot arm: data from ``datasets.make_robot_arm``; the 2-16-2 network with
  three group scales, also centred and with the output layer integrated out, and with N(0, 1)
  weights on minibatches (``nn.mlp``, ``nn.gaussian_likelihood(..., batch_size=...)``).
* Bayesian linear regression with a known Gaussian posterior.
* Berrones' (2009, §4) networks: ``nn.mlp`` with U(-1, 1) weights and the Eq. 23 loss, on glass,
  Santa Fe B and the laser series.
* de Freitas et al.'s (1998) experiment 1 for sequential training: a stream from a nonlinear
  function of two Gaussian inputs and the 2-5-1 network (``nn.mlp``) that learns it.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np
import pymc as pm
import pytensor.tensor as pt
from scipy import stats

from pymc_sfp import nn
from pymc_sfp.datasets import embed, load_breath_rate, load_laser, make_robot_arm

# ---------------------------------------------------------------------------------- SFP targets
MIX1_WEIGHTS = np.array([0.2, 0.2, 0.6])
MIX1_MEANS = np.array([5.0, 20.0, 40.0])
MIX1_SD = 2.0
MIX1_BOX = (-10.0, 60.0)
#: Boundaries between the 1-D mixture's modes (for mode labels and weights).
MIX1_SPLITS = (12.5, 30.0)

MIX2_MEANS = np.array([[6.0, -5.0], [-2.0, 3.0]])
MIX2_WEIGHTS = np.array([0.5, 0.5])
MIX2_BOX = (-10.0, 10.0)


def mixture_1d_model(prior: Literal["flat", "uniform"] = "flat") -> pm.Model:
    """0.2 N(5, 2) + 0.2 N(20, 2) + 0.6 N(40, 2) as ``pm.Potential`` on ``x``; ``x`` is
    ``pm.Flat`` or, for samplers that draw from the prior (SMC), uniform on :data:`MIX1_BOX`."""
    with pm.Model() as model:
        x = pm.Flat("x") if prior == "flat" else pm.Uniform("x", *MIX1_BOX)
        components = pt.log(MIX1_WEIGHTS) + pm.logp(pm.Normal.dist(MIX1_MEANS, MIX1_SD), x)
        pm.Potential("mixture", pm.math.logsumexp(components))
    return model


def mixture_2d_model(prior: Literal["flat", "uniform"] = "flat") -> pm.Model:
    """0.5 N((6, -5), I) + 0.5 N((-2, 3), I), as :func:`mixture_1d_model` (box
    :data:`MIX2_BOX` in each coordinate)."""
    with pm.Model() as model:
        if prior == "flat":
            x = pm.Flat("x", shape=2)
        else:
            x = pm.Uniform("x", *MIX2_BOX, shape=2)
        per_mode = pt.stack(
            [
                pt.log(w) + pt.sum(pm.logp(pm.Normal.dist(mu, 1.0), x))
                for w, mu in zip(MIX2_WEIGHTS, MIX2_MEANS, strict=True)
            ]
        )
        pm.Potential("mixture", pm.math.logsumexp(per_mode))
    return model


def mixture_1d_numpy(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Log-density of the 1-D mixture and its derivative, in NumPy."""
    comp = np.log(MIX1_WEIGHTS) + stats.norm.logpdf(x[:, None], MIX1_MEANS, MIX1_SD)
    logp = np.logaddexp.reduce(comp, axis=1)
    resp = np.exp(comp - logp[:, None])
    dlogp = np.sum(resp * (-(x[:, None] - MIX1_MEANS) / MIX1_SD**2), axis=1)
    return logp, dlogp


def mixture_1d_box_cdf(x: np.ndarray) -> np.ndarray:
    """The 1-D mixture's exact CDF, normalised to :data:`MIX1_BOX`."""

    def raw(v):
        return stats.norm.cdf(np.asarray(v)[..., None], MIX1_MEANS, MIX1_SD) @ MIX1_WEIGHTS

    lo, hi = raw(MIX1_BOX[0]), raw(MIX1_BOX[1])
    return (raw(x) - lo) / (hi - lo)


def separable_model(n: int) -> pm.Model:
    """``n`` independent coordinates, each 0.5 N(-2, 1) + 0.5 N(2, 1)."""
    with pm.Model() as model:
        x = pm.Flat("x", shape=n)
        per_coordinate = pt.logaddexp(
            pm.logp(pm.Normal.dist(-2.0, 1.0), x), pm.logp(pm.Normal.dist(2.0, 1.0), x)
        ) + np.log(0.5)
        pm.Potential("target", pt.sum(per_coordinate))
    return model


def sine_data(n: int, seed: int = 1) -> tuple[np.ndarray, np.ndarray]:
    """``y = sin(3x) + N(0, 0.1²)``, ``x ~ U(-1, 1)``."""
    rng = np.random.default_rng(seed)
    x = rng.uniform(-1.0, 1.0, size=(n, 1))
    return x, np.sin(3.0 * x) + rng.normal(0.0, 0.1, size=(n, 1))


def tanh_network(x: np.ndarray, y: np.ndarray, n_hidden: int, sigma: float) -> pm.Model:
    """``n_in-n_hidden-n_out`` tanh network, N(0, 1) weights, Gaussian likelihood of sd
    ``sigma`` (fixed, not a parameter)."""
    with pm.Model() as model:
        network = nn.mlp(x, (x.shape[1], n_hidden, y.shape[1]), prior="gaussian")
        nn.gaussian_likelihood(network, y, sigma=sigma)
    return model


def n_params(model: pm.Model) -> int:
    """Number of scalar parameters of ``model``."""
    return int(sum(np.size(v) for v in model.initial_point().values()))


# ------------------------------------------------------------------------------------ robot arm
ROBOT_TRAIN_SEED, ROBOT_TEST_SEED = 1993, 1994
ROBOT_N_TRAIN = ROBOT_N_TEST = 200
ROBOT_HIDDEN = 16
ROBOT_NOISE_SD = 0.05
SCALE_PRIOR_SD = 5.0
NOISE_PRIOR_SD = 1.0
#: Labels of the group scales of :func:`robot_network` (input→hidden weights, hidden biases,
#: hidden→output weights and output biases) and, with the noise sd, of the hyperparameters.
SCALES = ("s_in", "s_b", "s_out")
HYPER = (*SCALES, "sigma")


def robot_arm(n: int, seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``n`` robot-arm cases (noise sd :data:`ROBOT_NOISE_SD`): inputs, noisy targets and the
    noiseless targets at the same inputs (``make_robot_arm`` with ``noise_sd=0`` and the same
    seed draws the same inputs, checked here)."""
    X, Y = make_robot_arm(n, rng=seed, noise_sd=ROBOT_NOISE_SD)
    X_clean, Y_clean = make_robot_arm(n, rng=seed, noise_sd=0.0)
    if not np.array_equal(X, X_clean):
        raise RuntimeError("make_robot_arm drew other inputs without noise: no noise floor")
    return X, Y, Y_clean


def test_error(prediction: np.ndarray, Y: np.ndarray) -> float:
    """Neal's test error: mean over cases of the squared error summed over the outputs."""
    return float(np.mean(np.sum((prediction - Y) ** 2, axis=1)))


def robot_network(
    X: np.ndarray,
    Y: np.ndarray,
    prior: Literal["group", "centred", "gaussian"],
    batch_size: int | None = None,
    output_layer: Literal["sampled", "integrated"] = "sampled",
) -> tuple[pm.Model, nn.Network]:
    """The 2-16-2 tanh network with linear outputs (``nn.mlp``) and an unknown noise sd
    ``sigma ~ HalfNormal(1)`` shared by both outputs.

    ``prior="group"``: Neal's three group scales (``net_sd_w0`` input→hidden weights,
    ``net_sd_b0`` hidden biases, ``net_sd_out`` hidden→output weights and output biases), each
    ``HalfNormal(5)``, and non-centred weights ``w = s · z``, ``z ~ N(0, 1)``. ``"centred"``: the
    same prior with the weights ``w ~ N(0, s²)`` themselves as variables (Neal's
    parametrisation, for the split scheme). ``"gaussian"``: N(0, 1) weights without scales. With
    ``batch_size`` the likelihood sees ``pm.Minibatch`` rows scaled up to all of them.
    """
    with pm.Model() as model:
        network = nn.mlp(
            X,
            (X.shape[1], ROBOT_HIDDEN, Y.shape[1]),
            prior="gaussian" if prior == "gaussian" else "group",
            prior_scale=1.0 if prior == "gaussian" else SCALE_PRIOR_SD,
            centred=prior == "centred",
            output_layer=output_layer,
        )
        sigma = pm.HalfNormal("sigma", NOISE_PRIOR_SD)
        nn.gaussian_likelihood(network, Y, sigma=sigma, batch_size=batch_size)
    return model, network


def chain_outputs(network: nn.Network, idata, X: np.ndarray) -> np.ndarray:
    """The network's outputs per draw, ``(chain, draw, case, output)``, one chain at a time
    (the hidden layer of all draws at once would take gigabytes on long runs)."""
    posterior = idata["posterior"].to_dataset()
    return np.stack(
        [
            np.asarray(network.predict(posterior.isel(chain=[c]), X).values)[0]
            for c in range(posterior.sizes["chain"])
        ]
    )


@dataclass(frozen=True)
class RobotProblem:
    """A robot-arm posterior and how to score it on the test set."""

    model: pm.Model
    network: nn.Network
    X_test: np.ndarray
    Y_test: np.ndarray
    floor: float
    """Test error of the noiseless function on this test set."""

    @property
    def hyper(self) -> dict[str, str]:
        """Model variable of each hyperparameter of :data:`HYPER`."""
        scales = self.network.scales
        names = (scales["w0"].name, scales["b0"].name, scales["out"].name, "sigma")
        return dict(zip(HYPER, names, strict=True))

    def outputs(self, idata, X_new: np.ndarray) -> np.ndarray:
        """Network outputs per draw, ``(chain, draw, case, output)``, from a run's DataTree; with
        the output layer integrated out, each draw's conditional-mean network."""
        return chain_outputs(self.network, idata, X_new)


def robot_problem(
    *, centred: bool = False, output_layer: Literal["sampled", "integrated"] = "sampled"
) -> RobotProblem:
    """Neal's robot arm: 200 training and 200 test cases, the group-scale network of
    :func:`robot_network`. ``output_layer="integrated"``: the same posterior with the output layer
    integrated out (the sampler moves the 48 input-side weights and biases, the three scales and
    σ)."""
    X, Y, _ = robot_arm(ROBOT_N_TRAIN, ROBOT_TRAIN_SEED)
    X_test, Y_test, Y_clean = robot_arm(ROBOT_N_TEST, ROBOT_TEST_SEED)
    model, network = robot_network(
        X, Y, "centred" if centred else "group", output_layer=output_layer
    )
    return RobotProblem(model, network, X_test, Y_test, test_error(Y_clean, Y_test))


# ------------------------------------------------------------------------- linear regression
LIN_ROWS = 100_000
LIN_FEATURES = 10
LIN_NOISE_SD = 1.0
LIN_PRIOR_SD = 10.0
LIN_RHO = 0.5


@dataclass(frozen=True)
class LinearProblem:
    """Regression data and the exact Gaussian posterior of the weights."""

    X: np.ndarray
    y: np.ndarray
    mean: np.ndarray
    sd: np.ndarray


def linear_problem(seed: int) -> LinearProblem:
    """:data:`LIN_ROWS` rows of :data:`LIN_FEATURES` Gaussian features with correlation
    ``LIN_RHO^|i-j|``, true weights N(0, 1), noise sd :data:`LIN_NOISE_SD`; prior
    N(0, LIN_PRIOR_SD²) on the weights."""
    rng = np.random.default_rng(seed)
    lags = np.abs(np.subtract.outer(np.arange(LIN_FEATURES), np.arange(LIN_FEATURES)))
    chol = np.linalg.cholesky(LIN_RHO**lags)
    X = rng.standard_normal((LIN_ROWS, LIN_FEATURES)) @ chol.T
    w_true = rng.standard_normal(LIN_FEATURES)
    y = X @ w_true + LIN_NOISE_SD * rng.standard_normal(LIN_ROWS)
    precision = X.T @ X / LIN_NOISE_SD**2 + np.eye(LIN_FEATURES) / LIN_PRIOR_SD**2
    cov = np.linalg.inv(precision)
    mean = cov @ (X.T @ y) / LIN_NOISE_SD**2
    return LinearProblem(X, y, mean, np.sqrt(np.diag(cov)))


def linear_model(problem: LinearProblem, batch_size: int | None) -> pm.Model:
    """The regression model; with ``batch_size`` on ``pm.Minibatch`` rows."""
    with pm.Model() as model:
        if batch_size is None:
            X, y, total = problem.X, problem.y, None
        else:
            X, y = pm.Minibatch(problem.X, problem.y, batch_size=batch_size)
            total = LIN_ROWS
        w = pm.Normal("w", 0.0, LIN_PRIOR_SD, shape=LIN_FEATURES)
        pm.Normal("y", X @ w, LIN_NOISE_SD, observed=y, total_size=total)
    return model


# ---------------------------------------------------------------- Berrones' (2009) networks
GLASS_LAYERS = (9, 6, 4)
GLASS_D = 5e-4
SANTAFE_WINDOW = 10
SANTAFE_LAYERS = (SANTAFE_WINDOW, 20, 1)
SANTAFE_TRAIN = 500
LASER_WINDOW = 2
LASER_TRAIN = 200
LASER_TEST = 200
SERIES_D = 0.005


def n_weights(layer_sizes: Sequence[int]) -> int:
    """Weights and biases of a fully connected network with these layer sizes."""
    return sum((n_in + 1) * n_out for n_in, n_out in itertools.pairwise(layer_sizes))


def paper_network(
    X: np.ndarray, y: np.ndarray, layer_sizes: Sequence[int], D: float, output: str
) -> tuple[pm.Model, nn.Network]:
    """Berrones' network: ``U(-1, 1)`` weights and the cold quadratic loss of Eq. 23."""
    with pm.Model() as model:
        network = nn.mlp(X, layer_sizes, output=output, prior="uniform")
        nn.gaussian_likelihood(network, y, D=D)
    return model, network


Windows = tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]
"""Train inputs and targets, test inputs and targets of one-step-ahead prediction."""


def _series_windows(series: np.ndarray, window: int, n_train: int, n_test: int | None) -> Windows:
    """Train windows ``0 .. n_train - 1`` and the next ``n_test`` (all remaining if ``None``)."""
    X, y = embed(series, window)
    stop = len(X) if n_test is None else n_train + n_test
    return X[:n_train], y[:n_train], X[n_train:stop], y[n_train:stop]


def santafe_b_windows() -> Windows:
    """Santa Fe B breath rate (``load_breath_rate()``, standardised over its 1000 values) in
    windows of :data:`SANTAFE_WINDOW`: the first :data:`SANTAFE_TRAIN` train, the rest test."""
    return _series_windows(load_breath_rate(), SANTAFE_WINDOW, SANTAFE_TRAIN, None)


def laser_windows() -> Windows:
    """Santa Fe A (``load_laser()``, standardised) in windows of :data:`LASER_WINDOW`:
    :data:`LASER_TRAIN` train and the next :data:`LASER_TEST` test."""
    return _series_windows(load_laser(), LASER_WINDOW, LASER_TRAIN, LASER_TEST)


# ------------------------------------------------------------------- sequential training (SMC)
#: de Freitas et al. (1998), experiment 1: two N(0, 1) inputs, noise sd 0.01, a 2-5-1 network.
SEQ_NOISE_SD = 0.01
SEQ_LAYERS = (2, 5, 1)


def sequential_target(X: np.ndarray) -> np.ndarray:
    """The noiseless target of experiment 1, ``sin(x1) + x1 x2 / 2``.

    The paper's function was lost in the extraction of its text; this one has the stated form (a
    nonlinear function of two unit Gaussian inputs): smooth, with an interaction, range about
    ±3 on the inputs' bulk, and within reach of five tanh hidden units.
    """
    return np.sin(X[:, 0]) + 0.5 * X[:, 0] * X[:, 1]


def sequential_stream(steps: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """One run's stream of experiment 1: inputs ``(steps, 2)`` and noisy targets ``(steps,)``."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(steps, 2))
    return X, sequential_target(X) + SEQ_NOISE_SD * rng.normal(size=steps)


def sequential_network(noise_sd: float) -> pm.Model:
    """The 2-5-1 tanh network with N(0, 1) weights and Gaussian noise of sd ``noise_sd``, its
    data containers ``net_X`` and ``net_y_data`` holding one row (the filter streams them)."""
    with pm.Model() as model:
        net = nn.mlp(np.zeros((1, 2)), SEQ_LAYERS, prior="gaussian")
        nn.gaussian_likelihood(net, np.zeros(1), sigma=noise_sd)
    return model


def hierarchical_regression_model(
    groups: int, rows_per_group: int = 4, seed: int = 0, slopes: int = 0
) -> pm.Model:
    """Non-centred varying intercepts: ``y_j ~ N(mu + tau z[g_j] + b x_j, sigma)`` with
    ``groups`` groups of ``rows_per_group`` rows on average (``g_j`` uniform), ``z ~ N(0, I)``,
    ``mu, b ~ N(0, 1)``, ``tau, sigma ~ HalfNormal(1)``; data from ``mu = 0.5``, ``tau = 0.8``,
    ``b = 0.3``, ``sigma = 0.5``. With ``slopes > 0``, also non-centred varying slopes on as
    many further covariates ``X_j``: ``+ (X_j * (sd_beta * beta_z)[g_j]).sum()``, ``beta_z`` of
    shape ``(groups, slopes)`` ``N(0, I)``, ``sd_beta ~ HalfNormal(1)``; data from
    ``sd_beta = 0.4``."""
    rng = np.random.default_rng(seed)
    rows = groups * rows_per_group
    group = rng.integers(0, groups, size=rows)
    x = rng.normal(size=rows)
    y = 0.5 + 0.8 * rng.normal(size=groups)[group] + 0.3 * x + 0.5 * rng.normal(size=rows)
    X = rng.normal(size=(rows, slopes))
    y = y + (X * 0.4 * rng.normal(size=(groups, slopes))[group]).sum(-1)
    with pm.Model() as model:
        mu = pm.Normal("mu", 0.0, 1.0)
        tau = pm.HalfNormal("tau", 1.0)
        z = pm.Normal("z", 0.0, 1.0, shape=groups)
        b = pm.Normal("b", 0.0, 1.0)
        sigma = pm.HalfNormal("sigma", 1.0)
        mean = mu + tau * z[group] + b * x
        if slopes:
            sd_beta = pm.HalfNormal("sd_beta", 1.0)
            beta_z = pm.Normal("beta_z", 0.0, 1.0, shape=(groups, slopes))
            mean = mean + (X * (sd_beta * beta_z)[group]).sum(-1)
        pm.Normal("y", mean, sigma, observed=y)
    return model
