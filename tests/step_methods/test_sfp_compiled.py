"""SFPStep's compiled sweep: chosen by default, the same draws and stats as the NumPy sweep
through tuning (box refits and probes included), and a visible fallback where it cannot run."""

import subprocess
import sys
import warnings

import cloudpickle
import numpy as np
import pymc as pm
import pytensor.tensor as pt
import pytest
from numba.core.caching import NullCache
from numba.core.errors import NumbaExperimentalFeatureWarning
from pymc.blocking import DictToArrayBijection, RaveledVars
from pytensor.raise_op import Assert

from pymc_sfp import SFPStep, nn
from pymc_sfp.core.compiled_sweep import CompiledSweep, ModelCallError, sweep_kernel
from pymc_sfp.learning import marginal_prior
from pymc_sfp.learning.tabulated_prior import static_shape
from pymc_sfp.marginals import Marginal
from tests.helpers import counted_compilations


def small_model():
    """Automatic boxes (mu, log sigma), an interval coordinate (p), data in a shared container
    and a hard constraint (mu > 1.5 has no density)."""
    with pm.Model() as model:
        y = pm.Data("y", np.array([0.3, -0.2, 0.5, 0.1]))
        mu = pm.Normal("mu", 0.0, 2.0)
        p = pm.Uniform("p", 0.0, 1.0)
        sigma = pm.HalfNormal("sigma", 1.0)
        pm.Normal("obs", mu + 0.1 * p, sigma, observed=y)
        pm.Potential("cut", pt.switch(mu > 1.5, -np.inf, 0.0))
    return model


def run(step, model, n):
    step.rng = np.random.default_rng(3)
    q = DictToArrayBijection.map(model.initial_point())
    draws, stats = [], []
    for _ in range(n):
        q, step_stats = step.astep(q)
        draws.append(q.data.copy())
        stats.append(step_stats[0])
    return np.array(draws), stats


def record_compiled_probes(monkeypatch) -> list:
    """The results of every call of the compiled probe from ``SFPStep``, in a list that fills
    as the step probes."""
    probes = []
    probe = CompiledSweep.probe

    def recorded(*args, **kwargs):
        probes.append(probe(*args, **kwargs))
        return probes[-1]

    monkeypatch.setattr(CompiledSweep, "probe", recorded)
    return probes


def test_compiled_sweep_is_compiled_once_per_kind_of_model():
    """The kernel takes the model's functions by the address of their machine code
    (``FunctionAddress``), so it is compiled for their signature, not for them: the same model
    built again adds no compilation, and the kernel is cached on disk (a new process loads it)."""
    with small_model():
        SFPStep(L=20, compiled=True)
    compiled = len(sweep_kernel.overloads)
    with small_model():
        step = SFPStep(L=20, compiled=True)
    assert step.kernel == "numba"
    assert len(sweep_kernel.overloads) == compiled
    assert not isinstance(sweep_kernel._cache, NullCache)


def test_the_compiled_sweep_is_prepared_once_and_made_again_after_a_pickle():
    """The step prepares its compiled sweep once (the kernel's fixed arguments and entry
    point) and reuses it at every draw; a pickled step, as PyMC sends one to a worker process,
    leaves the machine code behind and makes it again, with the same draws."""
    model = small_model()
    with model:
        step = SFPStep(L=8, compiled=True)
    kernel, _ = step._compiled_sweep()
    sent = cloudpickle.dumps(step)
    draws, _ = run(step, model, 20)
    assert step._compiled_sweep()[0] is kernel
    received = cloudpickle.loads(sent)
    assert received._compiled is None and received.kernel == "numba"
    received_draws, _ = run(received, model, 20)
    np.testing.assert_array_equal(received_draws, draws)


def test_building_the_compiled_sweep_does_not_warn_about_numbas_first_class_functions():
    """Numba calls the kernel's function addresses experimental when it types a tuple of them
    (a line per variable) and when it compiles: nothing a user can act on, so not shown."""
    with pm.Model():
        pm.Normal("a", 0.0, 1.0, shape=3)
        pm.Normal("b", 0.0, 1.0, shape=2)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            step = SFPStep(L=20, compiled=True)
    assert step.kernel == "numba" and len(step.evaluator.jitted().along) == 2
    assert not [w for w in caught if issubclass(w.category, NumbaExperimentalFeatureWarning)]


