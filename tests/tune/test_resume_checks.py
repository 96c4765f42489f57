"""``--resume`` checks the study it continues (raydp_synth.tune.resume_checks): another
method (or any changed setting) is refused in one line, exit 2, nothing written; a
finished study is left as it is, byte for byte, unless ``--re-evaluate`` reruns its
evaluation only (no grant, no training, the release untouched)."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from raydp_synth.accountant.core import LEDGER_NAME
from raydp_synth.errors import ConfigError
from raydp_synth.tune.study import StudyRequest
from tests.evaluation.small_evaluation import small_evaluation

ROOT = Path(__file__).resolve().parents[2]
TINY = Path(__file__).with_name("tiny_dpaf.yaml")

#: The finished study's command line: one trial of TINY's space, one epoch, a small
#: release, no evaluation (the --re-evaluate test runs it).
ARGV = ["dpaf", "--epsilon", "4", "--trials", "1", "--search-space", str(TINY),
        "--set", "epochs=1", "--name", "done", "--no-eval", "--synthetic-samples", "20"]


def _snapshot(study: Path) -> dict[str, str]:
    """Every file of the study and the hash of its bytes."""
    return {str(p.relative_to(study)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(study.rglob("*")) if p.is_file()}


def _tune(argv: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop("RAY_ADDRESS", None)
    return subprocess.run([sys.executable, "-m", "raydp_synth.tune", *argv], cwd=cwd,
                          env=env, capture_output=True, text=True, timeout=300)


@pytest.fixture(scope="module")
def finished_study(ray_local, tmp_path_factory) -> Path:
    """One finished study (released, not evaluated), shared by the tests: each one
    compares the study's bytes before and after what it runs."""
    from raydp_synth.tune.__main__ import main

    storage = tmp_path_factory.mktemp("finished")
    assert main([*ARGV, "--storage", str(storage)]) == 0
    study = storage / "done"
    assert (study / "release" / "privacy.json").is_file()
    return study


@pytest.mark.ray
@pytest.mark.slow
def test_a_resume_with_another_method_is_refused_and_changes_nothing(finished_study,
                                                                     tmp_path) -> None:
    """It used to reload the dpaf experiment, rewrite the release and relabel run.json."""
    before = _snapshot(finished_study)
    argv = ["dpgan", *ARGV[1:], "--storage", str(finished_study.parent), "--resume"]
    proc = _tune(argv, tmp_path)
    assert proc.returncode == 2, proc.stderr[-3000:]
    lines = proc.stderr.strip().splitlines()
    assert lines[-1] == ("error: --resume: study done was started with METHOD dpaf, not "
                         "dpgan; resume it with the same METHOD, or start a new study under "
                         "a new --name"), proc.stderr[-3000:]
    assert _snapshot(finished_study) == before  # the ledger and run.json included
    assert json.loads((finished_study / "run.json").read_text())["method"] == "dpaf"


@pytest.mark.ray
@pytest.mark.slow
def test_a_finished_study_resumed_says_so_and_changes_nothing(finished_study,
                                                              tmp_path) -> None:
    before = _snapshot(finished_study)
    proc = _tune([*ARGV, "--storage", str(finished_study.parent), "--resume"], tmp_path)
    assert proc.returncode == 2, proc.stderr[-3000:]
    assert proc.stderr.strip().splitlines()[-1] == (
        f"error: study done is finished; its release is {finished_study / 'release'}; pass "
        "--re-evaluate to rerun its evaluation"), proc.stderr[-3000:]
    assert _snapshot(finished_study) == before


@pytest.mark.ray
@pytest.mark.slow
def test_re_evaluate_reruns_the_evaluation_only(finished_study, capsys) -> None:
    """No grant (the ledger's bytes), no training and no new release (the generator's
    bytes, every file but the evaluation's own)."""
    from raydp_synth.tune import study_release
    from raydp_synth.tune.__main__ import build_parser, study_request
    from raydp_synth.tune.study import run_study

    before = _snapshot(finished_study)
    assert not (finished_study / "evaluation.json").exists()  # the study ran --no-eval
    argv = [a for a in ARGV if a != "--no-eval"]
    argv += ["--storage", str(finished_study.parent), "--resume", "--re-evaluate"]
    request = study_request(build_parser().parse_args(argv))
    assert request.re_evaluate and request.resume
    with small_evaluation("dpaf", study_release):  # what it writes, not its figures
        result = run_study(request)
    after = _snapshot(finished_study)
    assert "evaluation.json" in after
    changed = {path for path in after if before.get(path) != after[path]}
    assert changed <= {"evaluation.json", "privacy_utility.png"}, changed
    assert after[LEDGER_NAME] == before[LEDGER_NAME]
    assert after["release/generator.safetensors"] == before["release/generator.safetensors"]
    assert "is finished; rerunning the evaluation" in capsys.readouterr().out
    # The release as it stands: the statement is privacy.json's, in its reader layout.
    assert result.statement == json.loads(
        (finished_study / "release" / "privacy.json").read_text())
    assert result.best_trial == json.loads((finished_study / "run.json").read_text())[
        "released_trial"]
    assert result.result_grid is None


