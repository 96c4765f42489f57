"""Where a study may live on a cluster: storage every node reaches.

A study's trials, its accountant (which Ray may restart on any node and which rebuilds
its state from the ledger) and its release all read and write the study directory. A
relative ``--storage`` is resolved on the driver's machine: on a cluster of several
nodes it names a folder on that one machine's disk, so trials elsewhere would write
their checkpoints to their own disks and a restarted accountant could not find the
ledger. Such a study is refused before anything is written.

A submitted Ray job's default output folder (:data:`~raydp_synth.paths.JOB_RESULTS`,
under the head's home) is refused there too: it is one machine's disk as well.

A cluster that autoscales may have a single node when the study starts; an absolute
path on shared storage (``/storage/studies`` in ``cluster/``) is the documented way.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from raydp_synth.errors import ConfigError
from raydp_synth.paths import JOB_RESULTS

__all__ = ["alive_nodes", "require_shared_storage"]


def alive_nodes(nodes: Sequence[Mapping[str, Any]]) -> int:
    """How many of Ray's nodes (``ray.nodes()``) are alive."""
    return sum(1 for node in nodes if node.get("Alive", False))


def require_shared_storage(storage: Path | str, nodes: Sequence[Mapping[str, Any]], *,
                           option: str = "--storage") -> None:
    """Refuse a relative ``storage`` (as the user gave it), or one under a Ray job's
    default folder (:data:`~raydp_synth.paths.JOB_RESULTS`), on a Ray cluster with more
    than one live node (``nodes``: ``ray.nodes()``).

    Raises:
        ConfigError: one line naming the path, the node count and the fix.
    """
    count = alive_nodes(nodes)
    if count > 1 and Path(storage).expanduser().is_relative_to(JOB_RESULTS.expanduser()):
        raise ConfigError(
            f"{option} {storage} (a Ray job's default) is under this machine's home folder, "
            f"but the Ray cluster has {count} nodes: trials and the accountant on the other "
            f"nodes would not reach it; pass an absolute path on storage every node mounts "
            f"(e.g. {option} /storage/studies)")
    if count > 1 and not Path(storage).expanduser().is_absolute():
        raise ConfigError(
            f"{option} {storage} is relative, but the Ray cluster has {count} nodes: it would "
            "be a folder on this machine's disk only, out of reach of trials and of the "
            f"accountant on the other nodes; pass an absolute path on storage every node "
            f"mounts (e.g. {option} /storage/studies)")
