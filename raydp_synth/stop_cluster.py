"""``raydp-synth stop-cluster [--address HOST:PORT]``: stop one local Ray cluster.

The cluster a ``--keep-cluster`` run left up (or any ``ray start`` of yours on this
machine), and no other: ``ray stop`` stops every Ray process of the user on the
machine, another study's included. Without ``--address``, the cluster a plain
``ray.init()`` here would join (Ray's ``ray_current_cluster`` file).
"""

from __future__ import annotations

import argparse

from raydp_synth.cli import add_version_argument, run_cli
from raydp_synth.errors import ConfigError
from raydp_synth.runtime.local_cluster import running_local_cluster, stop_cluster

__all__ = ["main"]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="raydp-synth stop-cluster",
        description="Stop one local Ray cluster (ray stop stops every Ray of yours here).")
    parser.add_argument("--address", default=None,
                        help="its GCS address HOST:PORT (default: the cluster `ray.init()` "
                        "here would join)")
    add_version_argument(parser)
    args = parser.parse_args(argv)
    address = args.address or running_local_cluster()
    if address is None:
        raise ConfigError("no local Ray cluster to stop here; give its --address HOST:PORT")
    stopped = stop_cluster(address)
    killed = (f", {stopped.killed} of them killed after not ending on SIGTERM"
              if stopped.killed else "")
    print(f"stopped the Ray cluster at {address} ({stopped.processes} processes{killed})")
    return 0


if __name__ == "__main__":
    run_cli(main)
