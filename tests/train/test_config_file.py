"""``--config FILE``: train a released (or any saved) configuration again without
retyping ``--set`` keys; explicit ``--set`` wins, the seed stays the run's."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from raydp_synth.cli import run_cli
from raydp_synth.config import config_to_dict
from raydp_synth.config_file import load_config_file, merge_settings
from raydp_synth.data import DataInfo
from raydp_synth.errors import ConfigError
from raydp_synth.methods import get_method
from raydp_synth.release import TrainedGenerator, write_release
from raydp_synth.train.__main__ import main as train_main

INFO = DataInfo(num_records=1442, image_size=16, channels=1, num_classes=10)


@pytest.fixture(scope="module")
def study_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A study directory whose release holds a non-default DPAF config."""
    method = get_method("dpaf")
    config = method.make_config({"mu": 2, "lr_d": 0.0015, "epochs": 7, "seed": 9,
                                 "budget_split": "0.1,0.3,0.6"}, INFO)
    torch.manual_seed(0)
    generator = TrainedGenerator.build(method="dpaf", config=config_to_dict(config),
                                       data_info=INFO.__dict__,
                                       class_names=[str(k) for k in range(10)],
                                       state_dict=method.build_generator(config, INFO).state_dict())
    out = tmp_path_factory.mktemp("cfg") / "study"
    write_release(out / "release", generator=generator, statement={}, num_synthetic=10, seed=0)
    return out


def test_a_release_gives_its_config_without_the_seed(study_dir: Path) -> None:
    for path in (study_dir, study_dir / "release", study_dir / "release" / "generator.json"):
        loaded = load_config_file(path, method="dpaf")
        assert loaded.released and loaded.method == "dpaf"
        assert loaded.path == study_dir / "release" / "generator.json"
        assert "seed" not in loaded.settings
    settings = merge_settings(loaded, {"epochs": "3"})
    assert settings["epochs"] == "3" and settings["mu"] == 2  # --set wins over the file
    released = json.loads((study_dir / "release" / "generator.json").read_text())["config"]
    rebuilt = get_method("dpaf").make_config({**merge_settings(loaded, {}), "seed": 4}, INFO)
    assert config_to_dict(rebuilt) == {**released, "seed": 4}


def test_a_plain_yaml_or_json_mapping_is_settings(tmp_path: Path) -> None:
    (tmp_path / "c.yaml").write_text("mu: 2\nepochs: 5\n")
    assert load_config_file(tmp_path / "c.yaml", method="dpgan").settings == {"mu": 2, "epochs": 5}
    (tmp_path / "c.json").write_text(json.dumps({"method": "dpaf", "mu": 1}))
    loaded = load_config_file(tmp_path / "c.json", method="dpaf")
    assert loaded.settings == {"mu": 1} and not loaded.released


@pytest.mark.parametrize(("content", "needle"), [
    (None, "does not exist"),
    ("- a\n- b\n", "does not hold a mapping of settings"),
    ("mu: [1\n", "cannot be read as JSON or YAML"),
    ('{"method": "dpgan", "config": {"epochs": 1}}', "is a dpgan configuration, not dpaf's"),
])
def test_bad_files_are_one_line_before_anything_runs(tmp_path: Path,
                                                     capsys: pytest.CaptureFixture[str],
                                                     content: str | None, needle: str) -> None:
    path = tmp_path / ("c.json" if content and content.startswith("{") else "c.yaml")
    if content is not None:
        path.write_text(content)
    out = tmp_path / "run"
    with pytest.raises(SystemExit) as exit_info:
        run_cli(train_main, ["dpaf", "--config", str(path), "--out", str(out)])
    err = capsys.readouterr().err
    assert exit_info.value.code == 2 and needle in err and err.count("\n") == 1
    assert not out.exists()


def test_a_folder_without_a_release_is_named(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="no generator.json in it or in its release/"):
        load_config_file(tmp_path, method="dpaf")


def test_tune_fixes_the_file_settings_like_set(study_dir: Path, tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """``tune --config``: the file's settings are fixed in every trial (``--set``
    wins); checked on the request the CLI builds, without starting a study."""
    import raydp_synth.tune.study as study_module
    from raydp_synth.tune.__main__ import main as tune_main

    seen = []
    monkeypatch.setattr(study_module, "run_study", seen.append)
    (tmp_path / "fixed.yaml").write_text("epochs: 3\nmu: 2\n")
    assert tune_main(["dpaf", "--config", str(tmp_path / "fixed.yaml"), "--set", "mu=1",
                      "--storage", str(tmp_path)]) == 0
    assert seen[0].settings == {"epochs": 3, "mu": "1"}
    assert tune_main(["dpaf", "--config", str(study_dir), "--storage", str(tmp_path)]) == 0
    assert seen[1].settings["lr_d"] == 0.0015 and "seed" not in seen[1].settings
