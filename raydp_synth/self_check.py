"""``raydp-synth self-check``: does this environment run raydp_synth, as installed?

What a cluster image or a fresh node runs once after its install (cluster/Dockerfile,
the launcher YAMLs' setup commands), so that a broken install fails its build, not a
study hours later. Each check prints one line (ok, warn or FAIL); the exit code is 1 if any failed.

* The versions of what a run loads: raydp_synth, torch, torchvision, Ray, Opacus.
* torchvision was built for this torch: it imports, the same CUDA version (a
  torchvision from another package index than torch's is built for another CUDA and
  fails when its operators load: "operator torchvision::nms does not exist"), and its
  compiled operators run (``torchvision.ops.nms``) on the CPU and on a GPU where there
  is one. raydp_synth itself never imports torchvision (torch-fidelity requires it, and
  the evaluation loads torch-fidelity's Inception extractor without it), so a broken
  torchvision is a warning, not a failure: your own code beside raydp_synth would hit it.
* What each command imports loads: the training and study CLIs, the evaluation (its
  classifiers, metrics and torch-fidelity's Inception extractor, as the evaluation
  loads it), the release.
* A GPU, where torch sees one: its name and a matmul on it.
"""

from __future__ import annotations

import argparse
import importlib
from collections.abc import Callable
from importlib.metadata import PackageNotFoundError, version

from raydp_synth.cli import add_version_argument, run_cli

__all__ = ["CHECKS", "SelfCheckWarning", "main", "run_checks"]


class SelfCheckWarning(Exception):
    """A check found something to fix that does not stop raydp_synth from running."""

#: The modules the commands import (the evaluation's as ``evaluate`` loads them).
COMMAND_MODULES = (
    "raydp_synth.train.__main__",
    "raydp_synth.tune.__main__",
    "raydp_synth.evaluate",
    "raydp_synth.evaluation.classifiers",
    "raydp_synth.evaluation.metrics",
    "raydp_synth.evaluation.report",
    "raydp_synth.release",
    "raydp_synth.sample",
)


def _versions() -> str:
    found = []
    for package in ("raydp_synth", "torch", "torchvision", "ray", "opacus", "torch-fidelity"):
        try:
            found.append(f"{package} {version(package)}")
        except PackageNotFoundError:
            found.append(f"{package} MISSING")
    if any(item.endswith("MISSING") for item in found):
        raise RuntimeError(", ".join(found))
    return ", ".join(found)


def _torchvision_matches_torch() -> str:
    import torch

    fix = ("install both from one index, e.g. pip install torch==2.13.0 torchvision==0.28.0 "
           "--index-url https://download.pytorch.org/whl/cu128")
    try:
        import torchvision
    except (ImportError, RuntimeError) as exc:
        raise SelfCheckWarning(f"torchvision does not import beside torch {torch.__version__} "
                               f"({exc}): {fix}") from exc
    if torchvision.version.cuda != torch.version.cuda:
        raise SelfCheckWarning(
            f"torchvision {torchvision.__version__} is built for CUDA {torchvision.version.cuda}, "
            f"torch {torch.__version__} for CUDA {torch.version.cuda}: {fix}")
    devices = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])
    for device in devices:
        boxes = torch.tensor([[0.0, 0.0, 1.0, 1.0], [0.0, 0.0, 1.0, 1.0]], device=device)
        kept = torchvision.ops.nms(boxes, torch.tensor([1.0, 0.5], device=device), 0.5)
        if kept.tolist() != [0]:
            raise SelfCheckWarning(f"torchvision.ops.nms on {device} returned {kept.tolist()}")
    return (f"torchvision {torchvision.__version__} and torch {torch.__version__} share CUDA "
            f"{torch.version.cuda}; torchvision's operators run on {', '.join(devices)}")


def _command_imports() -> str:
    for module in COMMAND_MODULES:
        importlib.import_module(module)
    # lazy: inside the check, so a broken install fails this check's line, not the command
    from raydp_synth.evaluation.inception import load_without_package_init

    load_without_package_init()
    return f"{len(COMMAND_MODULES)} command modules and the Inception extractor import"


def _gpu() -> str:
    import torch

    if not torch.cuda.is_available():
        return "no GPU seen by torch (a CPU node; --use-gpu needs a GPU node)"
    x = torch.ones(64, 64, device="cuda")
    if float((x @ x).sum()) != 64.0 ** 3:
        raise RuntimeError("a matmul on the GPU gave a wrong result")
    return f"{torch.cuda.device_count()} GPU(s): {torch.cuda.get_device_name(0)}"


#: (name, check): each check returns its line or raises.
CHECKS: tuple[tuple[str, Callable[[], str]], ...] = (
    ("versions", _versions),
    ("torchvision", _torchvision_matches_torch),
    ("imports", _command_imports),
    ("gpu", _gpu),
)


def run_checks() -> list[tuple[str, str, str]]:
    """Every check: (name, ``"ok"``, ``"warn"`` or ``"FAIL"``, its line)."""
    results = []
    for name, check in CHECKS:
        try:
            results.append((name, "ok", check()))
        except SelfCheckWarning as exc:
            results.append((name, "warn", str(exc)))
        # Each failure is reported, then the next check runs.
        except Exception as exc:  # noqa: BLE001
            results.append((name, "FAIL", f"{type(exc).__name__}: {exc}"))
    return results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="raydp-synth self-check",
        description="Check that this environment runs raydp_synth as installed.")
    add_version_argument(parser)
    parser.parse_args(argv)
    results = run_checks()
    for name, status, line in results:
        print(f"{status:<4} {name}: {line}")
    return 1 if any(status == "FAIL" for _, status, _ in results) else 0


if __name__ == "__main__":
    run_cli(main)
