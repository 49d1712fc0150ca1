"""Tests for pymc_sfp.nn.network: the structure :func:`mlp` builds (variables, dims, coords) and
its argument checks. Nothing is compiled."""

from __future__ import annotations

import gc
import weakref

import cloudpickle
import numpy as np
import pymc as pm
import pytest
import xarray as xr

from pymc_sfp import SFPStep
from pymc_sfp.nn import PRIORS, gaussian_likelihood, mlp
from pymc_sfp.nn.network import networks_of

RNG = np.random.default_rng(20260101)
X6 = RNG.normal(size=(6, 2))


@pytest.mark.parametrize("prior", PRIORS)
def test_dims_coords_and_variables(prior):
    with pm.Model() as model:
        net = mlp(X6, (2, 4, 3, 2), prior=prior, prior_scale=0.5)
    unit_dims = ("net_in", "net_hidden0", "net_hidden1", "net_out")
    assert net.unit_dims == unit_dims
    assert [len(model.coords[d]) for d in unit_dims] == [2, 4, 3, 2]
    assert model.named_vars_to_dims["net_X"] == ("net_obs", "net_in")
    assert net.X is model["net_X"] and net.obs_dim == "net_obs"
    for layer in range(3):
        w_dims = unit_dims[layer : layer + 2]
        assert model.named_vars_to_dims[f"net_w{layer}"] == w_dims
        assert model.named_vars_to_dims[f"net_b{layer}"] == w_dims[1:]
        assert model.shape_from_dims(w_dims) == ((2, 4, 3, 2)[layer], (2, 4, 3, 2)[layer + 1])
        assert net.weights[layer] is model[f"net_w{layer}"]
        assert net.biases[layer] is model[f"net_b{layer}"]
    free = {rv.name: rv.owner.op.name for rv in model.free_RVs}
    params = [f"net_{kind}{layer}" for layer in range(3) for kind in "wb"]
    if prior in ("uniform", "gaussian"):
        assert free == dict.fromkeys(params, "uniform" if prior == "uniform" else "normal")
        assert net.scales == {}
        assert not model.deterministics
    else:
        groups = ["w0", "b0", "w1", "b1", "out"]
        assert free == {
            **{f"net_sd_{g}": "halfnormal" for g in groups},
            **{f"{p}_z": "normal" for p in params},
        }
        assert {g: v.name for g, v in net.scales.items()} == {g: f"net_sd_{g}" for g in groups}
        assert {v.name for v in model.deterministics} == set(params)
        assert model.named_vars_to_dims.get("net_sd_w0") == (
            ("net_in",) if prior == "ard" else None
        )
    assert net.output.ndim == 2 and net.logits is net.output
    assert net.targets is None  # only an integrated output layer has targets to attach


def test_existing_data_container_keeps_its_dims_and_coords():
    features = ["angle", "speed", "load"]
    with pm.Model(coords={"feature": features}) as model:
        X = pm.Data("inputs", RNG.normal(size=(5, 3)), dims=("case", "feature"))
        net = mlp(X, (3, 2, 2), output="softmax", name="clf", deterministic=True)
    assert net.X is X and net.obs_dim == "case"
    assert model.coords["feature"] == tuple(features)
    assert model.named_vars_to_dims["clf_w0"] == ("feature", "clf_hidden0")
    assert model.named_vars_to_dims["clf_output"] == ("case", "clf_out")
    assert net.output is model["clf_output"] and net.logits is not net.output


def test_centred_needs_a_hierarchical_prior():
    with pm.Model(), pytest.raises(ValueError, match=r"centred=True applies to .* not 'uniform'"):
        mlp(X6, (2, 3, 1), centred=True)


def test_nan_rows_are_named():
    X = X6.copy()
    X[[1, 4], 0] = np.nan
    with pm.Model(), pytest.raises(ValueError, match=r"X has NaN .* 2 row\(s\): \[1, 4\]"):
        mlp(X, (2, 3, 1))
    Y = np.zeros((20, 1))
    Y[3:10] = np.nan
    with pm.Model():
        net = mlp(RNG.normal(size=(20, 2)), (2, 3, 1))
        with pytest.raises(ValueError, match=r"y has NaN .* 7 row\(s\): \[3, 4, 5, 6, 7, \.\.\.\]"):
            gaussian_likelihood(net, Y)
        with pytest.raises(ValueError, match=r"X_new has NaN .* \[0\]"):
            net.predict(xr.Dataset(), np.array([[np.nan, 1.0]]))


