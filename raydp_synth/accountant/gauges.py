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

Privacy: every value is a function of the ledger (the plans granted, their public
prices, the counts of grants and refusals), curator-only like the ledger: the
operator who watches the dashboard is inside the trusted boundary and sees every
trial. Nothing here goes into the release. Under random stopping the count of grants
is K at the end, which the statement never states (the theorem prices the output
without K).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping
from typing import Any

__all__ = ["BUDGET_GAUGES", "PROMETHEUS_PREFIX", "STUDY_TAG", "HeldGauges", "prometheus_name"]

#: The tag that names the study (the accountant's study name) on every gauge.
STUDY_TAG = "study"

#: Key -> (Ray metric name, description), one gauge per key, tagged by study.
BUDGET_GAUGES: dict[str, tuple[str, str]] = {
    "spent": ("raydp_synth_epsilon_spent", "Epsilon of the study so far"),
    "remaining": ("raydp_synth_epsilon_remaining", "Budget epsilon minus spent epsilon"),
    "granted": ("raydp_synth_trials_granted", "Trials whose plan was granted"),
    "refused": ("raydp_synth_trials_refused", "Trials refused and never granted"),
}

#: What Ray's metrics agent puts before an application metric's name.
PROMETHEUS_PREFIX = "ray_"


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
