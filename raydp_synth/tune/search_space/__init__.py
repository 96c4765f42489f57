"""Search spaces: what a study of one method may try.

A search space is a YAML file for one method: the params Optuna samples and the
settings fixed in every trial. Each method ships its default as package data, next
to its code (``raydp_synth/methods/<package>/search_space.yaml``, see
:meth:`~raydp_synth.methods.base.Method.search_space_file`); ``--search-space FILE``
replaces it (``search_spaces/README.md`` shows how to write one).

One idea per module:

* :mod:`~raydp_synth.tune.search_space.schema`: the file format and its validation
  against the method's config class;
* :mod:`~raydp_synth.tune.search_space.params`: the params, one Optuna distribution
  each;
* :mod:`~raydp_synth.tune.search_space.fitting`: fitting a space to the data's public
  facts (choices that cannot build a model are dropped with a note);
* :mod:`~raydp_synth.tune.search_space.space`: :class:`SearchSpace`, what Ray Tune's
  ``OptunaSearch`` samples (:meth:`SearchSpace.define_by_run`) and how a trial reads
  its settings back (:meth:`SearchSpace.settings_from_trial_config`);
* :mod:`~raydp_synth.tune.search_space.samplers`: the Optuna samplers;
* :mod:`~raydp_synth.tune.search_space.loading`: reading a file (or the default) and
  putting the steps together (:func:`load_search_space`).
"""

from raydp_synth.tune.search_space.loading import load_search_space, parse_search_space
from raydp_synth.tune.search_space.params import (
    CategoricalParam,
    FloatParam,
    IntParam,
    Param,
    WeightsParam,
)
from raydp_synth.tune.search_space.samplers import SAMPLER_KINDS, is_adaptive, make_sampler
from raydp_synth.tune.search_space.schema import RESERVED
from raydp_synth.tune.search_space.space import SearchSpace

__all__ = [
    "RESERVED",
    "SAMPLER_KINDS",
    "CategoricalParam",
    "FloatParam",
    "IntParam",
    "Param",
    "SearchSpace",
    "WeightsParam",
    "is_adaptive",
    "load_search_space",
    "make_sampler",
    "parse_search_space",
]