def test_bad_network_arguments():
    with pm.Model():
        with pytest.raises(ValueError, match=r"prior must be one of \('uniform', 'gaussian', "):
            mlp(X6, (2, 3, 1), prior="laplace")
        with pytest.raises(ValueError, match="output must be one of"):
            mlp(X6, (2, 3, 1), output="sigmoid")
        with pytest.raises(ValueError, match=r"layer_sizes\[0\] = 3 must equal .* columns of X, 2"):
            mlp(X6, (3, 3, 1))
        with pytest.raises(ValueError, match="at least three positive integers"):
            mlp(X6, (2, 1))
        with pytest.raises(ValueError, match="at least three positive integers"):
            mlp(X6, (2, 0, 1))
        with pytest.raises(ValueError, match="softmax outputs need"):
            mlp(X6, (2, 3, 1), output="softmax")
        with pytest.raises(ValueError, match="prior_scale must be a finite number > 0"):
            mlp(X6, (2, 3, 1), prior_scale=0.0)
        with pytest.raises(TypeError, match="prior_scale must be a real number"):
            mlp(X6, (2, 3, 1), prior_scale="1")
        with pytest.raises(ValueError, match="must be 2-D"):
            mlp(X6[:, 0], (1, 3, 1))
        with pytest.raises(ValueError, match="X has no rows"):
            mlp(np.zeros((0, 2)), (2, 3, 1))
    with pm.Model(coords={"net_hidden0": ["a", "b"]}), pytest.raises(ValueError, match="length 2"):
        mlp(X6, (2, 3, 1))


def test_coords_of_other_lengths_are_refused():
    """A dim of the network given another length by the model's coords (values, or a length
    alone) is refused when the network is built, not after sampling."""
    with (
        pm.Model(coords={"net_obs": range(5)}),
        pytest.raises(ValueError, match="'net_obs' length 5, not 6"),
    ):
        mlp(X6, (2, 3, 1))
    with pm.Model() as model:
        model.add_coord("net_hidden0", length=5)
        with pytest.raises(ValueError, match="'net_hidden0' length 5, not 3"):
            mlp(X6, (2, 3, 1))


def test_flags_and_inputs_of_the_wrong_kind():
    with pm.Model():
        with pytest.raises(TypeError, match="deterministic must be True or False, got 'no'"):
            mlp(X6, (2, 3, 1), deterministic="no")
        with pytest.raises(TypeError, match="centred must be True or False"):
            mlp(X6, (2, 3, 1), prior="group", centred="yes")
        first = mlp(X6, (2, 3, 2), name="first")
        with pytest.raises(TypeError, match=r"X must be an array or a pm\.Data container"):
            mlp(first.output, (2, 3, 1), name="second")
        with pytest.raises(TypeError, match="sigma must be a number"):
            gaussian_likelihood(first, X6, sigma=True)
        with pytest.raises(ValueError, match=r"sigma of shape \(3,\) does not broadcast"):
            gaussian_likelihood(first, X6, sigma=[0.1, 0.2, 0.3])
        one_output = mlp(X6, (2, 3, 1), name="third")
        with pytest.raises(ValueError, match=r"sigma of shape \(6,\) does not broadcast"):
            gaussian_likelihood(one_output, X6[:, 0], sigma=np.ones(6))


def test_a_network_does_not_keep_its_model_alive():
    """A model's networks and the model are garbage together: a process-wide registry of
    networks kept every model built with ``mlp`` (and its data) for the whole process."""

    def build():
        with pm.Model() as model:
            net = mlp(X6, (2, 3, 1))
        assert net.model is model
        return weakref.ref(model)

    model = build()
    gc.collect()
    assert model() is None


def test_a_network_travels_with_its_model():
    """Pickled (as joblib and PyMC's spawned workers do, with cloudpickle), a model keeps its
    networks, so that SFPStep still finds their structure; a network alone pickles too."""
    with pm.Model() as model:
        net = mlp(X6, (2, 3, 1))
        gaussian_likelihood(net, X6[:, 0], sigma=0.1)
    copy_model, copy_net = cloudpickle.loads(cloudpickle.dumps((model, net)))
    assert networks_of(copy_model) == (copy_net,) and copy_net.model is copy_model
    with copy_model:
        step = SFPStep(L=10, marginal_points=0)
    assert step.evaluator.structure_note == f"network {net.name!r}"
    alone = cloudpickle.loads(cloudpickle.dumps(net))
    assert networks_of(alone.model) == (alone,)
