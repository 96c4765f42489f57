"""The privacy cost of a hyperparameter search: study epsilon against the number of
trials, for ``compose`` and ``random-stopping`` (Poisson, geometric, logarithmic),
next to naive epsilon addition, for one default trial plan.

The trial plan is the default DPAF plan calibrated to ``--trial-epsilon`` on digits
(with its selection score); every number is dp-accounting's RDP accountant
(``raydp_synth.privacy.accounting``), nothing hand-typed. Pure accounting: seconds.

Usage: python bench/search_privacy_cost.py [--method dpaf] [--trial-epsilon 1.0]
       [--delta 1e-5] [--out bench/results/search_privacy_cost.json]
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from raydp_synth.data import data_info, load_dataset
from raydp_synth.methods import get_method
from raydp_synth.privacy.accounting import (
    compose_epsilon,
    parse_distribution,
    random_stopping_epsilon,
)
from raydp_synth.privacy.selection_score import DEFAULT_SCORE_SHARE

TRIALS = (5, 10, 20, 50, 100)
DISTRIBUTIONS = ("poisson", "geometric", "logarithmic")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--method", default="dpaf")
    parser.add_argument("--trial-epsilon", type=float, default=1.0)
    parser.add_argument("--delta", type=float, default=1e-5)
    parser.add_argument("--out", type=Path, default=Path("bench/results/search_privacy_cost.json"))
    args = parser.parse_args()
    train = load_dataset("digits").train
    data = data_info(train, None)
    method = get_method(args.method)
    config = method.make_config({}, data)
    plan = method.plan(config, target_epsilon=args.trial_epsilon, delta=args.delta, data=data,
                       score_share=DEFAULT_SCORE_SHARE)
    event, trial_eps = plan.event(), plan.epsilon()
    rows = []
    for n in TRIALS:
        row = {"trials": n, "naive_sum": n * trial_eps,
               "compose": compose_epsilon([event] * n, args.delta)}
        for name in DISTRIBUTIONS:
            row[f"random_stopping_{name}"] = random_stopping_epsilon(
                event, mean=float(n), shape=parse_distribution(name), delta=args.delta)
        rows.append(row)
    result = {"benchmark": "search_privacy_cost", "method": args.method, "delta": args.delta,
              "trial_epsilon": trial_eps, "trial_plan": plan.to_dict(), "rows": rows}
    keys = ["naive_sum", "compose", *(f"random_stopping_{d}" for d in DISTRIBUTIONS)]
    print(f"study epsilon at delta={args.delta:g}; one trial: {args.method} default plan, "
          f"epsilon {trial_eps:.3f}")
    print(f"{'trials':>6}" + "".join(f"{k.replace('random_stopping_', 'RS-'):>16}" for k in keys))
    for row in rows:
        print(f"{row['trials']:>6}" + "".join(f"{row[k]:>16.3f}" for k in keys))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2))
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 4))
    for key in keys:
        ax.plot([r["trials"] for r in rows], [r[key] for r in rows], marker="o",
                label=key.replace("_", " "))
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("trials (N_max for compose, E[K] for random stopping)")
    ax.set_ylabel(f"study epsilon (delta={args.delta:g})")
    ax.set_title(f"cost of the search: {args.method} trials of epsilon {trial_eps:.2f}", fontsize=9)
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(args.out.with_suffix(".png"), dpi=100)
    plt.close(fig)


if __name__ == "__main__":
    main()
