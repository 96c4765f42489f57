"""Where a DP step's time goes, per method: ``torch.profiler`` over a few releases
of each method's real training loop, in-process on one worker.

Each method runs its own ``Method.train`` with a :class:`WorkerContext` (as
``tests/methods/loop_run.py`` does), default config on the named dataset. The loop
is timed over a window of releases of its *clock* (the plan mechanism with the most
releases: dpagg/conv2 for DPAF, the critic or the denoiser for the others): after
``--warmup`` releases, ``--releases`` releases are timed without the profiler, and
``--releases`` more under ``torch.profiler`` (CPU; CPU and CUDA on ``--device cuda``);
then the loop is stopped. The time of each profiled release is attributed to
categories by wrapping, *in this script only*, the library functions that do each
kind of work in a ``record_function`` range (nothing is added to the library, so
production runs pay nothing):

* sampling + copies: ``RecordSampler.sample`` (Poisson draw, gather, host->device copy)
* per-record draws: ``RecordBatch.normal/uniform/randint``
* per-record grads: Opacus hooks (``per_record_gradients``) and torch.func
  (``functional_record_grads``), forward and backward included
* top-k, clipping (``clipped_sum``, ``clip_per_record``, ``grouped_clipped_sum``), noise
  (``noisy_sum``, ``gaussian_noise``: DPAF's synthetic aggregate's noise included)
* synthetic partners (the WGAN-GP pair's G forward), adaptive clip groups (dpGAN's
  public per-record gradients)
* pre-noise (other): the rest of a pre-noise function (e.g. DPAF's feature sum)
* G steps (G's loss, backward and step: synthetic records only), synthetic batches
  (DPAF's synthetic DPAGG batch, G's BatchNorm refresh)
* optimizer: torch's own ``Optimizer.step``/``zero_grad`` ranges and ``step_with_gradient``
* reporting: ``EpochReporter`` and the report callback (a checkpoint is torch-saved
  to memory, as a worker would write it)
* rest: everything else (DPAF's head and conv2*'s synthetic side, Python glue).

For each category: its exclusive wall time per release, the part of it spent inside
``aten::`` ops, and the rest ("framework/Python": hooks, autograd engine, the
interpreter, profiler bookkeeping), and on CUDA the GPU kernel time of its ops. The
profiler itself adds a few microseconds per op: compare "ms/release" with and
without it.

Variants (``--variants unpadded,padded,compiled``) measure the step before and after
fixed batch shapes and with compiled per-record gradients, in one process on one
device (:mod:`raydp_synth.runtime.fixed_shapes`).

Usage: python bench/profile_dp_step.py [--device cuda] [--methods dpaf,dpwgan,dpgan,privimage-g,privimage-d]
       [--variants unpadded,padded,compiled]
       [--dataset digits] [--image-size 32] [--warmup 3] [--releases 8] [--threads 1]
       [--set METHOD.KEY=VALUE ...] [--out bench/results/profile_dp_step_<device>.json]
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import io
import json
import os
import platform
import sys
import time
import warnings
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from torch.autograd import DeviceType
from torch.profiler import ProfilerActivity, profile, record_function

from raydp_synth.data import data_info, load_training_data, parse_dataset_spec
from raydp_synth.data.public import effective_public
from raydp_synth.methods import get_method
from raydp_synth.runtime.context import WorkerContext

PREFIX = "dpprof::"
#: (category, [(module, attribute path)]): the functions whose calls make a category.
WRAPPED: list[tuple[str, list[tuple[str, str]]]] = [
    ("sampling + copies", [("raydp_synth.privacy.records", "RecordSampler.sample")]),
    ("per-record draws", [("raydp_synth.privacy.records", "RecordBatch.normal"),
                          ("raydp_synth.privacy.records", "RecordBatch.uniform"),
                          ("raydp_synth.privacy.records", "RecordBatch.randint")]),
    ("per-record grads", [("raydp_synth.privacy.dp_sgd", "per_record_gradients"),
                          ("raydp_synth.privacy.dp_sgd", "functional_record_grads")]),
    ("top-k", [("raydp_synth.privacy.dp_sgd", "topk_per_record"),
               ("raydp_synth.privacy.dp_sgd", "topk_thresholds")]),
    ("clipping", [("raydp_synth.privacy.dp_sgd", "clipped_sum"),
                  ("raydp_synth.privacy.dp_sgd", "clip_per_record"),
                  ("raydp_synth.methods.components.clip_groups", "grouped_clipped_sum")]),
    ("noise", [("raydp_synth.privacy.noise", "noisy_sum"),
               ("raydp_synth.privacy.noise", "gaussian_noise")]),
    ("synthetic partners", [("raydp_synth.methods.components.pairs", "synthetic_partners")]),
    ("adaptive clip groups", [("raydp_synth.methods.dpgan.loop", "PublicSide.clip_groups")]),
    ("pre-noise (other)", [("raydp_synth.runtime.context", "WorkerContext.pre_noise_sum")]),
    ("optimizer", [("raydp_synth.runtime.dp_step", "step_with_gradient")]),
    ("G steps", [("raydp_synth.methods.dpaf.loop", "_DPAFRun._generator_loss"),
                 ("raydp_synth.runtime.distributed", "data_parallel_step"),
                 ("raydp_synth.methods.components.wgan_gp", "generator_step")]),
    ("synthetic batches", [("raydp_synth.methods.dpaf.loop", "_DPAFRun._fakes_like_a_release"),
                           ("raydp_synth.methods.components.gan_networks", "refresh_batchnorm")]),
    ("reporting", [("raydp_synth.runtime.reporting", "EpochReporter.released"),
                   ("raydp_synth.runtime.reporting", "EpochReporter.track"),
                   ("raydp_synth.runtime.reporting", "EpochReporter.after_release")]),
]
OTHER = "rest (DPAF head, glue)"
CATEGORIES = [c for c, _ in WRAPPED] + [OTHER]
#: Ranges torch itself opens, by name prefix.
BUILTIN = {"Optimizer.step#": "optimizer", "Optimizer.zero_grad#": "optimizer"}
#: Profiling settings: pre-training and warm starts are non-private and not profiled.
PROFILE_DEFAULTS: dict[str, dict[str, Any]] = {
    "privimage-g": {"pretrain_iters": 20},
    "privimage-d": {"pretrain_iters": 20},
}


class WindowDone(Exception):
    """Raised out of the loop once the profiled window is over."""


def _ranged(category: str, fn: Callable[..., Any]) -> Callable[..., Any]:
    name = PREFIX + category

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        with record_function(name):
            return fn(*args, **kwargs)

    wrapper.__wrapped_original__ = fn  # type: ignore[attr-defined]
    return wrapper


def instrument() -> Callable[[], None]:
    """Wrap every function of :data:`WRAPPED` where it is defined and wherever it
    was imported by name (every loaded ``raydp_synth`` module); returns the undo."""
    import importlib
    import pkgutil

    import raydp_synth.methods as methods_package

    for mod in pkgutil.walk_packages(methods_package.__path__, "raydp_synth.methods."):
        importlib.import_module(mod.name)
    undo: list[Callable[[], None]] = []
    for category, targets in WRAPPED:
        for module_name, path in targets:
            module = importlib.import_module(module_name)
            owner_name, _, attr = path.rpartition(".")
            owner = getattr(module, owner_name) if owner_name else module
            original = owner.__dict__[attr] if owner_name else getattr(module, attr)
            wrapped = _ranged(category, original)
            holders = [owner] if owner_name else [
                m for name, m in list(sys.modules.items())
                if name.startswith("raydp_synth") and getattr(m, attr, None) is original]
            for holder in holders:
                setattr(holder, attr, wrapped)
                undo.append(functools.partial(setattr, holder, attr, original))

    def restore() -> None:
        for u in reversed(undo):
            u()

    return restore


# ------------------------------------------------------------------ attribution
def _category_of(name: str) -> str | None:
    if name.startswith(PREFIX):
        return name[len(PREFIX):]
    for prefix, category in BUILTIN.items():
        if name.startswith(prefix):
            return category
    return None


def _segments(ranges: list[tuple[float, float, str]], t0: float, t1: float
              ) -> list[tuple[float, float, str]]:
    """Disjoint ``(start, end, category)`` covering [t0, t1]: the innermost range."""
    points = sorted({t0, t1, *(s for s, _, _ in ranges), *(e for _, e, _ in ranges)})
    by_start = sorted(ranges)
    out: list[tuple[float, float, str]] = []
    active: list[tuple[float, float, str]] = []
    j = 0
    for a, b in zip(points, points[1:], strict=False):
        if a < t0 or b > t1:
            continue
        while j < len(by_start) and by_start[j][0] <= a:
            active.append(by_start[j])
            j += 1
        active = [r for r in active if r[1] > a]
        inner = max(active, key=lambda r: (r[0], -r[1]))[2] if active else OTHER
        if out and out[-1][2] == inner and out[-1][1] == a:
            out[-1] = (out[-1][0], b, inner)
        else:
            out.append((a, b, inner))
    return out


def _union(intervals: list[tuple[float, float]]) -> list[tuple[float, float]]:
    merged: list[tuple[float, float]] = []
    for s, e in sorted(intervals):
        if merged and s <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], e))
        else:
            merged.append((s, e))
    return merged


def _overlap(segments: list[tuple[float, float, str]], cover: list[tuple[float, float]]
             ) -> dict[str, float]:
    out: dict[str, float] = defaultdict(float)
    j = 0
    for s, e, cat in segments:
        while j < len(cover) and cover[j][1] <= s:
            j += 1
        k = j
        while k < len(cover) and cover[k][0] < e:
            out[cat] += min(e, cover[k][1]) - max(s, cover[k][0])
            k += 1
    return out


def _segment_at(segments: list[tuple[float, float, str]], starts: list[float], t: float) -> str:
    import bisect

    i = bisect.bisect_right(starts, t) - 1
    return segments[i][2] if 0 <= i < len(segments) and t < segments[i][1] else OTHER


def attribute(events: Any, releases: int) -> dict[str, Any]:
    """Per category: ms per release of exclusive wall time, of it inside aten ops,
    the rest, GPU kernel ms, and calls."""
    ranges, aten, calls = [], [], defaultdict(int)
    device_us: dict[str, float] = defaultdict(float)
    t0, t1 = float("inf"), float("-inf")
    # Host-side events only: a kernel's own event carries its time (on the device's
    # timeline) and is counted through the op that launched it.
    events = [ev for ev in events if ev.device_type == DeviceType.CPU]
    for ev in events:
        s, e = ev.time_range.start, ev.time_range.end
        t0, t1 = min(t0, s), max(t1, e)
        cat = _category_of(ev.name)
        if cat is not None:
            ranges.append((s, e, cat))
            calls[cat] += 1
    segments = _segments(ranges, t0, t1)
    starts = [s for s, _, _ in segments]
    for ev in events:
        if not ev.name.startswith("aten::"):
            continue
        parent, nested = ev.cpu_parent, False
        while parent is not None:
            if parent.name.startswith("aten::"):
                nested = True
                break
            parent = parent.cpu_parent
        if not nested:
            aten.append((ev.time_range.start, ev.time_range.end))
        gpu = getattr(ev, "self_device_time_total", 0.0) or 0.0
        if gpu:
            device_us[_segment_at(segments, starts, ev.time_range.start)] += gpu
    wall: dict[str, float] = defaultdict(float)
    for s, e, cat in segments:
        wall[cat] += e - s
    in_ops = _overlap(segments, _union(aten))
    per = 1000.0 * releases  # us -> ms per release
    return {
        "window_ms_per_release": (t1 - t0) / per,
        "categories": {
            cat: {"ms": wall[cat] / per, "aten_ms": in_ops.get(cat, 0.0) / per,
                  "framework_ms": (wall[cat] - in_ops.get(cat, 0.0)) / per,
                  "gpu_ms": device_us.get(cat, 0.0) / per, "calls_per_release": calls[cat] / releases}
            for cat in CATEGORIES
        },
    }


# ------------------------------------------------------------------ one method
#: What ``--variants`` compares, each in the same process on the same device:
#: (fixed batch shapes, torch.compile backend of the per-record gradients).
VARIANTS = {"unpadded": (False, None), "padded": (True, None), "compiled": (True, "inductor")}


def profile_method(name: str, args: argparse.Namespace, overrides: dict[str, Any],
                   variant: str = "padded") -> dict[str, Any]:
    method = get_method(name)
    device = torch.device(args.device)
    dataset = parse_dataset_spec(args.dataset)
    public_spec = effective_public(method, dataset, None) if method.requires_public else None
    splits, public = load_training_data(dataset, public=public_spec, image_size=args.image_size)
    info = data_info(splits.train, public)
    values = {**PROFILE_DEFAULTS.get(name, {}), **overrides}
    config = method.make_config(values, info)
    plan = method.plan(config, target_epsilon=args.epsilon, delta=1e-5, data=info)
    clock = max(plan.mechanisms, key=lambda m: m.num_steps)
    need = args.warmup + 2 * args.releases + 1
    if clock.num_steps < need:
        raise SystemExit(f"error: {name}'s {clock.name} makes {clock.num_steps} releases; "
                         f"the profile needs {need}: lower --warmup/--releases or raise epochs")

    def report(metrics: Any, state: Any) -> None:
        if state is not None:  # as a worker saves it
            torch.save(state, io.BytesIO())

    ctx = WorkerContext(config=config, plan=plan, data=info, train=splits.train, rank=0,
                        world_size=1, device=device,
                        noise_generator=torch.Generator().manual_seed(0), report=report,
                        log=lambda line: None, dp_seed=1, public=public)
    ctx.fixed_shapes, ctx.compile_backend = VARIANTS[variant]
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.type == "cuda" else [])
    prof = profile(activities=activities)
    marks: dict[str, float] = {}
    count = 0
    real_sampler = WorkerContext.sampler

    def sync() -> float:
        if device.type == "cuda":
            torch.cuda.synchronize()
        return time.perf_counter()

    def on_clock_release() -> None:
        nonlocal count
        count += 1
        if count == args.warmup + 1:
            marks["plain"] = sync()
        elif count == args.warmup + args.releases + 1:
            marks["profiled"] = sync()
            prof.start()
        elif count == args.warmup + 2 * args.releases + 1:
            marks["end"] = sync()
            prof.stop()
            raise WindowDone

    def sampler(self: WorkerContext, mechanism: str) -> Any:
        s = real_sampler(self, mechanism)
        if mechanism == clock.name and not getattr(s, "_profiled", False):
            sample = s.sample

            def counted() -> Any:
                on_clock_release()
                return sample()

            s.sample = counted
            s._profiled = True
        return s

    WorkerContext.sampler = sampler  # type: ignore[method-assign]
    try:
        with contextlib.suppress(WindowDone):
            method.train(ctx)
    finally:
        WorkerContext.sampler = real_sampler  # type: ignore[method-assign]
    if "end" not in marks:
        raise SystemExit(f"error: {name}'s loop ended before the profiled window was over")
    result = attribute(prof.events(), args.releases)
    top = sorted(prof.key_averages(), key=lambda a: a.self_cpu_time_total, reverse=True)[:12]
    return {
        "variant": variant,
        "config": {k: v for k, v in vars(config).items()},
        "records": info.num_records,
        "clock": clock.name,
        "releases": args.releases,
        "ms_per_release": (marks["profiled"] - marks["plain"]) / args.releases * 1000,
        "ms_per_release_profiled": (marks["end"] - marks["profiled"]) / args.releases * 1000,
        **result,
        "top_ops_self_cpu_ms_per_release": {
            a.key: a.self_cpu_time_total / 1000 / args.releases for a in top},
    }


def markdown(results: dict[str, Any], device: str) -> str:
    names = list(results)
    lines = ["| " + " | ".join(["category (% of a profiled release)", *names]) + " |",
             "|" + "---|" * (len(names) + 1)]
    for cat in CATEGORIES:
        cells = []
        for n in names:
            r = results[n]
            c = r["categories"][cat]
            share = 100 * c["ms"] / r["window_ms_per_release"]
            cell = f"{share:.0f}%" if share >= 0.5 else "-"
            if device == "cuda" and c["gpu_ms"]:
                cell += f" (GPU {c['gpu_ms']:.2f} ms)"
            cells.append(cell)
        lines.append(f"| {cat} | " + " | ".join(cells) + " |")
    fw = [100 * sum(c["framework_ms"] for c in results[n]["categories"].values())
          / results[n]["window_ms_per_release"] for n in names]
    lines.append("| of all: outside aten ops (framework/Python) | "
                 + " | ".join(f"{f:.0f}%" for f in fw) + " |")
    if device == "cuda":
        util = [100 * sum(c["gpu_ms"] for c in results[n]["categories"].values())
                / results[n]["window_ms_per_release"] for n in names]
        lines.append("| GPU busy (kernel time / wall) | " + " | ".join(f"{u:.0f}%" for u in util) + " |")
    lines.append("| ms per release (no profiler) | "
                 + " | ".join(f"{results[n]['ms_per_release']:.1f}" for n in names) + " |")
    lines.append("| ms per release (profiled) | "
                 + " | ".join(f"{results[n]['ms_per_release_profiled']:.1f}" for n in names) + " |")
    return "\n".join(lines)


def _cpu_model() -> str:
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.processor() or "unknown CPU"


def _overrides(items: list[str]) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = defaultdict(dict)
    for item in items:
        key, sep, value = item.partition("=")
        method, dot, field = key.partition(".")
        if not (sep and dot and field):
            raise SystemExit(f"error: --set {item!r}: use METHOD.KEY=VALUE, e.g. dpaf.batch_size=256")
        out[method][field] = json.loads(value) if value[:1] in "[{0123456789-tfn" else value
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    parser.add_argument("--methods", default="dpaf,dpwgan,dpgan,privimage-g,privimage-d")
    parser.add_argument("--dataset", default="digits")
    parser.add_argument("--image-size", type=int, default=32)
    parser.add_argument("--epsilon", type=float, default=10.0)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--releases", type=int, default=8)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--set", action="append", default=[], metavar="METHOD.KEY=VALUE")
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--variants", default="padded",
                        help="comma-separated, of: unpadded (each Poisson batch at its own "
                        "size, eager: the step before fixed shapes), padded (the default "
                        "step), compiled (padded, per-record gradients by torch.compile; "
                        "give --warmup enough releases to meet every batch capacity)")
    args = parser.parse_args()
    variants = args.variants.split(",")
    if unknown := set(variants) - set(VARIANTS):
        raise SystemExit(f"error: unknown --variants {sorted(unknown)}; choose from {list(VARIANTS)}")
    if args.device == "cuda" and not torch.cuda.is_available():
        raise SystemExit("error: --device cuda but torch sees no CUDA device; drop --device")
    warnings.filterwarnings("ignore")
    torch.set_num_threads(args.threads)
    overrides = _overrides(args.set)
    undo = instrument()
    results: dict[str, Any] = {}
    try:
        for variant in variants:
            for name in args.methods.split(","):
                key = name if len(variants) == 1 else f"{name} ({variant})"
                results[key] = profile_method(name, args, overrides.get(name, {}), variant)
                print(f"[profile] {key}: {results[key]['ms_per_release']:.1f} ms/release",
                      flush=True)
    finally:
        undo()
    machine = f"{_cpu_model()} ({platform.machine()}), {os.cpu_count()} cores, threads={args.threads}"
    if args.device == "cuda":
        machine += f", {torch.cuda.get_device_name()}"
    out = args.out or Path(f"bench/results/profile_dp_step_{args.device}.json")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({
        "benchmark": "profile_dp_step", "machine": machine, "torch": torch.__version__,
        "device": args.device, "dataset": args.dataset, "image_size": args.image_size,
        "epsilon": args.epsilon, "warmup": args.warmup, "releases": args.releases,
        "results": results}, indent=2, default=str))
    print(markdown(results, args.device))


if __name__ == "__main__":
    main()
