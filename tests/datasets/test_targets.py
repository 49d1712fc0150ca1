"""The multimodal targets: exact mode weights and evidence against Monte Carlo and quadrature,
the model's log-density against SciPy, mode labels, and bad arguments."""

from __future__ import annotations

import numpy as np
import pytensor.tensor as pt
import pytest
from scipy import integrate, special, stats

from pymc_sfp.datasets import GaussianMixtureTarget, RingTarget, multimodal_targets

TARGETS = multimodal_targets()
MIXTURES = {name: t for name, t in TARGETS.items() if isinstance(t, GaussianMixtureTarget)}
#: Two targets where the prior changes the weights a lot, so that a formula which ignored the box
#: or the prior's tilt would fail: a mode 1 sd inside the box's edge (a sixth of its mass cut
#: off), and modes of different widths and distances from the centre of a normal prior.
STRESS = {
    "edge": GaussianMixtureTarget(
        "edge", [0.5, 0.5], [[9.0, 0.0], [-5.0, 0.0]], [1.0, 1.5], bounds=(-10, 10)
    ),
    "tilted": GaussianMixtureTarget(
        "tilted", [0.4, 0.6], [[-3.0, 1.0], [6.0, 2.0]], [0.5, 2.0], prior="normal", prior_sd=3.0
    ),
}
RING = TARGETS["ring-3d"]
DRAWS = 200_000


def likelihood_draws(target: GaussianMixtureTarget, n: int, seed: int):
    """Draws of the normalised mixture likelihood and the component of each."""
    rng = np.random.default_rng(seed)
    component = rng.choice(target.n_modes, size=n, p=target.weights)
    noise = rng.standard_normal((n, target.dim))
    return target.means[component] + target.sds[component, None] * noise, component


def prior_density(target: GaussianMixtureTarget, x: np.ndarray) -> np.ndarray:
    if target.prior == "uniform":
        lo, hi = target.bounds
        return np.all((x > lo) & (x < hi), axis=-1) / (hi - lo) ** target.dim
    return np.exp(stats.norm(0.0, target.prior_sd).logpdf(x).sum(axis=-1))


@pytest.mark.parametrize("target", [*MIXTURES.values(), *STRESS.values()], ids=lambda t: t.name)
def test_mixture_weights_and_evidence_against_monte_carlo(target):
    # The likelihood is a normalised density, so Z = E_L[prior(x)] with x drawn from the
    # likelihood, and the weight of mode k is E_L[prior(x) 1{x from k}] / Z (a ratio estimate,
    # its standard error by the delta method). Tolerance: 4 standard errors, plus 4 / DRAWS for
    # the mass beyond a box that no draw reaches (the standard error is then 0).
    x, component = likelihood_draws(target, DRAWS, seed=1)
    prior = prior_density(target, x)
    z = prior.mean()
    z_se = prior.std() / np.sqrt(DRAWS)
    assert abs(target.log_evidence - np.log(z)) < 4 * z_se / z + 4 / DRAWS
    for k, weight in enumerate(target.posterior_weights):
        in_mode = prior * (component == k)
        estimate = in_mode.mean() / z
        se = (in_mode - estimate * prior).std() / (np.sqrt(DRAWS) * z)
        assert abs(weight - estimate) < 4 * se + 4 / DRAWS, (k, weight, estimate, se)
    assert np.isclose(target.posterior_weights.sum(), 1.0)


@pytest.mark.parametrize("name", ["mixture-1d", "two-modes-110-nat"])
def test_1d_weights_and_evidence_against_quadrature(name):
    target = TARGETS[name]

    def integrand(x, k):
        density = target.weights[k] * stats.norm(target.means[k, 0], target.sds[k]).pdf(x)
        return density * prior_density(target, np.array([[x]]))[0]

    def mass(k: int) -> float:
        if target.prior == "normal":  # quad takes no break points on an infinite range
            return integrate.quad(integrand, -np.inf, np.inf, args=(k,))[0]
        return integrate.quad(integrand, *target.bounds, args=(k,), points=target.means[k])[0]

    masses = np.array([mass(k) for k in range(target.n_modes)])
    np.testing.assert_allclose(target.posterior_weights, masses / masses.sum(), rtol=1e-8)
    assert target.log_evidence == pytest.approx(np.log(masses.sum()), abs=1e-8)


