"""The contract every DP image-synthesis method implements.

A method is a plug-in: the rest of raydp_synth (training CLI, Ray Train driver,
tuner, accountant) only talks to this interface. A method knows

* its typed configuration and its defaults (:meth:`Method.make_config`);
* its schedule of noised mechanisms (sample rates, steps, sensitivities, budget
  weights), from public quantities only (:meth:`Method.schedule`); the base
  class calibrates it, with the run's private selection score, into the
  privacy plan (:meth:`Method.plan`);
* how to run its DP loop on one Ray Train worker (:meth:`Method.train`), reporting
  only the metric keys on its :attr:`Method.metric_allowlist`;
* how to rebuild its generator from a checkpoint (:meth:`Method.build_generator`);
* what a study tries by default: its search space, a YAML file of the method's own
  package (:attr:`Method.search_space_resource`, :meth:`Method.search_space_file`);
* whether it needs data declared public (:attr:`Method.requires_public`) and the
  settings of a quick run (:attr:`Method.smoke_settings`).

Contract: ``plan`` reads no sensitive data. ``train`` reads sensitive records only
as :class:`~raydp_synth.privacy.records.RecordBatch` objects drawn from
``ctx.sampler(mechanism)`` of a plan mechanism, and only inside that mechanism's
pre-noise function, passed through ``ctx.pre_noise_sum(mechanism, fn, batch)``;
the function computes the sum over the batch of per-record contributions from the
loop's current state, each record's term depending on that record (and its own
secret draws) alone, bounded by the plan's sensitivity, and must not change the
loop's state. The caller noises the sum with the plan's multiplier. The
neighbouring-dataset contract test runs the loop with an auditor on
``pre_noise_sum`` and checks each release on the batch and on the batch without
each of its records. Every value passed to ``ctx.report`` is on the allow-list and
is computed from synthetic/public data, a post-processing of released values, or a
release in the plan.
"""

from __future__ import annotations

import importlib.resources
import sys
from abc import ABC, abstractmethod
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, ClassVar

import torch

from raydp_synth.config import MethodConfig, config_from_mapping
from raydp_synth.data.info import DataInfo
from raydp_synth.privacy.calibration import MechanismSpec, PlanPrice, calibrate_plan
from raydp_synth.privacy.plan import Mechanism, PrivacyPlan
from raydp_synth.privacy.selection_score import with_score_mechanism

if TYPE_CHECKING:
    from importlib.resources.abc import Traversable

    from raydp_synth.runtime.context import WorkerContext

__all__ = ["Method"]


class Method(ABC):
    """A DP image-synthesis method. See the module docstring for the contract."""

    name: ClassVar[str]
    config_class: ClassVar[type[MethodConfig]]
    metric_allowlist: ClassVar[frozenset[str]]
    #: Public-data declarations a method uses when the user gives no ``--public``,
    #: by dataset spec (only for public embedded data, documented in the README).
    default_public: ClassVar[Mapping[str, str]] = {}
    #: Synthetic images an evaluation draws by default: (final figures, each
    #: checkpoint of the curve). Sampling cost differs a lot between methods.
    evaluation_samples: ClassVar[tuple[int, int]] = (10_000, 2_000)
    #: Whether the method needs data declared public (``--public``, or its
    #: ``default_public`` declaration): ``make_config`` refuses data without any.
    requires_public: ClassVar[bool] = False
    #: Settings of a quick run, for tests and smoke runs: every mechanism of the plan
    #: releases a few times on a couple of hundred records, in seconds on a CPU. Not a
    #: recommended configuration.
    smoke_settings: ClassVar[Mapping[str, Any]] = {}
    #: The method's default search space, what a study tries when the user gives no
    #: ``--search-space``: a YAML file in the method's package, shipped as package data
    #: (:mod:`raydp_synth.tune.search_space` documents the format).
    search_space_resource: ClassVar[str] = "search_space.yaml"

    def search_space_file(self) -> Traversable:
        """The default search space file: :attr:`search_space_resource` in the package
        that defines the method's class, read through :mod:`importlib.resources` (so it
        is found in an installed wheel as in a checkout). It may not exist: a method
        need not ship one."""
        package = sys.modules[type(self).__module__].__package__
        if not package:
            raise TypeError(f"{type(self).__name__} is not defined in a package")
        return importlib.resources.files(package).joinpath(self.search_space_resource)

    def make_config(self, values: Mapping[str, Any], data: DataInfo) -> Any:
        """A validated config from user values (``--set``, search space) and defaults;
        ``image_size`` defaults to the data's."""
        values = dict(values)
        values.setdefault("image_size", data.image_size)
        return config_from_mapping(self.config_class, values)

    @abstractmethod
    def schedule(self, config: Any, data: DataInfo) -> list[MechanismSpec]:
        """Every noised mechanism of one training run, noise still to calibrate."""

    def plan(
        self,
        config: Any,
        *,
        target_epsilon: float,
        delta: float,
        data: DataInfo,
        score_share: float = 0.0,
        price: PlanPrice | None = None,
    ) -> PrivacyPlan:
        """The calibrated privacy plan of one run; reads no sensitive data.

        Args:
            target_epsilon, delta: the budget the plan is calibrated to.
            score_share: fraction of the budget for the private selection score
                (a ``Gaussian(sigma_score)`` release, docs/budget-pricing.md,
                section 5); 0 when the run scores on public data or not at all.
            price: what must stay <= target_epsilon (default: the plan's own epsilon; a
                study prices the plan within the whole search, see
                :func:`~raydp_synth.privacy.calibration.calibrate_plan`).
        """
        specs = with_score_mechanism(self.schedule(config, data), score_share)
        return calibrate_plan(specs, target_epsilon=target_epsilon, delta=delta, price=price)

    def non_private_plan(
        self, config: Any, *, delta: float, data: DataInfo, score: bool = True
    ) -> PrivacyPlan:
        """The same schedule with no noise: the non-private reference of this
        model (epsilon = inf), to measure what privacy costs. Never released."""
        specs = with_score_mechanism(self.schedule(config, data), 0.5 if score else 0.0)
        return PrivacyPlan(
            mechanisms=tuple(
                Mechanism(name=s.name, noise_multiplier=0.0, sample_rate=s.sample_rate,
                          num_steps=s.num_steps, sensitivity=s.sensitivity, every=s.every)
                for s in specs
            ),
            delta=delta,
            target_epsilon=float("inf"),
        )

    @abstractmethod
    def train(self, ctx: WorkerContext) -> None:
        """Run the DP loop on one Ray Train worker."""

    @abstractmethod
    def build_generator(self, config: Any, data: DataInfo) -> torch.nn.Module:
        """An untrained generator of the right shape (``load_state_dict`` follows)."""

    def sample(
        self, generator: torch.nn.Module, config: Any, labels: torch.Tensor, *, rng: torch.Generator
    ) -> torch.Tensor:
        """Images for ``labels`` from a conditional generator ``G(z, labels)``, with
        latents ``z ~ N(0, I_latent_dim)`` drawn from ``rng``. Methods whose
        generator samples otherwise (diffusion) override this."""
        device = next(generator.parameters()).device
        z = torch.randn(len(labels), config.latent_dim, generator=rng).to(device)
        with torch.no_grad():
            return generator(z, labels.to(device))