@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")
def test_a_model_that_raises_in_the_compiled_sweep_raises_its_own_error():
    """A log-density that raises inside the compiled sweep (here an ``Assert`` beyond x = 2):
    the kernel stops, and the sweep is made again by the NumPy kernel, which calls the model
    from Python, so the user gets the model's exception with its message."""
    with pm.Model() as model:
        x = pm.Normal("x", 0.0, 1.0)
        pm.Potential("guard", Assert("x beyond 2")(pt.constant(0.0), x < 2.0))
        step = SFPStep(bounds=(-3.0, 3.0), L=20)
    assert step.kernel == "numba"
    with pytest.raises(AssertionError, match="x beyond 2"):
        run(step, model, 1)


def test_a_sweep_made_again_after_a_failed_compiled_one_makes_the_numpy_sweeps_draws(
    monkeypatch,
):
    """Where the compiled sweep fails but the model does not raise when the NumPy kernel calls
    it from Python, the NumPy kernel makes the sweep from the same random numbers: the chain is
    the chain of ``compiled=False`` from the same seed. The failure is simulated after the
    compiled sweep has run, so it has taken whatever random numbers it takes."""
    model = small_model()
    with model:
        steps = [SFPStep(L=8, compiled=choice) for choice in (True, False)]
    calls = []
    sweep = CompiledSweep.sweep

    def failing_compiled_sweep(*args, **kwargs):
        calls.append(sweep(*args, **kwargs))
        raise ModelCallError(0)

    monkeypatch.setattr(CompiledSweep, "sweep", failing_compiled_sweep)
    draws, _ = run(steps[0], model, 30)
    reference_draws, _ = run(steps[1], model, 30)
    assert len(calls) == 30 and steps[0].kernel == "numba"
    np.testing.assert_array_equal(draws, reference_draws)


def test_a_probe_made_again_after_a_failed_compiled_one_finds_the_numpy_probes_boxes(
    monkeypatch,
):
    """Where the compiled probe fails (simulated: the model does not raise from Python), the
    NumPy probe is made instead: the boxes after the refit, and the draws, are the NumPy
    kernel's."""
    model = small_model()
    with model:
        steps = [SFPStep(L=8, compiled=choice) for choice in (True, False)]

    def failing_compiled_probe(*args, **kwargs):
        raise ModelCallError(0)

    monkeypatch.setattr(CompiledSweep, "probe", failing_compiled_probe)
    draws, _ = run(steps[0], model, 30)
    reference_draws, _ = run(steps[1], model, 30)
    np.testing.assert_allclose(draws, reference_draws, rtol=1e-10, atol=0.0)
    np.testing.assert_allclose(steps[0].box_lower, steps[1].box_lower, rtol=1e-10)
    np.testing.assert_allclose(steps[0].box_upper, steps[1].box_upper, rtol=1e-10)


@pytest.mark.parametrize("marginal_points", [4, None])
@pytest.mark.parametrize("correct", [True, False])
def test_compiled_sweep_makes_the_numpy_sweeps_draws(correct, marginal_points, monkeypatch):
    """30 tuning sweeps (a box refit with its probe at 25, compiled too): every draw and every
    stat of the compiled sweep equal the NumPy sweep's from the same seed, with the CDFs
    recorded between the nodes or by default (at the nodes and the cells' middles)."""
    model = small_model()
    with model:
        steps = [
            SFPStep(L=8, correct=correct, marginal_points=marginal_points, compiled=choice)
            for choice in (True, False)
        ]
    assert steps[0].kernel == "numba" and steps[0].fallback_reason is None
    assert steps[1].kernel == "numpy" and steps[1].fallback_reason == "compiled=False"
    probes = record_compiled_probes(monkeypatch)
    draws, stats = run(steps[0], model, 30)
    assert len(probes) == 1 and np.isfinite(probes[0][0][steps[0]._auto]).all()
    reference_draws, reference_stats = run(steps[1], model, 30)
    assert len(probes) == 1
    # Equal up to the last bits of floating point (NumPy's SIMD exp/log against the C library's,
    # tests/core/test_compiled_sweep.py), which 30 sweeps carry forward to ~1e-14; every
    # decision (acceptance, evaluations, edge hits) is exactly the same.
    close = {"rtol": 1e-10, "atol": 0.0}
    np.testing.assert_allclose(draws, reference_draws, **close)
    for compiled, reference in zip(stats, reference_stats, strict=True):
        for name, value in reference.items():
            if isinstance(value, float | np.ndarray) and np.asarray(value).dtype.kind == "f":
                np.testing.assert_allclose(compiled[name], value, **close, err_msg=name)
            else:
                assert compiled[name] == value, name
    np.testing.assert_allclose(steps[0].box_lower, steps[1].box_lower, **close)
    np.testing.assert_allclose(steps[0].box_upper, steps[1].box_upper, **close)