def test_ring_normaliser_weights_and_evidence():
    r, s = RING.radius, RING.sd
    radial = integrate.quad(lambda rho: rho * np.exp(-((rho - r) ** 2) / (2 * s**2)), 0, r + 20 * s)
    normaliser = 2 * np.pi * radial[0] * np.sqrt(2 * np.pi) * s
    assert RING.log_normaliser == pytest.approx(np.log(normaliser), abs=1e-10)
    # Monte Carlo from the uniform prior: Z = E_prior[L(x)] and the quadrants' shares of it.
    lo, hi = RING.bounds
    x = np.random.default_rng(2).uniform(lo, hi, size=(2_000_000, 3))
    rho = np.hypot(x[:, 0], x[:, 1])
    likelihood = np.exp(-((rho - r) ** 2 + x[:, 2] ** 2) / (2 * s**2)) / normaliser
    z, z_se = likelihood.mean(), likelihood.std() / np.sqrt(len(x))
    assert abs(RING.log_evidence - np.log(z)) < 4 * z_se / z
    quadrant = (x[:, 0] < 0) * 1 + (x[:, 1] < 0) * 2  # 0: ++, 1: −+, 2: +−, 3: −−
    for q, label in zip(range(4), [0, 1, 3, 2], strict=True):
        share = likelihood * (quadrant == q)
        estimate = share.mean() / z
        se = (share - estimate * likelihood).std() / (np.sqrt(len(x)) * z)
        assert abs(RING.posterior_weights[label] - estimate) < 4 * se


def model_logp(target, points: np.ndarray) -> np.ndarray:
    """The model's log-density (no Jacobian) at points given in the constrained space."""
    model = target.model()
    rv = model["x"]
    value_var = model.rvs_to_values[rv]
    transform = model.rvs_to_transforms.get(rv)
    logp = model.compile_logp(jacobian=False)
    values = []
    for point in points:
        value = point
        if transform is not None:
            value = transform.forward(pt.as_tensor(point), *rv.owner.inputs).eval()
        values.append(logp({value_var.name: value}))
    return np.array(values)


@pytest.mark.parametrize("target", [*MIXTURES.values(), *STRESS.values()], ids=lambda t: t.name)
def test_mixture_model_logp_is_prior_plus_log_mixture(target):
    rng = np.random.default_rng(3)
    points = np.vstack([target.means + 0.3, rng.normal(0.0, 2.0, (3, target.dim))])
    if target.prior == "uniform":
        points = np.clip(points, *(np.array(target.bounds) * 0.99))
        prior = stats.uniform(target.bounds[0], np.ptp(target.bounds)).logpdf(points).sum(axis=1)
    else:
        prior = stats.norm(0.0, target.prior_sd).logpdf(points).sum(axis=1)
    per_mode = [
        np.log(w) + stats.multivariate_normal(mu, s**2 * np.eye(target.dim)).logpdf(points)
        for w, mu, s in zip(target.weights, target.means, target.sds, strict=True)
    ]
    expected = prior + special.logsumexp(np.atleast_2d(per_mode), axis=0)
    np.testing.assert_allclose(model_logp(target, points), expected, rtol=1e-9, atol=1e-9)
    assert target.model()["x"].type.shape == (target.dim,)


