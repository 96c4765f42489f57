"""Per-record gradient engines for DPAF's conv2* DP step, against the non-private step,
and a profile of where the DP step's time goes.

One process, same model (DPAF's default conv2*), same virtual batch, same thread
count; every row is the median of interleaved repeats, and its ratio is to the
non-private backward measured in the same loop.

Engines (each followed by the same per-record top-k, clip, noise and division):

* ``opacus_hooks``: Opacus ``GradSampleModule`` (per-layer hooks; what DPAF runs).
* ``opacus_functorch``: the same with ``force_functorch=True`` (Opacus' vmap samplers).
* ``torch_func_vmap``: ``torch.func.vmap(grad(...))`` over records, no Opacus.
* ``opacus_ghost`` (another mechanism, shown for what it would cost): Opacus' ghost
  clipping (``GradSampleModuleFastGradientClipping``): per-record norms without
  materialising per-record gradients, then a second, reweighted backward. It cannot
  apply DPAF's per-record top-k (that needs each record's gradient), so it clips the
  whole gradient instead: a faster step, but not DPAF's.

Profile (``opacus_hooks``): per-record gradients, top-k, clip + sum, noise, each timed
alone on the same inputs.

Usage: python bench/dp_grad_samplers.py [--repeats 15] [--threads 1]
       [--out bench/results/dp_grad_samplers.json]
"""

from __future__ import annotations

import argparse
import copy
import json
import platform
import statistics
import time
import warnings
from pathlib import Path

import torch
from opacus import GradSampleModule
from opacus.grad_sample import GradSampleModuleFastGradientClipping