def test_every_recorded_setting_is_checked_on_resume(tmp_path) -> None:
    """Before Ray: a setting other than how the trials run is refused in one line."""
    from dataclasses import replace

    from raydp_synth.tune.resume_checks import check_same_settings
    from raydp_synth.tune.study import request_json

    started = StudyRequest(method="dpaf", epsilon=4.0, delta=1e-5, trials=2,
                           settings={"epochs": "1"}, storage=tmp_path, name="s")
    study = tmp_path / "s"
    study.mkdir()
    (study / "study.json").write_text(json.dumps({"request": request_json(started)}))
    resumed = replace(started, resume=True)
    check_same_settings(resumed, study)  # the same settings
    check_same_settings(replace(resumed, max_concurrent=2, use_gpu=False,
                                storage=tmp_path / "moved", evaluate=False), study)
    for change, flag in [({"method": "dpgan"}, "METHOD dpaf, not dpgan"),
                         ({"seed": 3}, "--seed 0, not 3"),
                         ({"settings": {"epochs": "2"}}, '--set/--config {"epochs": "1"}'),
                         ({"score_share": 0.3}, "--score-share 0.2, not 0.3"),
                         ({"synthetic_samples": 7}, "--synthetic-samples 10000, not 7")]:
        with pytest.raises(ConfigError, match="was started with") as err:
            check_same_settings(replace(resumed, **change), study)
        assert flag in str(err.value) and "\n" not in str(err.value)


def test_a_resume_with_another_strategy_is_refused_by_its_flag(tmp_path) -> None:
    """study.json records the strategy under its persisted key ("selection"): the
    check compares it all the same, and names the flag the user types."""
    from raydp_synth.tune.resume_checks import check_same_settings
    from raydp_synth.tune.study import request_json

    started = StudyRequest(method="dpaf", epsilon=4.0, delta=1e-5, trials=2, sampler="random",
                           storage=tmp_path, name="s")
    (tmp_path / "s").mkdir()
    (tmp_path / "s" / "study.json").write_text(json.dumps({"request": request_json(started)}))
    resumed = StudyRequest(method="dpaf", epsilon=4.0, delta=1e-5, trials=2, sampler="random",
                           strategy="random-stopping", default_share=0.0, storage=tmp_path,
                           name="s", resume=True)
    with pytest.raises(ConfigError, match="was started with --strategy compose, not "
                                          "random-stopping") as err:
        check_same_settings(resumed, tmp_path / "s")
    assert "\n" not in str(err.value)


def test_re_evaluate_needs_resume_and_the_evaluation(tmp_path) -> None:
    with pytest.raises(ConfigError, match="add --resume"):
        StudyRequest(method="dpaf", epsilon=4.0, delta=1e-5, storage=tmp_path,
                     re_evaluate=True)
    with pytest.raises(ConfigError, match="--no-eval"):
        StudyRequest(method="dpaf", epsilon=4.0, delta=1e-5, storage=tmp_path, name="s",
                     resume=True, re_evaluate=True, evaluate=False)


def test_re_evaluate_of_a_study_without_release_is_refused(tmp_path) -> None:
    from dataclasses import replace

    from raydp_synth.tune.resume_checks import check_finished

    request = StudyRequest(method="dpaf", epsilon=4.0, delta=1e-5, storage=tmp_path,
                           name="s", resume=True, re_evaluate=True)
    (tmp_path / "s").mkdir()
    with pytest.raises(ConfigError, match="has no release yet"):
        check_finished(request, tmp_path / "s")
    check_finished(replace(request, re_evaluate=False), tmp_path / "s")  # a plain resume
