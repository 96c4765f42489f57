"""``--tune-on-public``: a search on public data at no cost, then one private run."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from raydp_synth.cli import run_cli
from raydp_synth.data import DataInfo, parse_dataset_spec
from raydp_synth.tune.__main__ import main
from raydp_synth.tune.final_run import final_run_settings
from raydp_synth.tune.public_search import PublicSearch, public_search_settings
from raydp_synth.tune.search_space import load_search_space
from raydp_synth.tune.strategies.roles import trial_role
from raydp_synth.tune.study_settings import PUBLIC_SEARCH, StudySettings

TINY = Path(__file__).with_name("tiny_dpaf.yaml")
DIGITS = DataInfo(num_records=1442, image_size=16, channels=1, num_classes=10)
PUBLIC = DataInfo(num_records=600, image_size=16, channels=1, num_classes=10)


@pytest.mark.parametrize(("argv", "needle"), [
    (["--tune-on-public", "folder:/x", "--strategy", "random-stopping", "--sampler", "random"],
     "--strategy random-stopping prices a private search and does not apply"),
    (["--tune-on-public", "folder:/x", "--name", "x", "--resume"], "cannot --resume"),
    (["--tune-on-public", "folder:/x:fraction=0.5"], "not a fraction"),
    (["--tune-on-public", "digits"], "names the sensitive training dataset"),
    (["--tune-on-public", "nosuchkind:/x"], "nosuchkind"),
    (["--tune-on-public", "folder:/nonexistent/public"], "/nonexistent/public"),
    (["--tune-on-public", "folder:/x", "--public", "digits:fraction=0.3"],
     "a part of the sensitive dataset"),
])
def test_a_bad_tune_on_public_is_one_clear_line_before_ray(argv, needle, capsys, tmp_path
                                                           ) -> None:
    with pytest.raises(SystemExit) as exit_info:
        run_cli(main, ["dpaf", *argv, "--storage", str(tmp_path)])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: ") and "\n" not in err and "Traceback" not in err
    assert needle in err
    assert not any(tmp_path.iterdir()), "a refused study wrote files"


def _settings(tmp_path: Path, **changes: Any) -> StudySettings:
    if isinstance(changes.get("role"), str):  # the trial role of that name
        changes["role"] = trial_role(changes["role"])
    values: dict[str, Any] = dict(
        study_name="s", study_dir=tmp_path / "s", method="dpaf", data=DIGITS,
        dataset=parse_dataset_spec("parquet:/secret/digits.parquet:classes=10"), public=None, seed=0, epsilon=5.0,
        delta=1e-5, role=trial_role("compose"), trials=3, reference_event=None,
        space=load_search_space(TINY, "dpaf", DIGITS), workers=1, use_gpu=False,
        cpus_per_worker=1.0, score_share=0.2, score_classifier="logreg",
        public_validation=parse_dataset_spec("parquet:/secret/validation.parquet"),
    )
    return StudySettings(**{**values, **changes})


def test_the_search_settings_hold_no_spec_of_the_sensitive_data(tmp_path: Path) -> None:
    from dataclasses import fields

    search = PublicSearch(dataset=parse_dataset_spec("folder:/public/digits"), data=PUBLIC,
                          space=load_search_space(TINY, "dpaf", PUBLIC), default=None)
    settings = public_search_settings(_settings(tmp_path), search)
    assert settings.role_name == PUBLIC_SEARCH and settings.score_share == 0
    assert str(settings.dataset) == "folder:/public/digits" and settings.data == PUBLIC
    # No field names the sensitive data: a search trial has nothing of it to load.
    assert not any("/secret/" in str(getattr(settings, f.name)) for f in fields(settings))


def test_the_final_run_takes_the_budget_left(tmp_path: Path) -> None:
    final = final_run_settings(_settings(tmp_path, role=PUBLIC_SEARCH), granted_before=0)
    assert final.role_name == "compose" and final.trials == 1
    assert final_run_settings(_settings(tmp_path), granted_before=4).trials == 5


@pytest.mark.ray
@pytest.mark.slow
def test_a_public_search_then_one_private_run_is_released_with_its_scope(ray_local, tmp_path
                                                                          ) -> None:
    from raydp_synth.accountant.ledger import Ledger
    from raydp_synth.budget import ledger_statement
    from raydp_synth.tune.study import StudyRequest, run_study
    from tests.train.test_relative_paths import _digits_folder, _digits_parquet

    _digits_folder(tmp_path / "public", 900)  # digits 0..899: public
    _digits_parquet(tmp_path / "secret.parquet", keep=slice(900, None))  # the rest: sensitive
    # The digits' own facts, declared (undeclared: 32x32 RGB, and a slower test).
    sensitive = f"parquet:{tmp_path}/secret.parquet:size=8:channels=1:classes=10"
    public = f"folder:{tmp_path}/public:size=8:channels=1"
    study = tmp_path / "on-public"
    run_study(StudyRequest(
        method="dpaf", epsilon=6.0, delta=1e-5, trials=2, search_space=TINY, storage=tmp_path,
        name="on-public", evaluate=False, dataset=sensitive, synthetic_samples=50,
        tune_on_public=public,
        settings={"epochs": 1},  # TINY's 2 epochs halved, in the search and the final run
    ))
    grants = [e for e in Ledger(study / "ledger.jsonl").entries() if e["kind"] == "grant"]
    assert len(grants) == 1  # the final run only
    statement = json.loads((study / "release" / "privacy.json").read_text())
    assert statement["scope"].startswith("the final private run only")
    assert public in statement["scope"]
    assert statement["tuned_on_public"]["declared"] == public
    assert 0.9 * 6.0 <= statement["epsilon"] <= 6.0
    offline, _ = ledger_statement(study)
    assert offline["epsilon"] == pytest.approx(statement["epsilon"], rel=1e-9)
    assert offline["trials_granted"] == 1
    # The search's two trials ran on the public data, asked no grant, never saw the
    # sensitive data; the released trial ran the config of the best of them.
    rows = [json.loads(line) for path in study.glob("public-search/*/result.json")
            for line in path.read_text().splitlines() if line.strip()]
    searched = {r["trial_id"] for r in rows}
    assert len(searched) == 2 and all(r["granted"] == 0 for r in rows if "score" in r)
    run = json.loads((study / "run.json").read_text())
    assert run["public_search"]["config_from_trial"] in searched
    assert run["released_trial"] not in searched
    assert run["tuned_on_public"] == public
    assert grants[0]["trial_id"] == run["released_trial"]
    phase_one = [p for p in study.glob("public-search/**/*") if p.is_file()]
    phase_one += [p for t in searched for p in (study / "trials" / t).glob("**/*") if p.is_file()]
    assert phase_one
    assert not [p for p in phase_one if b"secret.parquet" in p.read_bytes()]
    released = json.loads((study / "score.json").read_text())
    assert released["private"] is False  # scored on the public data, at no cost
