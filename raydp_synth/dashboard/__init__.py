"""Metrics for operators: Prometheus and Grafana beside the Ray dashboard.

* :mod:`~raydp_synth.dashboard.grafana`: raydp_synth's Grafana dashboard (the budget
  gauges per study, the trials' metrics), a JSON file of the package.
* :mod:`~raydp_synth.dashboard.launch`: starts Prometheus and Grafana on a Ray
  session's own configuration, with that dashboard provisioned.
* ``raydp-synth dashboard`` (``python -m raydp_synth.dashboard``): the command.
"""
