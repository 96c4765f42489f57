"""A Ray cluster of a test's own, beside the session's: the environment of the
subprocess that starts it (an ``own_cluster`` test, tests/conftest.py).

Ray finds a cluster to join through ``ray_current_cluster`` in its temp folder
(``$RAY_TMPDIR/ray``), which ``ray start`` and ``ray.cluster_utils.Cluster`` write. A
private temp folder keeps the two apart both ways: a plain ``ray.init()`` or a
``ray start`` lookup of another test never finds this cluster, and this cluster's
processes never join the session's. Its sessions, logs and sockets live there too.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


@contextmanager
def private_ray_tmpdir() -> Iterator[Path]:
    """A new, short folder for ``RAY_TMPDIR`` (Ray's socket paths under it must fit a
    Unix socket's 107 bytes, which a pytest ``tmp_path`` may not), removed afterwards."""
    folder = Path(tempfile.mkdtemp(prefix="rt-", dir="/tmp"))
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def own_cluster_env(ray_tmpdir: Path) -> dict[str, str]:
    """This process's environment with Ray's temp folder under ``ray_tmpdir``, no
    ``RAY_ADDRESS`` (the session's), and this checkout importable."""
    env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}
    env["RAY_TMPDIR"] = str(ray_tmpdir)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    return env
