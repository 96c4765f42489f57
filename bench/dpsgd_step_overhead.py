"""Time of one DP-SGD step of the critic (dpwgan, dpgan, privimage-g) and of the
denoiser (privimage-d), as a ratio to the same non-private step, in one process.

* ``critic``: per-record gradients of the WGAN-GP pair (torch.func, double
  backward), one clip group, noise, division by qN; against one ordinary backward
  of the batch loss (same pairs, same penalty).
* ``critic_k5``: the same with dpGAN's adaptive clip groups (k = 5): the public
  batch's per-record gradients, Algorithm 2 and the grouped release included.
* ``denoiser``: PrivImage+D's U-Net, record losses over m draws, per-record
  gradients, clip, noise; against one backward of the batch loss over the same draws.

Usage: python bench/dpsgd_step_overhead.py [--repeats 10] [--threads 1] [--batch-size 128]
       [--capacity 16] [--width 16] [--multiplicity 4] [--out bench/results/dpsgd_step_overhead.json]
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import time
from pathlib import Path

import torch

from raydp_synth.methods.components.clip_groups import (
    adaptive_groups,
    group_sigma,
    grouped_clipped_sum,
    parameter_units,
)
from raydp_synth.methods.components.gan_networks import Critic
from raydp_synth.methods.components.pairs import critic_record_grads
from raydp_synth.methods.privimage.diffusion import (
    DDPMSchedule,
    UNet,
    denoiser_record_grads,
    denoising_loss,
)
from raydp_synth.privacy.dp_sgd import clipped_sum, noised_release
from raydp_synth.runtime.seeding import seeded


def _median_ms(fn, repeats: int) -> float:
    fn()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1000


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--batch-size", type=int, default=128)
    parser.add_argument("--capacity", type=int, default=16)
    parser.add_argument("--width", type=int, default=16)
    parser.add_argument("--multiplicity", type=int, default=4)
    parser.add_argument("--public-batch", type=int, default=64)
    parser.add_argument("--out", type=Path, default=Path("bench/results/dpsgd_step_overhead.json"))
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    rng = torch.Generator().manual_seed(0)  # inputs and initial parameters
    b, gen = args.batch_size, torch.Generator().manual_seed(0)
    x = torch.rand(b, 1, 16, 16, generator=rng) * 2 - 1
    f = torch.rand(b, 1, 16, 16, generator=rng) * 2 - 1
    y, mix = torch.randint(10, (b,), generator=rng), torch.rand(b, 1, 1, 1, generator=rng)

    critic = seeded(lambda: Critic(image_size=16, channels=1, num_classes=10,
                                   capacity=args.capacity), rng)
    params = list(critic.parameters())
    shapes = [p.shape for p in params]

    def critic_dp() -> None:
        grads = critic_record_grads(critic, x, y, f, mix, gp_weight=10.0)
        noised_release(clipped_sum(grads, max_grad_norm=1.0, shapes=shapes), noise_std=1.0,
                       expected_batch_size=float(b), generator=gen)

    unit_of, units = parameter_units([(n, p.shape) for n, p in critic.named_parameters()])
    pub = args.public_batch

    def critic_grouped() -> None:
        public = critic_record_grads(critic, x[:pub], y[:pub], f[:pub], mix[:pub], gp_weight=10.0)
        groups = adaptive_groups(torch.cat([g.flatten(1) for g in public], 1), unit_of, units,
                                 groups=5)
        grads = critic_record_grads(critic, x, y, f, mix, gp_weight=10.0)
        # The dpGAN step: the rescaled clipped sum, noise z*sqrt(k) once, rescaled by C_j.
        summed = grouped_clipped_sum(torch.cat([g.flatten(1) for g in grads], 1), groups)
        groups.rescale(noised_release(summed, noise_std=group_sigma(1.0, groups.k),
                                      expected_batch_size=float(b), generator=gen))

    def critic_plain() -> None:
        xhat = (mix * x + (1 - mix) * f).requires_grad_(True)
        slope = torch.autograd.grad(critic(xhat, y).sum(), xhat, create_graph=True)[0]
        penalty = (slope.flatten(1).norm(dim=1) - 1) ** 2
        loss = (critic(f, y) - critic(x, y) + 10.0 * penalty).mean()
        torch.autograd.grad(loss, params)

    unet = seeded(lambda: UNet(channels=1, num_classes=10, width=args.width), rng)
    schedule = DDPMSchedule()
    m = args.multiplicity
    t, noise = torch.randint(1000, (b, m), generator=rng), torch.randn(b, m, 1, 16, 16, generator=rng)
    unet_params = list(unet.parameters())

    def denoiser_dp() -> None:
        grads = denoiser_record_grads(unet, schedule, x, y, t, noise)
        noised_release(clipped_sum(grads, max_grad_norm=1.0,
                                   shapes=[p.shape for p in unet_params]),
                       noise_std=1.0, expected_batch_size=float(b), generator=gen)

    def denoiser_plain() -> None:
        xs = x[:, None].expand(b, m, 1, 16, 16).reshape(b * m, 1, 16, 16)
        loss = denoising_loss(unet, schedule, xs, y.repeat_interleave(m), t.flatten(),
                              noise.reshape(b * m, 1, 16, 16)).mean()
        torch.autograd.grad(loss, unet_params)

    rows = {}
    for name, dp_fn, plain_fn in [("critic", critic_dp, critic_plain),
                                  ("critic_k5", critic_grouped, critic_plain),
                                  ("denoiser", denoiser_dp, denoiser_plain)]:
        dp_t, plain_t = [], []
        for _ in range(args.repeats):  # interleaved: both see the same machine state
            dp_t.append(_median_ms(dp_fn, 1))
            plain_t.append(_median_ms(plain_fn, 1))
        dp_ms, plain_ms = statistics.median(dp_t), statistics.median(plain_t)
        rows[name] = {"dp_ms": dp_ms, "non_private_ms": plain_ms, "ratio": dp_ms / plain_ms}
    result = {
        "benchmark": "dpsgd_step_overhead",
        "machine": f"{platform.machine()} {platform.processor() or ''} threads={args.threads}".strip(),
        "torch": torch.__version__,
        "config": {"image_size": 16, "batch_size": b, "capacity": args.capacity,
                   "width": args.width, "multiplicity": m, "public_batch": pub,
                   "critic_params": sum(p.numel() for p in params),
                   "unet_params": sum(p.numel() for p in unet_params)},
        "results": rows,
    }
    print(f"{'step':<12}{'DP ms':>10}{'non-DP ms':>12}{'ratio':>8}")
    for name, r in rows.items():
        print(f"{name:<12}{r['dp_ms']:>10.1f}{r['non_private_ms']:>12.1f}{r['ratio']:>8.2f}")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