from raydp_synth.methods.dpaf.config import DPAFConfig
from raydp_synth.methods.dpaf.networks import DiscriminatorParts, label_planes, sin
from raydp_synth.privacy.dp_sgd import (
    clip_per_record,
    clipped_sum,
    noised_release,
    split_by_shapes,
    topk_per_record,
)
from raydp_synth.privacy.noise import noisy_sum
from raydp_synth.runtime.seeding import seeded


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=15)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--out", type=Path, default=Path("bench/results/dp_grad_samplers.json"))
    args = parser.parse_args()
    warnings.filterwarnings("ignore", message="Full backward hook is firing")
    warnings.filterwarnings("ignore", category=UserWarning)
    torch.set_num_threads(args.threads)
    rng = torch.Generator().manual_seed(0)  # inputs and initial parameters
    cfg = DPAFConfig(image_size=16)
    arch = cfg.architecture(channels=1, num_classes=10)
    parts = seeded(lambda: DiscriminatorParts(arch), rng)
    for p in parts.conv1.parameters():
        p.requires_grad_(False)
    conv2 = parts.conv2
    params = [p for p in conv2.parameters() if p.requires_grad]
    names = [n for n, p in conv2.named_parameters() if p.requires_grad]
    shapes = [p.shape for p in params]
    b = cfg.mu * cfg.batch_size  # conv2*'s virtual batch
    x = torch.rand(b, 1, 16, 16, generator=rng) * 2 - 1
    y = torch.randint(10, (b,), generator=rng)
    v = torch.randn(arch.agg_maps, arch.agg_map_size, arch.agg_map_size, generator=rng)
    with torch.no_grad():
        h = parts.conv1(x)
    gen = torch.Generator().manual_seed(0)
    clip, sigma, topk = 1.0, 1.0, cfg.topk_fraction

    def release(grads: list[torch.Tensor], module: torch.nn.Module) -> None:
        out = split_by_shapes(noised_release(
            clipped_sum(grads, max_grad_norm=clip, topk_fraction=topk, shapes=shapes),
            noise_std=sigma * clip, expected_batch_size=float(b), generator=gen), shapes)
        for p, g in zip(trainable(module), out, strict=True):
            p.grad = g

    def trainable(module: torch.nn.Module) -> list[torch.nn.Parameter]:
        return [p for p in module.parameters() if p.requires_grad]

    def record_grads_of(wrapped: GradSampleModule) -> list[torch.Tensor]:
        wrapped.enable_hooks()
        (sin(wrapped(h, y)) * v).sum().backward()
        wrapped.disable_hooks()
        own = trainable(wrapped)
        grads = [p.grad_sample.detach() for p in own]
        for p in own:
            p.grad_sample, p.grad = None, None
        return grads

    def plain() -> None:
        loss = (sin(conv2(h, y)) * v).sum() / b
        for p, g in zip(params, torch.autograd.grad(loss, params), strict=True):
            p.grad = g

    # Each engine wraps its own copy of conv2* (Opacus hooks a module once).
    hooks = GradSampleModule(copy.deepcopy(conv2), loss_reduction="sum")
    hooks.disable_hooks()
    functorch = GradSampleModule(copy.deepcopy(conv2), loss_reduction="sum",
                                 force_functorch=True)
    functorch.disable_hooks()

    def record_grads_hooks() -> list[torch.Tensor]:
        return record_grads_of(hooks)

    def record_grads_functorch() -> list[torch.Tensor]:
        return record_grads_of(functorch)

    from torch.func import functional_call, grad, vmap

    body = conv2.body  # conv2*'s layers: the label planes are built outside vmap
    body_names = [n.removeprefix("body.") for n in names]

    def one_record(theta: dict, hp: torch.Tensor) -> torch.Tensor:
        out = functional_call(body, theta, (hp[None],))
        return (sin(out) * v).sum()

    record_grad = vmap(grad(one_record), in_dims=(None, 0))

    def record_grads_vmap() -> list[torch.Tensor]:
        theta = {n: p.detach() for n, p in zip(body_names, params, strict=True)}
        planes = label_planes(y, conv2.num_classes, conv2.size).to(h)
        g = record_grad(theta, torch.cat([h, planes], dim=1))
        return [g[n] for n in body_names]

    ghost = GradSampleModuleFastGradientClipping(copy.deepcopy(conv2), loss_reduction="sum",
                                                 max_grad_norm=clip, use_ghost_clipping=True)
    ghost.disable_hooks()
    ghost_params = trainable(ghost)

    def ghost_step() -> None:
        ghost.enable_hooks()
        per_record = (sin(ghost(h, y)) * v).flatten(1).sum(1)
        per_record.sum().backward(retain_graph=True)
        coef = ghost.get_clipping_coef()
        ghost.disable_hooks()
        for p in ghost_params:
            p.grad = None
        (per_record * coef.detach()).sum().backward()
        flat = torch.cat([p.grad.reshape(-1) for p in ghost_params])
        released = noisy_sum(flat, noise_std=sigma * clip, generator=gen) / b
        start = 0
        for p in ghost_params:
            p.grad = released[start:start + p.numel()].view_as(p)
            start += p.numel()

    steps = {
        "non_private": plain,
        "opacus_hooks": lambda: release(record_grads_hooks(), hooks),
        "opacus_functorch": lambda: release(record_grads_functorch(), functorch),
        "torch_func_vmap": lambda: release(record_grads_vmap(), conv2),
        "opacus_ghost": ghost_step,
    }
    # The engines agree on the per-record gradients (same mechanism, other code).
    reference = record_grads_hooks()
    for name, fn in (("opacus_functorch", record_grads_functorch),
                     ("torch_func_vmap", record_grads_vmap)):
        for a, c in zip(reference, fn(), strict=True):
            assert torch.allclose(a, c, rtol=1e-3, atol=1e-5), f"{name} disagrees with hooks"

    flat = torch.cat([g.reshape(b, -1) for g in reference], dim=1)
    kept = topk_per_record(flat, fraction=topk)
    summed = clip_per_record(kept, max_norm=clip).sum(0)
    stages = {
        "per_record_grads": record_grads_hooks,
        "topk": lambda: topk_per_record(flat, fraction=topk),
        "clip_and_sum": lambda: clip_per_record(kept, max_norm=clip).sum(0),
        "noise": lambda: noisy_sum(summed, noise_std=sigma * clip, generator=gen),
    }

    timings: dict[str, list[float]] = {k: [] for k in [*steps, *stages]}
    for fn in [*steps.values(), *stages.values()]:
        fn()  # warm-up
    for _ in range(args.repeats):  # interleaved: every row sees the same machine state
        for name, fn in [*steps.items(), *stages.items()]:
            start = time.perf_counter()
            fn()
            timings[name].append(time.perf_counter() - start)
    ms = {k: statistics.median(t) * 1000 for k, t in timings.items()}
    base = ms["non_private"]
    rows = {k: {"ms": ms[k], "ratio_to_non_private": ms[k] / base} for k in steps}
    dp_total = ms["opacus_hooks"]
    profile = {k: {"ms": ms[k], "share_of_dp_step": ms[k] / dp_total} for k in stages}
    result = {
        "benchmark": "dp_grad_samplers",
        "machine": f"{platform.machine()} {platform.processor() or ''} threads={args.threads}".strip(),
        "torch": torch.__version__,
        "config": {"layer_split": cfg.layer_split, "base_width": cfg.base_width,
                   "virtual_batch": b, "topk_fraction": topk,
                   "conv2_params": sum(p.numel() for p in params)},
        "steps": rows,
        "profile_opacus_hooks": profile,
    }
    print(f"conv2* DP step, virtual batch {b}, {result['config']['conv2_params']} parameters, "
          f"{args.threads} thread(s)")
    print(f"{'engine':<18}{'ms':>9}{'x non-private':>15}")
    for k, r in rows.items():
        print(f"{k:<18}{r['ms']:>9.2f}{r['ratio_to_non_private']:>15.2f}")
    print(f"\nprofile of opacus_hooks ({dp_total:.2f} ms)")
    for k, r in profile.items():
        print(f"{k:<18}{r['ms']:>9.2f}{100 * r['share_of_dp_step']:>14.0f}%")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
