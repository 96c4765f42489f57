"""The shipped Grafana dashboard: valid, packaged, and querying the metric names the
code exports (the live check of every query against Prometheus is in
test_dashboard_browser.py)."""

from __future__ import annotations

import json
import re

import pytest

from raydp_synth.accountant.gauges import BUDGET_GAUGES, STUDY_TAG, prometheus_name
from raydp_synth.dashboard.grafana import DASHBOARD_UID, dashboard, dashboard_json, panel_queries
from raydp_synth.methods import get_method, method_names
from raydp_synth.tune.trial import TRIAL_METRICS
from raydp_synth.tune.trial_metrics import (
    METRIC_TAG,
    TRIAL_GAUGE,
    TRIAL_TAG,
    exported_metrics,
)

METRIC_NAME = re.compile(r"\b(ray_[a-z_]+)\{")


def test_the_file_is_one_grafana_dashboard_with_study_and_datasource_variables():
    board = json.loads(dashboard_json())
    assert board["uid"] == DASHBOARD_UID
    variables = {v["name"]: v for v in board["templating"]["list"]}
    assert variables["datasource"]["type"] == "datasource"
    assert variables["datasource"]["query"] == "prometheus"
    assert variables["study"]["multi"] and variables["study"]["includeAll"]
    assert variables["study"]["definition"] == (
        f"label_values({prometheus_name(BUDGET_GAUGES['spent'][0])}, {STUDY_TAG})")
    ids = [panel["id"] for panel in board["panels"]]
    assert len(ids) == len(set(ids))
    for panel in board["panels"]:
        if panel["type"] != "row":
            assert panel["datasource"] == {"type": "prometheus", "uid": "${datasource}"}
            assert panel["targets"] and all(t["refId"] for t in panel["targets"])


def test_every_query_names_an_exported_metric_and_filters_by_study():
    exported = {prometheus_name(name) for name, _ in BUDGET_GAUGES.values()}
    exported.add(prometheus_name(TRIAL_GAUGE))
    used = set()
    for title, queries in panel_queries().items():
        for query in queries:
            names = set(METRIC_NAME.findall(query))
            assert names and names <= exported, (title, query)
            assert f'{STUDY_TAG}=~"$study"' in query, (title, query)
            used |= names
    assert used == exported  # every budget gauge has a panel, and the trials do


def test_trial_panels_ask_for_keys_that_trials_report():
    reportable = set(TRIAL_METRICS)
    for name in method_names():
        reportable |= get_method(name).metric_allowlist
    for title, queries in panel_queries().items():
        for key in re.findall(rf'{METRIC_TAG}="(\w+)"', " ".join(queries)):
            assert key in reportable, (title, key)
    assert {TRIAL_TAG, METRIC_TAG} <= set(" ".join(
        q for qs in panel_queries().values() for q in qs).replace("(", " ").replace(
        ",", " ").replace(")", " ").split())


def test_dashboard_returns_a_fresh_copy():
    board = dashboard()
    board["title"] = "changed"
    assert dashboard()["title"] != "changed"


@pytest.mark.parametrize(("result", "expected"), [
    ({"score": 0.5, "epoch": 3, "time_this_iter_s": 2.0, "hostname": "h"},
     {"score": 0.5, "epoch": 3.0}),
    ({"score": float("-inf"), "granted": 0, "reason": "refused"},
     {"score": float("-inf"), "granted": 0.0}),
    ({"g_loss": float("nan"), "epsilon_spent": 1.25, "d_real_loss": 0.1},
     {"epsilon_spent": 1.25}),
    ({"granted": True}, {"granted": 1.0}),
])
def test_only_allow_listed_numbers_are_exported(result, expected):
    allowed = get_method("dpaf").metric_allowlist | TRIAL_METRICS
    assert "d_real_loss" not in allowed  # a loss on real data before noise is never safe
    assert exported_metrics(result, allowed) == expected
