"""``python -m raydp_synth.report DIR...``: one results table across runs and studies.

Each DIR is a training run's ``--out`` directory or a study directory
(``STORAGE/NAME``); each gives one row: method, dataset, epsilon with what it
counts, delta, CAS per classifier, FID and IS, precision, recall and diversity, the
number of synthetic images evaluated, and the training time. Only files are read (no Ray, no
data, no network):

* ``run.json``: method and dataset (a study writes one for its released trial);
* ``release/privacy.json``: a run's epsilon and delta, or a study's statement;
* ``ledger.jsonl`` (studies): the total charged, replayed by the accountant's own
  core (:func:`raydp_synth.budget.ledger_statement`); it counts the whole search;
* ``evaluation.json``: the curator's figures (``python -m raydp_synth.evaluate``);
* ``timing.json``: the training time, when the run recorded it.

A figure a directory does not hold is left blank (CSV) or shown as "—"
(Markdown), never estimated. The domain-CNN figures are ``fid_cnn`` and ``is_cnn``
(read from ``evaluation.json``'s ``fid_cnn``/``is_cnn``, or the older names
``fid``/``inception_score``) and, in evaluations since they were added,
``precision_cnn``, ``recall_cnn`` and ``diversity_cnn``; the Inception-v3 figures
``fid_inception``, ``is_inception``, ``precision`` and ``recall`` only when the
evaluation computed them.

A random-stopping study's number of trials is secret (Papernot & Steinke 2022):
its row names the mean it was drawn with, never the trials run.
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from raydp_synth.accountant.core import LEDGER_NAME
from raydp_synth.accountant.strategies import pricing_class
from raydp_synth.budget import ledger_statement
from raydp_synth.cli import add_version_argument, run_cli
from raydp_synth.errors import ConfigError

__all__ = [
    "BEGIN_MARKER",
    "END_MARKER",
    "FIGURES",
    "ReportRow",
    "main",
    "read_row",
    "to_csv",
    "to_markdown",
    "update_block",
]

BEGIN_MARKER = "<!-- report:begin -->"
END_MARKER = "<!-- report:end -->"

#: The non-CAS figures, each with the ``evaluation.json`` names it is read from
#: (the first found wins) and its Markdown heading.
FIGURES: tuple[tuple[str, tuple[str, ...], str], ...] = (
    ("fid_cnn", ("fid_cnn", "fid"), "FID (CNN)"),
    ("is_cnn", ("is_cnn", "inception_score"), "IS (CNN)"),
    ("precision_cnn", ("precision_cnn",), "precision (CNN)"),
    ("recall_cnn", ("recall_cnn",), "recall (CNN)"),
    ("diversity_cnn", ("diversity_cnn",), "diversity (CNN)"),
    ("fid_inception", ("fid_inception",), "FID (Inception)"),
    ("is_inception", ("is_inception",), "IS (Inception)"),
    ("precision", ("precision",), "precision"),
    ("recall", ("recall",), "recall"),
)

#: CAS columns come first in this order, any other classifier after them.
_CAS_ORDER = ("logreg", "mlp", "cnn", "resnet9")


@dataclass(frozen=True)
class ReportRow:
    """One run or study: what the table shows of it.

    Attributes:
        directory: the directory as given.
        kind: ``run``, ``non-private run`` or ``study``.
        method, dataset: as the run (or the study's released trial) names them.
        epsilon: the run's epsilon, or the study's total charged (the whole search);
            ``math.inf`` for a non-private run.
        counts: what ``epsilon`` counts, in words.
        public: the data declared public (used without noise), if any.
        cas: CAS by classifier.
        figures: the :data:`FIGURES` the evaluation holds.
        num_synthetic: synthetic images of the final figures.
        train_s: training wall time in seconds (``timing.json``), if recorded.
    """

    directory: Path
    kind: str
    method: str
    dataset: str
    epsilon: float | None
    counts: str
    delta: float | None
    public: str | None = None
    cas: dict[str, float] = field(default_factory=dict)
    figures: dict[str, float] = field(default_factory=dict)
    num_synthetic: int | None = None
    train_s: float | None = None

    @property
    def name(self) -> str:
        return self.directory.resolve().name


def _load(path: Path) -> dict[str, Any]:
    try:
        value = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise ConfigError(f"{path} cannot be read as JSON ({exc}); "
                          "restore it or leave its directory out") from None
    if not isinstance(value, dict):
        raise ConfigError(f"{path} does not hold a JSON object; restore it or leave its "
                          "directory out")
    return value


def _optional(path: Path) -> dict[str, Any] | None:
    return _load(path) if path.is_file() else None


def _is_study(directory: Path) -> bool:
    return (directory / "study.json").is_file() or (directory / LEDGER_NAME).is_file()


def _evaluation_figures(evaluation: dict[str, Any] | None) -> tuple[dict[str, float],
                                                                     dict[str, float],
                                                                     int | None]:
    """(CAS by classifier, FIGURES by column, synthetic images) of ``evaluation.json``'s
    ``final`` section: the released generator's figures (never the real-data
    references, nor the curve's checkpoints)."""
    if evaluation is None:
        return {}, {}, None
    final = evaluation.get("final") or {}
    cas = {key[4:]: float(value) for key, value in final.items()
           if key.startswith("cas_") and isinstance(value, (int, float))}
    figures: dict[str, float] = {}
    for column, names, _ in FIGURES:
        found = next((final[n] for n in names if isinstance(final.get(n), (int, float))), None)
        if found is not None:
            figures[column] = float(found)
    settings = evaluation.get("settings") or {}
    count = settings.get("num_synthetic")
    return cas, figures, int(count) if isinstance(count, int) else None


def _timing(directory: Path) -> float | None:
    timing = _optional(directory / "timing.json")
    value = (timing or {}).get("train_s")
    return float(value) if isinstance(value, (int, float)) else None


def _run_row(directory: Path) -> ReportRow:
    run = _load(directory / "run.json")
    privacy_path = directory / "release" / "privacy.json"
    if not privacy_path.is_file():
        raise ConfigError(f"{directory} has run.json but no release/privacy.json: the run did "
                          "not finish; leave it out or train it again")
    privacy = _load(privacy_path)
    private = bool(privacy.get("private", True)) and not run.get("non_private", False)
    cas, figures, count = _evaluation_figures(_optional(directory / "evaluation.json"))
    return ReportRow(
        directory=directory, kind="run" if private else "non-private run",
        method=str(run.get("method", "")), dataset=str(run.get("dataset", "")),
        epsilon=privacy.get("epsilon") if private else math.inf,
        counts="the run (and its selection score)" if private else "no guarantee (non-private)",
        delta=privacy.get("delta"), public=run.get("public"), cas=cas, figures=figures,
        num_synthetic=count, train_s=_timing(directory))


def _release_pricing(privacy: dict[str, Any]) -> dict[str, Any]:
    """A study release's account of its search: its accountant's statement (under
    ``details.study``; a release written before that layout: ``pricing``)."""
    if "details" in privacy:
        return dict((privacy["details"] or {}).get("study") or {})
    return dict(privacy.get("pricing") or {})


def _search_counts(pricing: dict[str, Any], request: dict[str, Any]) -> str:
    """What a study's epsilon counts, in its pricing strategy's words; what the
    release's pricing lacks comes from the study's request."""
    mode = pricing.get("mode") or request.get("selection", "")
    try:
        strategy = pricing_class(mode)
    except ConfigError:  # a study written by another version: say what it names
        return f"whole search ({mode})"
    known = {"tune_fraction": request.get("tune_fraction"), "mean_trials": request.get("trials"),
             "distribution": request.get("distribution")}
    return strategy.search_summary({**known, **{k: v for k, v in pricing.items()
                                                if k in known or k == "trials_granted"}})


def _study_row(directory: Path) -> ReportRow:
    study = _optional(directory / "study.json") or {}
    request = study.get("request") or {}
    privacy = _optional(directory / "release" / "privacy.json")
    pricing = _release_pricing(privacy or {})
    if (directory / LEDGER_NAME).is_file():
        # Everything the accountant charged, the search included (also before a release).
        statement, _ = ledger_statement(directory)
        pricing.update({k: statement[k] for k in ("mode", "epsilon", "delta", "budget_epsilon")})
        if "trials_granted" in statement and pricing_class(statement["mode"]).live_counts:
            pricing["trials_granted"] = statement["trials_granted"]  # public under compose
    elif privacy is None:
        raise ConfigError(f"study {directory} has neither a ledger ({LEDGER_NAME}) nor a "
                          "release/privacy.json: nothing states its epsilon")
    else:
        pricing.update(epsilon=privacy.get("epsilon"), delta=privacy.get("delta"))
    counts = _search_counts(pricing, request)
    run = _optional(directory / "run.json") or {}
    if privacy is None:
        counts += "; nothing released yet"
    cas, figures, count = _evaluation_figures(_optional(directory / "evaluation.json"))
    return ReportRow(
        directory=directory, kind="study",
        method=str(run.get("method", request.get("method", ""))),
        dataset=str(run.get("dataset", request.get("dataset", ""))),
        epsilon=pricing.get("epsilon"), counts=counts, delta=pricing.get("delta"),
        public=study.get("public"), cas=cas, figures=figures, num_synthetic=count,
        train_s=_timing(directory))


def read_row(directory: Path) -> ReportRow:
    """The row of a run or study directory.

    Raises:
        ConfigError: ``directory`` is neither, or a file it needs cannot be read.
    """
    directory = Path(directory)
    if _is_study(directory):
        return _study_row(directory)
    if (directory / "run.json").is_file():
        return _run_row(directory)
    raise ConfigError(f"{directory} is neither a run directory (run.json) nor a study "
                      "directory (study.json, ledger.jsonl); pass a training run's --out "
                      "or a study's STORAGE/NAME")


def _cas_columns(rows: Sequence[ReportRow]) -> list[str]:
    present = {kind for row in rows for kind in row.cas}
    return [k for k in _CAS_ORDER if k in present] + sorted(present - set(_CAS_ORDER))


def _columns(rows: Sequence[ReportRow]) -> list[tuple[str, str]]:
    """(CSV name, Markdown heading) of every column, in order."""
    return ([("name", "run"), ("method", "method"), ("kind", "what"), ("dataset", "dataset"),
             ("public", "public data"), ("epsilon", "epsilon"),
             ("epsilon_counts", "epsilon counts"), ("delta", "delta")]
            + [(f"cas_{k}", f"CAS {k}") for k in _cas_columns(rows)]
            + [(column, heading) for column, _, heading in FIGURES]
            + [("num_synthetic", "synthetic images"), ("train_s", "train s")])


def _values(row: ReportRow) -> dict[str, Any]:
    return {"name": row.name, "method": row.method, "kind": row.kind, "dataset": row.dataset,
            "public": row.public, "epsilon": row.epsilon, "epsilon_counts": row.counts, "delta": row.delta,
            **{f"cas_{k}": v for k, v in row.cas.items()}, **row.figures,
            "num_synthetic": row.num_synthetic, "train_s": row.train_s}


def to_csv(rows: Sequence[ReportRow]) -> str:
    """Every column, full precision; a missing figure is an empty field."""
    columns = [name for name, _ in _columns(rows)]
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(["directory", *columns])
    for row in rows:
        values = _values(row)
        writer.writerow([str(row.directory)] + ["" if values.get(c) is None else values[c]
                                                for c in columns])
    return out.getvalue()


def _format(column: str, value: Any) -> str:
    if value is None:
        return "none" if column == "public" else "—"
    if isinstance(value, str):
        return value
    if column == "epsilon":
        return "inf" if math.isinf(value) else f"{value:.2f}"
    if column == "delta":
        return f"{value:g}"
    if column in ("num_synthetic", "train_s"):
        return f"{value:,.0f}"
    if column.startswith("fid"):
        return f"{value:.0f}" if abs(value) >= 100 else f"{value:.2f}"
    if column.startswith("is_"):
        return f"{value:.2f}"
    return f"{value:.3f}"


def to_markdown(rows: Sequence[ReportRow]) -> str:
    """A Markdown table; figure columns no row holds are left out, a figure one row
    lacks is "—"."""
    values = [_values(row) for row in rows]
    fixed = {"name", "method", "kind", "dataset", "epsilon", "epsilon_counts", "delta"}
    columns = [(c, h) for c, h in _columns(rows)
               if c in fixed or any(v.get(c) is not None for v in values)]
    lines = ["| " + " | ".join(h for _, h in columns) + " |",
             "| " + " | ".join("---" for _ in columns) + " |"]
    lines += ["| " + " | ".join(_format(c, v.get(c)) for c, _ in columns) + " |" for v in values]
    return "\n".join(lines) + "\n"


def block_markers(block: str | None = None) -> tuple[str, str]:
    """The marker lines around a generated table: ``<!-- report:begin -->`` and
    ``<!-- report:end -->``, or ``<!-- report:begin NAME -->`` ... for a named block (a
    document with several generated tables)."""
    if block is None:
        return BEGIN_MARKER, END_MARKER
    if not block.replace("-", "").replace("_", "").isalnum():
        raise ConfigError(f"block name {block!r} must be letters, digits, '-' or '_'")
    return f"<!-- report:begin {block} -->", f"<!-- report:end {block} -->"


def update_block(text: str, table: str, *, source: str = "the file",
                 block: str | None = None) -> str:
    """``text`` with the lines between the begin and end markers of ``block``
    (:func:`block_markers`) replaced by ``table`` (the marker lines stay).

    Raises:
        ConfigError: the markers are missing, repeated or out of order.
    """
    begin_marker, end_marker = block_markers(block)
    begin, end = text.count(begin_marker), text.count(end_marker)
    if begin != 1 or end != 1 or text.index(begin_marker) > text.index(end_marker):
        raise ConfigError(f"{source} needs exactly one {begin_marker} line followed by one "
                          f"{end_marker} line around the table to replace; found {begin} and "
                          f"{end}")
    head, rest = text.split(begin_marker)
    _, tail = rest.split(end_marker)
    return head + begin_marker + "\n" + table.rstrip("\n") + "\n" + end_marker + tail


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m raydp_synth.report",
        description="One table (CSV, Markdown) of the runs' and studies' privacy and utility.")
    parser.add_argument("dirs", nargs="+", type=Path, metavar="DIR",
                        help="training run directories (--out) and study directories")
    parser.add_argument("--csv", type=Path, default=None, metavar="PATH",
                        help="write the table as CSV (every column, full precision)")
    parser.add_argument("--markdown", type=Path, default=None, metavar="PATH",
                        help="write the table as Markdown")
    parser.add_argument("--update", type=Path, default=None, metavar="FILE",
                        help=f"replace the table between the {BEGIN_MARKER} and {END_MARKER} "
                        "lines of a Markdown file")
    parser.add_argument("--block", default=None, metavar="NAME",
                        help="with --update: the table between <!-- report:begin NAME --> and "
                        "<!-- report:end NAME --> (a file with several generated tables)")
    add_version_argument(parser)
    args = parser.parse_args(argv)
    rows = [read_row(d) for d in args.dirs]
    markdown = to_markdown(rows)
    if args.update is not None:
        if not args.update.is_file():
            raise ConfigError(f"--update {args.update} does not exist; pass a Markdown file "
                              f"with {BEGIN_MARKER} and {END_MARKER} lines")
        updated = update_block(args.update.read_text(), markdown, source=str(args.update),
                               block=args.block)
    if args.csv is not None:
        args.csv.write_text(to_csv(rows))
        print(f"wrote {args.csv}")
    if args.markdown is not None:
        args.markdown.write_text(markdown)
        print(f"wrote {args.markdown}")
    if args.update is not None:
        args.update.write_text(updated)
        print(f"updated the table in {args.update}")
    if args.csv is None and args.markdown is None and args.update is None:
        print(markdown, end="")
    return 0


if __name__ == "__main__":
    run_cli(main)
