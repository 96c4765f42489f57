"""Shared command-line plumbing: user errors become one line and exit code 2."""

from __future__ import annotations

import _thread
import argparse
import os
import signal
import sys
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from raydp_synth import __version__
from raydp_synth.errors import ConfigError, Interrupted, UserError
from raydp_synth.log import Verbosity, configure_console

__all__ = ["add_cluster_arguments", "add_console_arguments", "add_data_arguments", "add_fid_weights_argument",
           "add_release_arguments", "add_version_argument", "configure_console_from",
           "parse_settings", "release_overrides", "run_cli",
           "version_line"]


def version_line() -> str:
    """What ``--version`` prints: ``raydp_synth VERSION``."""
    return f"raydp_synth {__version__}"


def add_version_argument(parser: argparse.ArgumentParser) -> None:
    """``--version``: print :func:`version_line` and exit 0 (every command)."""
    parser.add_argument("--version", action="version", version=version_line())


def parse_settings(items: Sequence[str]) -> dict[str, str]:
    """``["mu=8", "layer_split=C2-C1-x"]`` -> ``{"mu": "8", ...}``."""
    settings: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ConfigError(f"--set {item!r} is not of the form key=value (e.g. --set mu=8)")
        settings[key.strip()] = value.strip()
    return settings


def add_data_arguments(parser: argparse.ArgumentParser) -> None:
    """The options that declare a run's data (train and tune): the sensitive dataset,
    its class count and folder, the data declared public, and whether to download."""
    parser.add_argument("--dataset", default="digits",
                        help="digits (default, embedded) | mnist | fashion-mnist | cifar10 | "
                        "celeba[:SIZE] (named datasets, standard train/test split; CelebA "
                        "female/male decoded at SIZE, default 32) | idx:DIR | folder:DIR | "
                        "parquet:URI")
    parser.add_argument("--data-dir", default=None, metavar="DIR",
                        help="the folder of a named dataset's files (default "
                        "$XDG_CACHE_HOME/raydp_synth/datasets/NAME, i.e. under ~/.cache); "
                        "--public naming the same dataset without a folder uses it too")
    parser.add_argument("--download", action="store_true",
                        help="fetch the official files of the named datasets declared that "
                        "their folder lacks, checksums verified (nothing downloads without it)")
    parser.add_argument("--num-classes", type=int, default=None, metavar="K",
                        help="the dataset's class count, labels 0..K-1 (needed for IDX files "
                        "and Parquet without class metadata; must agree with a dataset's own "
                        "declaration); a class may have no record")
    parser.add_argument("--public", default=None, metavar="DATASET[:fraction=F]",
                        help="data declared public, used without noise (dpGAN's warm start and "
                        "clip bounds): another dataset, or a fraction of the training dataset "
                        "taken out of it (e.g. digits:fraction=0.02)")
    parser.add_argument("--public-validation", default=None, metavar="DATASET",
                        help="a dataset declared public to score on at no privacy cost "
                        "(default: the private validation split, noised)")


def add_release_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of what a run releases and how it is scored (train and tune)."""
    parser.add_argument("--use-gpu", action="store_true", help="one GPU per worker")
    parser.add_argument("--compile-step", action="store_true",
                        help="run the DP step's per-record gradients compiled (torch.compile, "
                        "one graph per batch capacity) where a method computes them with "
                        "torch.func (dpwgan, dpgan, PrivImage): for long runs on a GPU; a "
                        "compile costs tens of seconds per shape")
    parser.add_argument("--synthetic-samples", type=int, default=None, metavar="N",
                        help="rows of release/synthetic.parquet (default 10000)")
    parser.add_argument("--score-share", type=float, default=None,
                        help="budget fraction of a run's private selection score (default 0.2)")
    parser.add_argument("--score-classifier", default=None, choices=("logreg", "mlp", "cnn"),
                        help="classifier trained on synthetic data for the score (default logreg)")
    parser.add_argument("--no-eval", action="store_true",
                        help="skip the curator's evaluation (CAS, FID, IS, plot) at the end")
    add_fid_weights_argument(parser)


def add_fid_weights_argument(parser: argparse.ArgumentParser) -> None:
    """``--fid-weights``: the FID Inception-v3 weights of the evaluation (train, tune, evaluate)."""
    parser.add_argument("--fid-weights", type=Path, default=None, metavar="FILE",
                        help="the FID Inception-v3 weights (torch-fidelity's "
                        "weights-inception-2015-12-05-6726825d.pth) for fid_inception, "
                        "is_inception, precision and recall (default: the torch hub cache's "
                        "copy if there; never downloaded; without it only the domain-CNN "
                        "fid_cnn and is_cnn)")


def add_cluster_arguments(parser: argparse.ArgumentParser) -> None:
    """``--keep-cluster`` (train, tune): see :mod:`raydp_synth.runtime.local_cluster`."""
    parser.add_argument("--keep-cluster", action="store_true",
                        help="without a cluster to join (RAY_ADDRESS, or a running `ray "
                        "start` here), start the local Ray as a detached `ray start --head` "
                        "that stays up after the command (its dashboard, the runs' "
                        "history); the last line says where its dashboard is and how to "
                        "stop it, and it alone (`raydp-synth stop-cluster --address ...`)")


def add_console_arguments(parser: argparse.ArgumentParser) -> None:
    """``--quiet`` / ``--verbose`` (train, tune, evaluate): see
    :mod:`raydp_synth.log`."""
    group = parser.add_mutually_exclusive_group()
    group.add_argument("-q", "--quiet", action="store_true",
                       help="only warnings, errors and the results (no progress lines or bars)")
    group.add_argument("-v", "--verbose", action="store_true",
                       help="debug lines, and Ray's own INFO logs (default: Ray at WARNING)")


def configure_console_from(args: argparse.Namespace) -> None:
    """Set up the console at the verbosity of :func:`add_console_arguments`' options."""
    configure_console(Verbosity.QUIET if args.quiet
                      else Verbosity.VERBOSE if args.verbose else Verbosity.DEFAULT)