def test_ring_model_logp():
    points = np.array([[4.0, 0.0, 0.0], [0.5, -3.0, 0.2], [-5.0, 5.0, -1.0]])
    rho = np.hypot(points[:, 0], points[:, 1])
    expected = (
        -3 * np.log(np.ptp(RING.bounds))
        - ((rho - RING.radius) ** 2 + points[:, 2] ** 2) / (2 * RING.sd**2)
        - RING.log_normaliser
    )
    np.testing.assert_allclose(model_logp(RING, points), expected, rtol=1e-9)


@pytest.mark.parametrize("target", [*MIXTURES.values(), *STRESS.values()], ids=lambda t: t.name)
def test_mode_labels_recover_the_component(target):
    rng = np.random.default_rng(4)
    for k in range(target.n_modes):
        draws = target.means[k] + target.sds[k] * rng.standard_normal((10_000, target.dim))
        assert np.mean(target.mode_labels(draws) == k) >= 0.999, k
    assert target.mode_labels(np.zeros((2, 3, target.dim))).shape == (2, 3)


def test_ring_labels_are_the_quadrants_counter_clockwise():
    rng = np.random.default_rng(5)
    for q in range(4):
        angle = rng.uniform(q * np.pi / 2, (q + 1) * np.pi / 2, 10_000)
        rho = rng.normal(RING.radius, RING.sd, 10_000)
        draws = np.column_stack([rho * np.cos(angle), rho * np.sin(angle), np.zeros(10_000)])
        assert np.mean(RING.mode_labels(draws) == q) >= 0.999
    np.testing.assert_array_equal(RING.mode_labels(RING.mode_centres), np.arange(4))


def test_three_modes_are_not_separated_by_either_coordinate():
    # Each coordinate has a pair of modes closer than 2 sds: neither marginal tells all apart.
    target = TARGETS["mixture-2d-3modes"]
    for axis in range(2):
        gaps = np.abs(target.means[:, None, axis] - target.means[None, :, axis])
        assert np.min(gaps[np.triu_indices(3, 1)]) < 2 * target.sds[0]


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"weights": [0.5, 0.6]}, "weights"),
        ({"weights": [1.2, -0.2]}, "weights"),
        ({"means": [[0.0, 0.0]]}, "means"),
        ({"means": [0.0, 1.0]}, "means"),
        ({"sds": [1.0]}, "sds"),
        ({"sds": [1.0, 0.0]}, "sds"),
        ({"bounds": (1.0, 1.0)}, "bounds"),
        ({"bounds": (2.0, -2.0)}, "bounds"),
        ({"prior": "flat"}, "prior"),
        ({"prior": "normal", "bounds": None}, "prior_sd"),
        ({"prior": "normal", "bounds": None, "prior_sd": -1.0}, "prior_sd"),
    ],
)
def test_bad_mixture_arguments(kwargs, match):
    arguments = {
        "name": "bad",
        "weights": [0.5, 0.5],
        "means": [[0.0, 0.0], [3.0, 3.0]],
        "sds": [1.0, 1.0],
        "bounds": (-5.0, 5.0),
    } | kwargs
    with pytest.raises(ValueError, match=match):
        GaussianMixtureTarget(**arguments)


@pytest.mark.parametrize(("radius", "sd", "match"), [(0.0, 0.3, "radius"), (4.0, -1.0, "sd")])
def test_bad_ring_arguments(radius, sd, match):
    with pytest.raises(ValueError, match=match):
        RingTarget("bad", radius, sd)


def test_settings_of_the_wrong_kind_are_named():
    with pytest.raises(TypeError, match="radius must be a real number"):
        RingTarget("bad", "1", 0.3)
    with pytest.raises(TypeError, match="prior_sd must be a real number"):
        GaussianMixtureTarget(
            "bad", [0.5, 0.5], [[0.0], [3.0]], [1.0, 1.0], prior="normal", prior_sd="1"
        )


def test_targets_are_frozen():
    target = TARGETS["mixture-2d"]
    with pytest.raises(AttributeError):
        target.name = "other"
    with pytest.raises(ValueError, match="read-only"):
        target.weights[0] = 0.9
