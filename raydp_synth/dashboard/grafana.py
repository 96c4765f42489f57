"""raydp_synth's Grafana dashboard: the accountant's budget gauges per study and the
trials' reported metrics.

The dashboard is a file of the package, ``grafana/raydp_synth.json`` (import it into
any Grafana whose Prometheus scrapes the Ray cluster, or let ``raydp-synth
dashboard`` provision it next to Ray's own). Its panels query the names of
:mod:`raydp_synth.accountant.gauges` and :mod:`raydp_synth.tune.trial_metrics` as Ray
exports them (``ray_`` + name), filtered by a ``study`` variable, on a ``datasource``
variable (Ray's provisioned Prometheus by default). The tests run each panel's query
against a real Prometheus scraping a study.
"""

from __future__ import annotations

import json
from importlib import resources
from typing import Any

__all__ = ["DASHBOARD_FILE_NAME", "DASHBOARD_UID", "dashboard", "dashboard_json", "panel_queries"]

#: The file's name, in the package and in Grafana's dashboards folder.
DASHBOARD_FILE_NAME = "raydp_synth.json"
DASHBOARD_UID = "raydp-synth-budget"


def dashboard_json() -> str:
    """The dashboard file's text."""
    return (resources.files(__package__) / "grafana" / DASHBOARD_FILE_NAME).read_text()


def dashboard() -> dict[str, Any]:
    """The dashboard, parsed (a fresh copy)."""
    board: dict[str, Any] = json.loads(dashboard_json())
    return board


def panel_queries(board: dict[str, Any] | None = None) -> dict[str, list[str]]:
    """Each panel's title -> its PromQL queries (rows have none)."""
    board = dashboard() if board is None else board
    return {panel["title"]: [target["expr"] for target in panel.get("targets", [])]
            for panel in board["panels"] if panel.get("type") != "row"}