def release_overrides(args: argparse.Namespace) -> dict[str, Any]:
    """The release and evaluation options the user gave (the request's defaults stand
    for the rest)."""
    given = {"score_share": args.score_share, "score_classifier": args.score_classifier,
             "synthetic_samples": args.synthetic_samples, "fid_weights": args.fid_weights,
             "compile_step": args.compile_step or None}
    return {key: value for key, value in given.items() if value is not None}


def _exit_now(signum: int, frame: Any) -> None:
    """A second Ctrl-C: exit at once (130), whatever cleanup the first one started
    (stopping trials, shutting Ray down). The ledger stays whole: its entries are
    appended durably, a torn last line is dropped on the next read."""
    os.write(2, b"interrupted again; exiting now\n")
    os._exit(130)


def _first_interrupt(signum: int, frame: Any) -> None:
    """The first Ctrl-C: a KeyboardInterrupt, as Python's own handler raises (the
    command stops cleanly and says what it kept); the next one exits at once."""
    signal.signal(signal.SIGINT, _exit_now)
    raise KeyboardInterrupt


#: How long after a swallowed first Ctrl-C its KeyboardInterrupt is raised again.
_REDELIVERY_DELAY_S = 0.05


def _redeliver_swallowed_interrupt(unraisable: Any) -> None:
    """``sys.unraisablehook``: a first Ctrl-C's KeyboardInterrupt that landed in a
    weakref callback, a ``__del__`` or a GC callback (where Python prints "Exception
    ignored" and goes on) is raised again, shortly after, in the main thread.

    A signal handler runs between any two bytecodes of the main thread, also in such
    a callback; torch's tensors and hooks run them all the time (the evaluation's
    classifier training), so a first Ctrl-C there was swallowed and the command went
    on (under a test's SIGINT, it did not exit). The handler is armed again and the
    interrupt re-sent from a timer thread, so that it is raised outside this hook."""
    if (isinstance(unraisable.exc_value, KeyboardInterrupt)
            and signal.getsignal(signal.SIGINT) is _exit_now):
        signal.signal(signal.SIGINT, _first_interrupt)
        timer = threading.Timer(_REDELIVERY_DELAY_S, _thread.interrupt_main)
        timer.daemon = True
        timer.start()
        return
    _previous_unraisablehook(unraisable)


_previous_unraisablehook = sys.unraisablehook


def _install_interrupt_handlers() -> None:
    """In the main thread, where Python's default SIGINT handler is in place (not
    where SIGINT is ignored: a job started in the background of a shell keeps
    ignoring it, as POSIX shells mean it to; a test that wants a terminal's Ctrl-C
    starts its command with SIGINT at its default)."""
    global _previous_unraisablehook
    if threading.current_thread() is not threading.main_thread():
        return
    if signal.getsignal(signal.SIGINT) is signal.default_int_handler:
        signal.signal(signal.SIGINT, _first_interrupt)
        if sys.unraisablehook is not _redeliver_swallowed_interrupt:
            _previous_unraisablehook = sys.unraisablehook
            sys.unraisablehook = _redeliver_swallowed_interrupt


def run_cli(main: Callable[[list[str] | None], int], argv: list[str] | None = None) -> None:
    """Run ``main``; a :class:`UserError` prints ``error: ...`` and exits with 2; the
    first Ctrl-C stops it (exit 130, one line on what was kept), a second exits at once."""
    _install_interrupt_handlers()
    try:
        code = main(argv)
    except Interrupted as err:
        print(f"interrupted; {err}", file=sys.stderr)
        sys.exit(130)
    except UserError as err:
        print(f"error: {err}", file=sys.stderr)
        sys.exit(2)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        sys.exit(130)
    sys.exit(code)