def test_compiled_sweep_makes_the_numpy_sweeps_draws_under_a_tabulated_prior():
    """SFP-I's prior (``marginal_prior``, Eq. 21) on every weight and bias keeps them on the
    structured line. One weight's marginal excludes the start, so the prior there is ``-inf``
    (the line counts such terms in the cache instead of summing them): the compiled sweep, which
    advances that count with the rest of the cache, makes the NumPy sweep's draws, and the chain
    leaves the start."""
    rng = np.random.default_rng(4)
    broad = Marginal(np.linspace(-1.0, 1.0, 5), np.linspace(0.0, 1.0, 5) ** 2)
    with pm.Model() as model:
        net = nn.mlp(rng.normal(size=(20, 2)), (2, 3, 1), prior="uniform")
        nn.gaussian_likelihood(net, rng.normal(size=(20, 1)), sigma=0.5)
        for var in [*net.weights, *net.biases]:
            marginals = np.full(static_shape(var, model), broad, dtype=object)
            if var is net.weights[0]:
                marginals.flat[0] = Marginal(np.array([0.2, 0.8]), np.array([0.0, 1.0]))
            marginal_prior(var, marginals)
        steps = [SFPStep(L=10, marginal_points=0, compiled=choice) for choice in (True, False)]
    assert steps[0].kernel == "numba" and steps[0].evaluator.structured.all()
    draws, _ = run(steps[0], model, 5)
    reference_draws, _ = run(steps[1], model, 5)
    np.testing.assert_allclose(draws, reference_draws, rtol=1e-10, atol=0.0)
    logp = model.compile_logp()
    start = DictToArrayBijection.map(model.initial_point())
    last = DictToArrayBijection.rmap(RaveledVars(draws[-1], start.point_map_info))
    assert np.isneginf(logp(model.initial_point())) and np.isfinite(logp(last))


def test_falls_back_with_its_reason():
    """Collocation and a model compiled without Numba run the NumPy sweep and say why;
    ``compiled=True`` refuses them."""
    model = small_model()
    with model:
        # Unbatched, collocation compiles no vectorised gradient (seconds less of test time).
        step = SFPStep(L=8, solver="collocation", batched=False)
        assert step.kernel == "numpy" and "collocation" in step.fallback_reason
        with pytest.raises(ValueError, match=r"compiled=True.*collocation"):
            SFPStep(L=8, solver="collocation", batched=False, compiled=True)
        step = SFPStep(L=8, compile_kwargs={"mode": "FAST_COMPILE"})
        assert step.kernel == "numpy" and "Numba backend" in step.fallback_reason
        for value in ("yes", 1):
            with pytest.raises(TypeError, match="compiled must be True or False, got"):
                SFPStep(compiled=value)
    draws, stats = run(step, model, 3)
    assert np.isfinite(draws).all() and all(s["n_logp_evals"] > 0 for s in stats)


def network_steps(seed: int) -> tuple[pm.Model, list[SFPStep]]:
    """A 2-3-1 network with group scales on 20 random rows, and SFPStep on it (L = 10, no
    marginals) with the compiled and the NumPy sweep."""
    rng = np.random.default_rng(seed)
    with pm.Model() as model:
        net = nn.mlp(rng.normal(size=(20, 2)), (2, 3, 1), prior="group")
        nn.gaussian_likelihood(net, rng.normal(size=(20, 1)), sigma=0.5)
        steps = [SFPStep(L=10, marginal_points=0, compiled=choice) for choice in (True, False)]
    return model, steps


