"""The curator's evaluation at test size, for the tests that need one to run but check
only that it ran (its files, what it changed), not its figures.

The product's evaluation (10,000 samples and two 400-step CNNs for DPAF) takes several
minutes of a contended CI core; every figure is the same code at any size.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from raydp_synth.evaluation import classifiers
from raydp_synth.methods.registry import get_method

#: (final, curve) synthetic samples, in place of the method's ``evaluation_samples``.
SAMPLES = (2_000, 500)
#: Optimiser steps of the CAS CNN and of the domain CNN (FID/IS), 400 in the product.
CNN_STEPS = 50


@contextmanager
def small_evaluation(method: str, *modules: object) -> Iterator[None]:
    """Within the block, ``method``'s evaluation runs at :data:`SAMPLES` and
    :data:`CNN_STEPS`. ``modules``: the modules whose ``evaluation_settings`` the
    evaluation is built with (e.g. ``raydp_synth.train.driver``), as they import it."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(type(get_method(method)), "evaluation_samples", SAMPLES)
        for module in modules:
            settings = module.evaluation_settings  # type: ignore[attr-defined]
            patch.setattr(module, "evaluation_settings", lambda settings=settings, **kw:
                          dataclasses.replace(settings(**kw), feature_steps=CNN_STEPS))
        patch.setitem(classifiers.fit_classifier.__kwdefaults__, "cnn_steps", CNN_STEPS)
        patch.setitem(classifiers.CLASSIFIER_STEPS, "cnn", CNN_STEPS)
        yield
