"""Numerical cores: plain NumPy functions over arrays, no PyMC import, each testable alone.

The PyMC adapters (:mod:`pymc_sfp.step_methods`) sit on top of these modules; nothing here
imports them, PyMC or PyTensor.
"""