def test_compiled_sweep_makes_the_numpy_sweeps_draws_on_a_network():
    """A network with a hierarchical prior: its weights take the structured line and its group
    scales the general one (``pymc_sfp._network_line``). The compiled sweep reads the network
    from a cache it advances after each accepted move (and evaluates the correction's proposal
    through it), the NumPy sweep computes the network afresh at every call: the same draws.
    The same model built again on other data reuses the compiled functions, and still makes
    the NumPy sweep's draws on its own data."""
    jitted = []
    for seed in (1, 2):
        model, steps = network_steps(seed)
        assert steps[0].kernel == "numba"
        structured = steps[0].evaluator.structured
        assert structured is not None and 0 < structured.sum() < len(structured)
        jitted.append(steps[0].evaluator.jitted())
        draws, _ = run(steps[0], model, 5)
        reference_draws, _ = run(steps[1], model, 5)
        np.testing.assert_allclose(draws, reference_draws, rtol=1e-10, atol=0.0)
    assert jitted[1].along[0] is jitted[0].along[0] and jitted[1].point is jitted[0].point


def test_compiled_probe_reads_a_networks_lines_at_the_chains_point(monkeypatch):
    """The probe at tuning draw 25 on a network: the weights' structured lines read the
    network from the cache made at the chain's point (the probe moves nothing, so the cache is
    never advanced), the group scales' general lines evaluate it in full. The boxes it refits
    and the draws after it are the NumPy step's, whose probe evaluates every line afresh."""
    model, steps = network_steps(5)
    assert steps[0].kernel == "numba"
    structured = steps[0].evaluator.structured
    assert 0 < structured[steps[0]._auto].sum() < steps[0]._auto.sum()
    probes = record_compiled_probes(monkeypatch)
    draws, _ = run(steps[0], model, 28)
    reference_draws, _ = run(steps[1], model, 28)
    assert len(probes) == 1
    # A draw near 0 is placed to within 1e-12 of its box's width (tests/core): the last bits.
    width = float(np.max(steps[1].box_upper - steps[1].box_lower))
    np.testing.assert_allclose(draws, reference_draws, rtol=1e-10, atol=1e-12 * width)
    np.testing.assert_allclose(steps[0].box_lower, steps[1].box_lower, rtol=1e-10)
    np.testing.assert_allclose(steps[0].box_upper, steps[1].box_upper, rtol=1e-10)


_NETWORK_STEP_SCRIPT = """
import numpy as np, pymc as pm
from pymc_sfp import SFPStep, nn
rng = np.random.default_rng(7)
with pm.Model():
    net = nn.mlp(rng.normal(size=(15, 2)), (2, 3, 1), prior="group")
    nn.gaussian_likelihood(net, rng.normal(size=(15, 1)), sigma=0.5)
    step = SFPStep(L=10, marginal_points=0)
jitted = step.evaluator.jitted()
print(sum(sum(f.stats.cache_hits.values()) for f in (jitted.point, *jitted.along)))
"""


def test_a_network_steps_compiled_wrappers_come_from_the_disk_cache_in_a_new_process():
    """The wrappers around a network's structured line (``compile._cached_line``) are generated
    source, which Numba's own disk cache cannot hold; they go into PyTensor's. A second process
    building the same step loads both from it instead of compiling them (the first may too,
    if an earlier run cached them)."""
    hits = [
        subprocess.run(
            [sys.executable, "-c", _NETWORK_STEP_SCRIPT],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.split()[-1]
        for _ in range(2)
    ]
    assert hits[1] == "2", hits


def test_a_network_on_other_data_samples_the_same_from_a_copied_compilation(monkeypatch):
    """A model of the same structure on other data (a cross-validation split) reuses the first
    model's compilation (``compile._Template``, copied with its shared data swapped); its draws
    are those of the model compiled afresh, bit for bit, the structured line included."""
    from pymc_sfp import compile as compile_module

    rng = np.random.default_rng(5)
    splits = [(rng.normal(size=(20, 2)), rng.normal(size=20)) for _ in range(2)]

    def network(X, y):
        with pm.Model() as model:
            net = nn.mlp(X, (2, 3, 1), prior="uniform")
            nn.gaussian_likelihood(net, y, D=0.1)
        return model

    def draws():
        with network(*splits[1]):
            step = SFPStep(L=20)
            assert step.evaluator.structured is not None
            return pm.sample(
                draws=15,
                tune=10,
                chains=1,
                step=step,
                random_seed=3,
                progressbar=False,
                compute_convergence_checks=False,
            ).posterior.to_dataset()

    with network(*splits[0]):
        SFPStep(L=20)
    compiled = counted_compilations(monkeypatch)
    copied = draws()
    assert compiled == []
    monkeypatch.setattr(compile_module, "_TEMPLATES", [])
    fresh = draws()
    assert compiled
    for name in copied.data_vars:
        np.testing.assert_array_equal(copied[name].values, fresh[name].values)
