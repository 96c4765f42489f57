"""The budget gauges that each study's accountant publishes (Ray's metrics API, so
Prometheus scrapes them from the node's metrics agent; ``raydp-synth dashboard``).

Ray exports a metric named ``N`` as ``ray_N``: ``raydp_synth_epsilon_spent`` is
queried as ``ray_raydp_synth_epsilon_spent{study="..."}``. The names are Ray-free, so
that the Grafana dashboard and its tests know them without starting Ray.

:class:`HeldGauges`: Ray 2.60 exports a gauge's value only in the report interval in
which it was set (measured: a value set once is scraped for one interval, about
10 s, then the series is gone), so a budget that changes once per trial would vanish
from Prometheus between grants. Held gauges set their last values again every second
from a daemon thread of the process that owns them.

Privacy (design.md, invariant 15; docs/privacy.md, "The trust boundary"): every value
is a function of the ledger, and the gauges go out on each node's metrics export port,
which is not behind Ray's token. What goes out there is what anyone who reaches that
port may learn, so it depends on the study's pricing mode (:func:`budget_gauges`,
:func:`running_values`, :func:`release_values`):

* ``compose``: the trial count is public (at most ``--trials``) and every grant is
  priced in the statement: all four gauges, set on every decision.
* ``random-stopping`` (DP-HyPO included) and ``subsampled``: the count of grants is
  the secret K (Papernot & Steinke's theorem prices the output without it), and the
  spent epsilon of a subsampled study moves when the tuning phase ends. No count
  gauge exists, and nothing is set while the study runs; ``spent`` and
  ``unspent`` are set once, at the release, to the statement's totals.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping
from typing import Any

from raydp_synth.accountant.strategies import PRICING

__all__ = ["BUDGET_GAUGES", "LIVE_MODES", "PROMETHEUS_PREFIX", "STUDY_TAG", "HeldGauges",
           "budget_gauges", "prometheus_name", "release_values", "running_values"]

#: The tag that names the study (the accountant's study name) on every gauge.
STUDY_TAG = "study"

#: Key -> (Ray metric name, description), one gauge per key, tagged by study.
BUDGET_GAUGES: dict[str, tuple[str, str]] = {
    "spent": ("raydp_synth_epsilon_spent", "Epsilon of the study so far"),
    "unspent": ("raydp_synth_epsilon_unspent",
                "Budget epsilon minus spent epsilon (not what one more plan may use: "
                "composition is not additive)"),
    "granted": ("raydp_synth_trials_granted", "Trials whose plan was granted"),
    "refused": ("raydp_synth_trials_refused", "Trials refused and never granted"),
}

#: What Ray's metrics agent puts before an application metric's name.
PROMETHEUS_PREFIX = "ray_"

#: The pricing modes whose gauges follow the study while it runs: those whose pricing
#: strategy says its counts are public (``live_counts``: compose, whose trial count is
#: public). Every other mode (and a mode added later, unless it says so) exports
#: nothing until its release: fail closed.
LIVE_MODES = frozenset(mode for mode, pricing in PRICING.items() if pricing.live_counts)

#: The gauges of a mode outside :data:`LIVE_MODES`: the budget, never a count.
_RELEASE_GAUGES = ("spent", "unspent")


def _live(mode: str) -> bool:
    """Whether ``mode``'s pricing strategy publishes its counts while the study runs
    (an unknown mode does not)."""
    pricing = PRICING.get(mode)
    return pricing is not None and pricing.live_counts


def budget_gauges(mode: str) -> dict[str, tuple[str, str]]:
    """The gauges (:data:`BUDGET_GAUGES` entries) that a study priced by ``mode``
    registers with Ray: all four under compose; ``spent`` and ``unspent`` otherwise
    (a count of grants or refusals would tell K)."""
    keys = BUDGET_GAUGES if _live(mode) else _RELEASE_GAUGES
    return {key: BUDGET_GAUGES[key] for key in keys}


def running_values(mode: str, *, spent_epsilon: float, unspent_epsilon: float,
                   trials_granted: int, trials_refused: int) -> dict[str, float]:
    """What the accountant sets after each decision while the study runs: every gauge
    under compose; nothing otherwise (not even the epsilon: a subsampled study's moves
    when its tuning phase ends, which tells when the K-th trial finished)."""
    if not _live(mode):
        return {}
    return {"spent": float(spent_epsilon), "unspent": float(unspent_epsilon),
            "granted": float(trials_granted), "refused": float(trials_refused)}


def release_values(statement: Mapping[str, Any]) -> dict[str, float]:
    """What the accountant sets at the release, from the study's statement (what the
    release's privacy.json states anyway): the spent epsilon and what is left of the
    budget. No count, under any mode."""
    spent = float(statement["epsilon"])
    return {"spent": spent, "unspent": max(0.0, float(statement["budget_epsilon"]) - spent)}


def prometheus_name(name: str) -> str:
    """The name Prometheus stores a Ray metric ``name`` under."""
    return PROMETHEUS_PREFIX + name


class HeldGauges:
    """Ray gauges whose last value per tag set is set again every ``period_s``.

    Args:
        gauges: key -> (Ray metric name, description, tag keys).
        period_s: how often the values are set again (well under Ray's report
            interval, ``RAY_metrics_report_interval_ms``, 10 s by default).

    Thread safety: :meth:`set` and the daemon thread share only the dictionary of
    last values, under a lock; the thread reads nothing else of its owner (e.g. the
    accountant's budget is never read off its actor's call thread).
    """

    def __init__(self, gauges: Mapping[str, tuple[str, str, tuple[str, ...]]],
                 period_s: float = 1.0) -> None:
        from ray.util.metrics import Gauge

        self._gauges = {key: Gauge(name, description, tag_keys)
                        for key, (name, description, tag_keys) in gauges.items()}
        self._period_s = period_s
        self._values: dict[tuple[str, tuple[tuple[str, str], ...]], float] = {}
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None

    def set(self, key: str, value: float, tags: Mapping[str, str]) -> None:
        """Set gauge ``key`` for ``tags`` now, and hold the value."""
        tag_items = tuple(sorted(tags.items()))
        with self._lock:
            self._values[(key, tag_items)] = float(value)
            if self._thread is None:
                self._thread = threading.Thread(target=self._hold, name="raydp-held-gauges",
                                                daemon=True)
                self._thread.start()
        self._gauges[key].set(float(value), tags=dict(tag_items))

    def _hold(self) -> None:
        while True:  # a daemon thread: it lives as long as its process
            time.sleep(self._period_s)
            with self._lock:
                values = list(self._values.items())
            for (key, tag_items), value in values:
                self._set_quietly(key, value, dict(tag_items))

    def _set_quietly(self, key: str, value: float, tags: dict[str, Any]) -> None:
        try:
            self._gauges[key].set(value, tags=tags)
        except Exception:  # noqa: BLE001 - a metrics hiccup must not end the thread
            pass
