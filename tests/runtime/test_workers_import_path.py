"""Ray puts the driver's working folder on every worker's import path; a folder that
holds another ``raydp_synth`` (the one above a clone of that name, where ``ray start``
ran for a job) would shadow the package in every trial. ``ensure_ray`` stands in the
package's own folder while ``ray.init`` runs (runtime/ray_session.py). A real job from
such a folder: tests/tune/test_job_submit.py."""

from __future__ import annotations

import os
from pathlib import Path

import raydp_synth
from raydp_synth.runtime.ray_session import workers_import_this_package

PACKAGE = Path(raydp_synth.__file__).resolve().parent


def test_a_folder_with_another_raydp_synth_is_left_during_ray_init(tmp_path, monkeypatch):
    (tmp_path / "raydp_synth").mkdir()  # a clone's root, or any other package of that name
    monkeypatch.chdir(tmp_path)
    with workers_import_this_package() as stood_in:
        assert stood_in == PACKAGE.parent
        assert Path.cwd() == PACKAGE.parent
    assert Path.cwd() == tmp_path


def test_a_harmless_folder_is_kept(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with workers_import_this_package() as stood_in:
        assert stood_in is None and Path.cwd() == tmp_path
    monkeypatch.chdir(PACKAGE.parent)  # the package's own folder
    with workers_import_this_package() as stood_in:
        assert stood_in is None and Path(os.getcwd()) == PACKAGE.parent
