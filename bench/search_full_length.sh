#!/usr/bin/env bash
# The search at full length on a GPU, in one command (issue 46's table): for DPAF and
# dpwgan, on MNIST and digits, at epsilon 1 and 10, three seeds each, at the methods'
# own epochs (nothing shortened):
#   run                    one default run (python -m raydp_synth.train), the yardstick
#   draw:0..2 (--ceiling)  three public draws of the packaged space, each one run at the
#                          whole epsilon: with the run, the headroom ("ceiling" row)
#   compose:3              tune's default strategy (3 trials, the default first)
#   restarts:3             random stopping with every trial the default (E[K] = 3)
#   dp-hypo-anchored       DP-HyPO whose prior holds the default with weight 1/2
#   public (digits only)   the search on 2,000 MNIST training images declared public (other
#                          writers, same classes), then one private run; MNIST's own cells
#                          have no disjoint public set of their kind here
#   constant (MNIST, dpwgan) the default before it followed the image size (capacity 16,
#                          --set dpwgan:capacity=16), one run a seed: the adaptive
#                          default's yardstick (the "run" rows are the adaptive default)
# Trials are packed four to a GPU (--gpus-per-trial 0.25). Each cell's evaluation.json
# carries CAS and the two collapse-sensitive figures (FID and IS under the domain CNN),
# which the summary tables show beside CAS.
#
#   bash bench/search_full_length.sh MNIST_DIR [OUT]
#
# MNIST_DIR: a folder with MNIST's four IDX files (nothing is downloaded). OUT (default
# bench/runs/search-full-length) keeps the runs; each cell's small files go to
# bench/results/search-full-length/{digits,mnist}/, and each dataset's log beside them
# ({digits,mnist}.log) ends with its summary table (python -m raydp_synth.report DIR
# lists every run). A cell that is done is skipped, so the command resumes where it
# stopped. Without a GPU it would run on the CPU, where full length takes days:
# BENCH_DEVICE= (empty) tries that anyway.
set -euo pipefail
cd "$(dirname "$0")/.."
mnist=${1:?usage: bash bench/search_full_length.sh MNIST_DIR [OUT]}
out=${2:-bench/runs/search-full-length}
device=${BENCH_DEVICE---use-gpu --gpus-per-trial 0.25 --max-concurrent 4}
python=${PYTHON:-python}

mkdir -p "$out" bench/results/search-full-length
[ -f "$out/mnist-2k.parquet" ] || "$python" bench/public_subset.py --dataset mnist \
    --data-dir "$mnist" --records 2000 --out "$out/mnist-2k.parquet"
common=(--methods dpaf,dpwgan --epsilons 1,10 --seeds 3 --ceiling 3 $device)
"$python" bench/search_strategies.py --dataset digits "${common[@]}" \
    --strategies run,compose:3,restarts:3,dp-hypo-anchored,public \
    --public-tuning "parquet:$out/mnist-2k.parquet" \
    --out "$out/digits" --results bench/results/search-full-length/digits \
    2>&1 | tee bench/results/search-full-length/digits.log
"$python" bench/search_strategies.py --dataset mnist --data-dir "$mnist" "${common[@]}" \
    --strategies run,compose:3,restarts:3,dp-hypo-anchored \
    --out "$out/mnist" --results bench/results/search-full-length/mnist \
    2>&1 | tee bench/results/search-full-length/mnist.log
"$python" bench/search_strategies.py --dataset mnist --data-dir "$mnist" --methods dpwgan \
    --epsilons 1,10 --seeds 3 --set dpwgan:capacity=16 --strategies run $device \
    --out "$out/mnist-constant" --results bench/results/search-full-length/mnist-constant \
    2>&1 | tee bench/results/search-full-length/mnist-constant.log
