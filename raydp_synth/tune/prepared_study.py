"""What a study settled before Ray starts (:mod:`raydp_synth.tune.preparation`), as
its strategy and its steps read it."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from raydp_synth.data import DataInfo
    from raydp_synth.data.public import PublicDeclaration
    from raydp_synth.methods.base import Method
    from raydp_synth.privacy.plan import PrivacyPlan
    from raydp_synth.tune.search_space import SearchSpace

__all__ = ["PreparedStudy"]


@dataclass(frozen=True, kw_only=True)
class PreparedStudy:
    """What the driver settles before Ray starts, from the request and public facts.

    Attributes:
        name: the study's name; study_dir: its directory (absolute).
        method: the method tuned.
        data: public facts of the training split.
        public: the effective public-data declaration, or None.
        space: the search space, fitted to ``data``.
        default: the method's default config with the space's fixed values: random
            stopping's reference plan, and compose's first trial.
        reference: the strategy's reference plan E_ref (random stopping, subsampled
            tuning); None under compose.
        score_share: the selection score's budget fraction (0: public validation).
        public_search: ``--tune-on-public``'s public facts, or None.
        tuning_rdp: ``--strategy subsampled``'s tuning-phase RDP curve (from
            ``reference``, public arithmetic), or None.
        num_val: the validation split's size (the tuning subset is drawn from it too).
    """

    name: str
    study_dir: Path
    method: Method
    data: DataInfo
    public: PublicDeclaration | None
    space: SearchSpace
    default: Any
    reference: PrivacyPlan | None
    score_share: float
    public_search: Any = None
    tuning_rdp: tuple[float, ...] | None = None
    num_val: int = 0
