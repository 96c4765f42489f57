"""The folders a command writes, checked at the edge: before Ray starts or anything is
written, a folder the user cannot write to is one line and exit 2, not a traceback
after Ray's start.

Under ``ray job submit`` the command runs in the job's working folder, which is not
the folder the user submitted from: it is the folder where ``ray start`` ran (or, with
``--working-dir``, Ray's temporary copy of the uploaded folder, deleted later). A
relative output folder would land there, so a submitted job's default output folders
are under :data:`JOB_RESULTS` (``~/raydp_synth_results``, as Ray Tune's own default is
``~/ray_results``), and a relative one the user gives is refused in one line with the
fix (:func:`require_writable_folder`).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from raydp_synth.errors import ConfigError

__all__ = ["JOB_CONFIG_ENV", "JOB_RESULTS", "default_output_folder", "ray_job_submission",
           "require_writable_folder"]

#: Where the driver of a ``ray job submit`` job finds its job's config: Ray 2.60's job
#: supervisor sets it (``runtime_env`` and ``metadata``, whose ``job_submission_id`` is
#: the job's submission id; ``dashboard/modules/job/job_supervisor.py``).
JOB_CONFIG_ENV = "RAY_JOB_CONFIG_JSON_ENV_VAR"

#: The parent of a submitted job's default output folders (``studies``, ``runs``).
JOB_RESULTS = Path("~") / "raydp_synth_results"


def ray_job_submission() -> str | None:
    """The submission id of the ``ray job submit`` job this process is the driver of
    (e.g. ``raysubmit_...``, or the ``--submission-id`` given), or None outside one."""
    try:
        config = json.loads(os.environ.get(JOB_CONFIG_ENV) or "{}")
    except ValueError:
        return None
    metadata = config.get("metadata") if isinstance(config, dict) else None
    if not isinstance(metadata, dict):
        return None
    submission = metadata.get("job_submission_id")
    return str(submission) if submission else None


def default_output_folder(name: str) -> Path:
    """The default output folder ``name`` (e.g. ``studies``): relative to the working
    folder for a command run by hand; under :data:`JOB_RESULTS` (absolute) for the
    driver of a submitted Ray job, whose working folder is the cluster's."""
    if ray_job_submission() is None:
        return Path(name)
    return JOB_RESULTS.expanduser() / name


def require_writable_folder(path: Path, flag: str) -> None:
    """``path`` is, or can be made as, a folder this process can write in: its nearest
    existing ancestor is a folder with write and search permission (and a read-only
    file system counts as not writable); and, in the driver of a submitted Ray job,
    ``path`` is absolute (a relative one would name a folder in the job's working
    folder, which is not where the user submitted from).

    Raises:
        ConfigError: naming ``flag`` (e.g. ``--out``), the folder in the way and the fix.
    """
    submission = ray_job_submission()
    if submission is not None and not Path(path).expanduser().is_absolute():
        raise ConfigError(
            f"{flag} {path} is relative, but this runs as the Ray job {submission}, in the "
            f"job's working folder ({Path.cwd()}), not the folder you submitted from: pass "
            f"an absolute path (e.g. {flag} {JOB_RESULTS / path}; on a cluster of several "
            "nodes, a folder on storage every node mounts)")
    path = Path(path).expanduser().absolute()
    existing = next((p for p in (path, *path.parents) if p.exists()), None)
    if existing is None:  # pragma: no cover - "/" exists
        return
    if not existing.is_dir():
        raise ConfigError(f"{flag} {path}: {existing} is a file, not a folder; pass a folder")
    if not os.access(existing, os.W_OK | os.X_OK):
        raise ConfigError(f"{flag} {path}: {existing} is not writable by this user (or is on a "
                          f"read-only file system); pass a folder you can write to")
