"""Output folders of a ``ray job submit`` driver (raydp_synth/paths.py): the job is
known by the config Ray's job supervisor hands its driver; its default output folders
are under ``~/raydp_synth_results``; a relative one is refused in one line with the fix.
Outside a job nothing changes. The job itself runs in tests/tune/test_job_submit.py."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from raydp_synth.errors import ConfigError
from raydp_synth.paths import (
    JOB_CONFIG_ENV,
    default_output_folder,
    ray_job_submission,
    require_writable_folder,
)
from raydp_synth.runtime.shared_storage import require_shared_storage


@pytest.fixture
def in_a_job(monkeypatch, tmp_path):
    """This process as the driver of job ``raysubmit_abc``, with a home of its own."""
    monkeypatch.setenv(JOB_CONFIG_ENV, json.dumps(
        {"runtime_env": {}, "metadata": {"job_submission_id": "raysubmit_abc",
                                         "job_name": "raysubmit_abc"}}))
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    return tmp_path / "home"


def test_outside_a_job_the_defaults_are_relative(monkeypatch, tmp_path) -> None:
    monkeypatch.delenv(JOB_CONFIG_ENV, raising=False)
    assert ray_job_submission() is None
    assert default_output_folder("studies") == Path("studies")
    monkeypatch.chdir(tmp_path)
    require_writable_folder(Path("studies"), "--storage")  # no error


@pytest.mark.parametrize("config", ["", "not json", "[]", '{"metadata": {}}',
                                    '{"runtime_env": {}}'])
def test_no_submission_id_is_no_job(monkeypatch, config) -> None:
    monkeypatch.setenv(JOB_CONFIG_ENV, config)
    assert ray_job_submission() is None


def test_a_jobs_default_is_under_its_home(in_a_job) -> None:
    assert ray_job_submission() == "raysubmit_abc"
    assert default_output_folder("studies") == in_a_job / "raydp_synth_results" / "studies"
    require_writable_folder(default_output_folder("studies"), "--storage")


def test_a_relative_folder_under_a_job_is_refused_with_the_fix(in_a_job) -> None:
    with pytest.raises(ConfigError) as refused:
        require_writable_folder(Path("runs/dpaf-1"), "--out")
    message = str(refused.value)
    assert message.startswith("--out runs/dpaf-1 is relative, but this runs as the Ray job "
                              "raysubmit_abc, in the job's working folder")
    assert "--out ~/raydp_synth_results/runs/dpaf-1" in message and "\n" not in message


def test_the_jobs_default_is_refused_on_a_cluster_of_several_nodes(in_a_job) -> None:
    nodes = [{"Alive": True}, {"Alive": True}]
    with pytest.raises(ConfigError, match=r"a Ray job's default.*2 nodes.*/storage/studies"):
        require_shared_storage(default_output_folder("studies"), nodes)
    require_shared_storage(default_output_folder("studies"), nodes[:1])  # one node: fine
    require_shared_storage("/storage/studies", nodes)


def test_the_tune_cli_takes_the_jobs_default(in_a_job) -> None:
    from raydp_synth.tune.__main__ import build_parser, study_request

    request = study_request(build_parser().parse_args(["dpaf"]))
    assert request.storage == in_a_job / "raydp_synth_results" / "studies"
