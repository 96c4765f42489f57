"""DP overhead of DPAF's discriminator step, as a ratio to the same non-private step.

Measured in one process, same model, batch and thread count:

* ``conv2_step``: conv2*'s update on its virtual batch (mu * B records). DP: Opacus
  per-record gradients of <s_i, v>, per-record top-k, clipping, noise, division by
  the expected batch. Non-private: one ordinary backward of the same loss.
* ``d_iteration``: one full discriminator iteration averaged over a cycle of mu
  iterations (mu DPAGG + head steps and one conv2* step), DP against non-private
  (no per-record gradients, no clipping, no noise).

Usage: python bench/dpaf_dp_overhead.py [--repeats 20] [--threads 1] [--base-width W]
       [--batch-size B] [--mu MU] [--out bench/results/dpaf_dp_overhead.json]
(defaults: DPAF's default config; the paper-like width: --base-width 32 --batch-size 32 --mu 8)
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import time
import warnings
from pathlib import Path

import torch
from opacus import GradSampleModule
from torch.nn import functional as F

from raydp_synth.methods.dpaf.config import DPAFConfig
from raydp_synth.methods.dpaf.mechanisms import conv2_record_grads, dpagg
from raydp_synth.methods.dpaf.networks import DiscriminatorParts, sin
from raydp_synth.privacy.dp_sgd import clipped_sum, noised_release, split_by_shapes
from raydp_synth.runtime.seeding import seeded


def _time(fn, repeats: int) -> list[float]:
    fn()  # warm-up
    out = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        out.append(time.perf_counter() - start)
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--image-size", type=int, default=16)
    parser.add_argument("--base-width", type=int, default=None)
    parser.add_argument("--batch-size", type=int, default=None)
    parser.add_argument("--mu", type=int, default=None)
    parser.add_argument("--out", type=Path, default=Path("bench/results/dpaf_dp_overhead.json"))
    args = parser.parse_args()
    warnings.filterwarnings("ignore", message="Full backward hook is firing")
    torch.set_num_threads(args.threads)
    rng = torch.Generator().manual_seed(0)  # inputs and initial parameters
    overrides = {k: v for k, v in {"base_width": args.base_width, "batch_size": args.batch_size,
                                   "mu": args.mu}.items() if v is not None}
    cfg = DPAFConfig(image_size=args.image_size, **overrides)
    arch = cfg.architecture(channels=1, num_classes=10)
    parts = seeded(lambda: DiscriminatorParts(arch), rng)
    for p in parts.conv1.parameters():
        p.requires_grad_(False)
    gsm = GradSampleModule(parts.conv2, loss_reduction="sum")
    params = list(parts.conv2.parameters())
    shapes = [p.shape for p in params]
    virtual = cfg.mu * cfg.batch_size
    x = torch.rand(virtual, 1, args.image_size, args.image_size, generator=rng) * 2 - 1
    y = torch.randint(10, (virtual,), generator=rng)
    v = torch.randn(arch.agg_maps, arch.agg_map_size, arch.agg_map_size, generator=rng)
    gen = torch.Generator().manual_seed(0)
    head_opt = torch.optim.Adam(list(parts.conv3.parameters()) + list(parts.fc.parameters()))

    def conv2_dp() -> None:
        gsm.enable_hooks()
        grads = conv2_record_grads(gsm, parts, x, y, v)
        gsm.disable_hooks()
        released = split_by_shapes(noised_release(
            clipped_sum(grads, max_grad_norm=1.0, topk_fraction=cfg.topk_fraction, shapes=shapes),
            noise_std=1.0, expected_batch_size=float(virtual), generator=gen), shapes)
        for p, g in zip(params, released, strict=True):
            p.grad = g

    def conv2_plain() -> None:
        gsm.disable_hooks()
        with torch.no_grad():
            h = parts.conv1(x)
        loss = (sin(parts.conv2(h, y)) * v).sum() / virtual
        grads = torch.autograd.grad(loss, params)
        for p, g in zip(params, grads, strict=True):
            p.grad = g

    xb, yb = x[: cfg.batch_size], y[: cfg.batch_size]

    def head_step(noise_std: float) -> None:
        gsm.disable_hooks()
        real = dpagg(parts, xb, yb, noise_std=noise_std, generator=gen) / cfg.batch_size
        fake = dpagg(parts, xb, yb, noise_std=noise_std, generator=gen) / cfg.batch_size
        loss = (F.binary_cross_entropy_with_logits(parts.head(real[None]), torch.ones(1))
                + F.binary_cross_entropy_with_logits(parts.head(fake[None]), torch.zeros(1)))
        head_opt.zero_grad()
        loss.backward()
        head_opt.step()

    def cycle(dp: bool) -> None:
        for _ in range(cfg.mu):
            head_step(arch.agg_sensitivity if dp else 0.0)
        (conv2_dp if dp else conv2_plain)()

    rows = {}
    for name, dp_fn, plain_fn, per in [
        ("conv2_step", conv2_dp, conv2_plain, 1),
        ("d_iteration", lambda: cycle(True), lambda: cycle(False), cfg.mu),
    ]:
        # Interleave to share the machine's state fairly between the two.
        dp_t, plain_t = [], []
        for _ in range(args.repeats):
            dp_t += _time(dp_fn, 1)
            plain_t += _time(plain_fn, 1)
        dp_ms = statistics.median(dp_t) / per * 1000
        plain_ms = statistics.median(plain_t) / per * 1000
        rows[name] = {"dp_ms": dp_ms, "non_private_ms": plain_ms, "ratio": dp_ms / plain_ms}
    result = {
        "benchmark": "dpaf_dp_overhead",
        "machine": f"{platform.machine()} {platform.processor() or ''} threads={args.threads}".strip(),
        "torch": torch.__version__,
        "config": {"image_size": args.image_size, "layer_split": cfg.layer_split, "base_width": cfg.base_width,
                   "batch_size": cfg.batch_size, "mu": cfg.mu, "virtual_batch": virtual,
                   "topk_fraction": cfg.topk_fraction, "conv2_params": sum(p.numel() for p in params)},
        "results": rows,
    }
    print(f"{'step':<14}{'DP ms':>10}{'non-DP ms':>12}{'ratio':>8}")
    for name, r in rows.items():
        print(f"{name:<14}{r['dp_ms']:>10.2f}{r['non_private_ms']:>12.2f}{r['ratio']:>8.2f}")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
