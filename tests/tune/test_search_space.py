"""Search spaces: the packaged DPAF space, sampling through Optuna, the schema errors."""

from __future__ import annotations

import copy
import fnmatch
import pickle
import re
import sys
from pathlib import Path
from typing import Any

import optuna
import pytest
import yaml

import raydp_synth.methods.dpaf
from raydp_synth.data import DataInfo
from raydp_synth.errors import ConfigError
from raydp_synth.methods import get_method, method_names
from raydp_synth.tune.search_space import (
    CategoricalParam,
    SearchSpace,
    WeightsParam,
    is_adaptive,
    load_search_space,
    make_sampler,
)

optuna.logging.set_verbosity(optuna.logging.WARNING)

REPO = Path(__file__).resolve().parents[2]
DIGITS = DataInfo(num_records=1442, image_size=16, channels=1, num_classes=10)
PUBLIC_DIGITS = DataInfo(num_records=1038, image_size=16, channels=1, num_classes=10,
                         public_records=404)
DPAF = get_method("dpaf")

# A small valid space; each schema test below breaks one thing in it.
BASE: dict[str, Any] = {
    "method": "dpaf",
    "params": {
        "mu": {"type": "int", "low": 1, "high": 4, "log": True},
        "lr_d": {"type": "float", "low": 1.0e-4, "high": 3.0e-3, "log": True},
        "layer_split": {"type": "categorical", "choices": ["C2-C1-x", "C1-C1-x"]},
        "budget_split": {"type": "weights", "names": ["classifier", "conv2", "dpagg"],
                         "low": 0.05, "high": 1.0},
    },
    "fixed": {"epochs": 5},
}


def write(tmp_path: Path, content: Any, name: str = "space.yaml") -> Path:
    path = tmp_path / name
    path.write_text(content if isinstance(content, str) else yaml.safe_dump(content, sort_keys=False))
    return path


def load(tmp_path: Path, content: Any, data: DataInfo = DIGITS) -> SearchSpace:
    return load_search_space(write(tmp_path, content), "dpaf", data)


def settings_of(space: SearchSpace, trial: optuna.Trial) -> dict[str, Any]:
    """What a Tune trial gets: the suggested values and the returned constants, flat."""
    constants = space.define_by_run(trial)
    return space.settings_from_trial_config({**trial.params, **constants})


# ------------------------------------------------------------------ the packaged space


def test_packaged_dpaf_space_loads_for_digits() -> None:
    space = load_search_space(None, "dpaf", DIGITS)
    assert space.method == "dpaf"
    assert space.path == Path(str(DPAF.search_space_file()))
    assert space.path == Path(raydp_synth.methods.dpaf.__file__).with_name("search_space.yaml")
    split = space.params["layer_split"]
    assert isinstance(split, CategoricalParam)
    # Re-centred on the measurements (bench/results/utility/NOTES.md 4.1 and
    # bench/results/strategies/NOTES.md 4.3): the splits that aggregate 4x4 maps on 16x16,
    # G trained on the aggregate (not searched).
    assert split.choices == ("C1-C1-x", "C1-C1-C1")
    assert not space.notes  # both fit 16x16
    assert {"mu", "n_critic", "budget_split", "batch_size", "lr_d", "lr_g", "clip_conv2",
            "topk_fraction", "g_steps", "base_width", "g_smoothness"} <= set(space.params)
    assert "generator_loss" not in space.params and "generator_loss" not in space.fixed
    weights = space.params["budget_split"]
    assert isinstance(weights, WeightsParam) and len(weights.names) == 3
    assert space.fixed["epochs"] <= 30
    # the default config of DPAF fits the default space's fixed values, and keeps
    # the measured generator loss
    assert DPAF.make_config(space.fixed, DIGITS).generator_loss == "aggregate"


@pytest.mark.parametrize(
    ("size", "kept", "dropped"),
    [(8, ("C1-C1-x",), ("C1-C1-C1",)),
     (32, ("C1-C1-x", "C1-C1-C1"), ())],
)
def test_packaged_space_filters_layer_splits_by_image_size(size, kept, dropped) -> None:
    data = DataInfo(num_records=1442, image_size=size, channels=1, num_classes=10)
    space = load_search_space(None, "dpaf", data)
    assert space.params["layer_split"].choices == kept
    text = " ".join(space.notes)
    assert (f"{size}x{size}" in text) == bool(dropped)
    assert all(d in text for d in dropped)
    assert not any(f"dropped {k}," in text or f"dropped {k}:" in text for k in kept)


def test_explicit_path_equals_the_default(tmp_path: Path) -> None:
    copied = write(tmp_path, DPAF.search_space_file().read_text())
    a, b = load_search_space(copied, "dpaf", DIGITS), load_search_space(None, "dpaf", DIGITS)
    assert (a.params, a.fixed, a.notes) == (b.params, b.fixed, b.notes)
    assert a.path == copied


@pytest.mark.parametrize("method", method_names())
def test_every_method_ships_its_default_space_as_package_data(method: str) -> None:
    """The default lives in the method's own package, is package data (pyproject), is
    the one a study loads without a file, and search_spaces/README.md points to it."""
    tomllib = pytest.importorskip("tomllib")
    m = get_method(method)
    file = Path(str(m.search_space_file()))
    package_dir = Path(sys.modules[type(m).__module__].__file__).parent
    assert file.parent == package_dir and file.is_file()
    package_data = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"][
        "package-data"]
    assert any(fnmatch.fnmatch(file.name, pattern) for pattern in package_data["*"])
    data = PUBLIC_DIGITS if m.requires_public else DIGITS
    space = load_search_space(None, method, data)
    assert space.method == method and space.path == file


def test_the_readme_table_of_defaults_names_real_files() -> None:
    """Each row of search_spaces/README.md's table names a registered method and its
    packaged default (a method needs no row: adding one is one folder)."""
    readme = (REPO / "search_spaces" / "README.md").read_text()
    rows = re.findall(r"^\| `([a-z0-9-]+)` \| `([^`]+)` \|$", readme, flags=re.M)
    assert rows
    for method, path in rows:
        assert method in method_names()
        assert Path(str(get_method(method).search_space_file())) == REPO / path


def test_search_spaces_folder_holds_examples_not_copies_of_the_defaults() -> None:
    """search_spaces/ is for the user's own spaces: its worked example loads, and no
    file there repeats a method's default."""
    files = sorted((REPO / "search_spaces").glob("*.yaml"))
    assert [f.name for f in files] == ["example-dpaf-narrow.yaml"]
    defaults = {get_method(n).search_space_file().read_text() for n in method_names()}
    for file in files:
        assert file.read_text() not in defaults
        space = load_search_space(file, yaml.safe_load(file.read_text())["method"], DIGITS)
        assert space.path == file and space.notes == ()
        default = load_search_space(None, space.method, DIGITS)
        assert (space.params, space.fixed) != (default.params, default.fixed)
    example = load_search_space(files[0], "dpaf", DIGITS)
    assert {type(p).__name__ for p in example.params.values()} == {
        "IntParam", "FloatParam", "CategoricalParam", "WeightsParam"}
    study = optuna.create_study(sampler=make_sampler("random", 0))
    for _ in range(5):
        DPAF.schedule(DPAF.make_config(settings_of(example, study.ask()), DIGITS), DIGITS)


# ------------------------------------------------------------------------ sampling


@pytest.mark.parametrize("kind", ["random", "tpe"])
def test_sampled_settings_make_valid_configs(kind: str) -> None:
    space = load_search_space(None, "dpaf", DIGITS)
    sampler = make_sampler(kind, 0, n_startup_trials=5) if kind == "tpe" else make_sampler(kind, 0)
    study = optuna.create_study(sampler=sampler, direction="maximize")
    seen_splits = set()
    for i in range(30):
        trial = study.ask()
        settings = settings_of(space, trial)
        config = DPAF.make_config(settings, DIGITS)
        DPAF.schedule(config, DIGITS)
        assert len(config.budget_split) == 3 and config.epochs == space.fixed["epochs"]
        seen_splits.add(config.layer_split)
        study.tell(trial, float(i % 7))  # TPE models past the 5 start-up trials
    assert seen_splits <= set(space.params["layer_split"].choices)
    assert len(seen_splits) > 1


@pytest.mark.parametrize("kind", ["random", "tpe"])
def test_seeded_samplers_reproduce_their_sequence(kind: str) -> None:
    space = load_search_space(None, "dpaf", DIGITS)

    def run(seed: int) -> list[dict[str, Any]]:
        study = optuna.create_study(sampler=make_sampler(kind, seed, **(
            {"n_startup_trials": 3} if kind == "tpe" else {})), direction="maximize")
        out = []
        for i in range(8):
            trial = study.ask()
            out.append(settings_of(space, trial))
            study.tell(trial, float(i % 3))
        return out

    assert run(0) == run(0)
    assert run(0) != run(1)


def test_sampler_kinds() -> None:
    assert isinstance(make_sampler("tpe", 1), optuna.samplers.TPESampler)
    assert isinstance(make_sampler("random", 1), optuna.samplers.RandomSampler)
    assert is_adaptive("tpe") and not is_adaptive("random")
    space = load_search_space(None, "dpaf", DIGITS)
    assert space.is_adaptive("tpe") and isinstance(space.make_sampler("random", 0),
                                                   optuna.samplers.RandomSampler)
    for bad in (lambda: make_sampler("cmaes", 0), lambda: is_adaptive("grid")):
        with pytest.raises(ConfigError, match="unknown sampler"):
            bad()


def test_settings_from_trial_config_round_trips_weights(tmp_path: Path) -> None:
    space = load(tmp_path, BASE)
    assert space.trial_keys == ("mu", "lr_d", "layer_split", "budget_split.classifier",
                                "budget_split.conv2", "budget_split.dpagg")
    flat = {"mu": 2, "lr_d": 1e-3, "layer_split": "C1-C1-x", "budget_split.classifier": 0.1,
            "budget_split.conv2": 0.5, "budget_split.dpagg": 0.9, "epochs": 5,
            "study_dir": "/elsewhere"}  # a key of the caller's param_space: ignored
    settings = space.settings_from_trial_config(flat)
    assert settings == {"epochs": 5, "mu": 2, "lr_d": 1e-3, "layer_split": "C1-C1-x",
                        "budget_split": (0.1, 0.5, 0.9)}
    assert DPAF.make_config(settings, DIGITS).budget_split == (0.1, 0.5, 0.9)

    trial = optuna.create_study(sampler=make_sampler("random", 3)).ask()
    constants = space.define_by_run(trial)
    assert constants == {"epochs": 5}
    settings = space.settings_from_trial_config({**trial.params, **constants})
    assert settings["budget_split"] == tuple(
        trial.params[f"budget_split.{n}"] for n in ("classifier", "conv2", "dpagg"))

    del flat["budget_split.conv2"]
    with pytest.raises(ConfigError, match=r"lacks 'budget_split\.conv2'"):
        space.settings_from_trial_config(flat)


def test_space_pickles(tmp_path: Path) -> None:
    space = load(tmp_path, BASE)
    again = pickle.loads(pickle.dumps(space))
    assert again == space
    trial = optuna.create_study(sampler=make_sampler("random", 0)).ask()
    assert pickle.loads(pickle.dumps(space.define_by_run))(trial) == {"epochs": 5}


def test_ray_tune_optuna_search_suggests_a_config() -> None:
    """Ray Tune's OptunaSearch runs define_by_run without a Ray cluster."""
    from ray.tune.search.optuna import OptunaSearch

    space = load_search_space(None, "dpaf", DIGITS)
    search = OptunaSearch(space=space.define_by_run, metric="score", mode="max",
                          sampler=make_sampler("random", 0))
    config = search.suggest("trial_1")
    assert set(config) == set(space.trial_keys) | set(space.fixed)
    assert config["epochs"] == space.fixed["epochs"]
    settings = space.settings_from_trial_config(config)
    DPAF.make_config(settings, DIGITS)
    search.on_trial_complete("trial_1", {"score": 0.5})
    assert search.suggest("trial_2") != config


# ------------------------------------------------------------- the default goes first


@pytest.mark.parametrize("method", method_names())
def test_a_compose_study_runs_the_methods_default_config_first(method: str) -> None:
    """Every packaged space holds its method's defaults: trial 1 is the default run
    (with the space's fixed values), through Ray Tune's OptunaSearch."""
    from ray.tune.search.optuna import OptunaSearch

    from raydp_synth.config import config_to_dict
    from raydp_synth.tune.study import StudyRequest, first_points

    m = get_method(method)
    data = PUBLIC_DIGITS if m.requires_public else DIGITS
    space = load_search_space(None, method, data)
    default_config = m.make_config({**space.fixed, "seed": 0}, data)
    points = first_points(StudyRequest(method=method, epsilon=10.0, delta=1e-5), space,
                          default_config)
    assert points is not None and set(points[0]) == set(space.trial_keys)
    search = OptunaSearch(space=space.define_by_run, metric="score", mode="max",
                          sampler=make_sampler("tpe", 0), points_to_evaluate=points)
    first = config_to_dict(m.make_config(space.settings_from_trial_config(search.suggest("t1")), data))
    default = config_to_dict(m.make_config(space.fixed, data))
    for key in ("budget_split", "weights"):  # relative weights: compare the ratios
        if isinstance(first.get(key), list):
            first[key] = [w / sum(first[key]) for w in first[key]]
            default[key] = pytest.approx([w / sum(default[key]) for w in default[key]])
    assert first == default
    assert config_to_dict(m.make_config(space.settings_from_trial_config(search.suggest("t2")),
                                        data)) != default


def test_defaults_outside_the_space_are_sampled(tmp_path: Path) -> None:
    space = load(tmp_path, broken(params__mu={"type": "int", "low": 2, "high": 4},
                                  params__layer_split={"type": "categorical",
                                                       "choices": ["C2-C1-x", "C1-C2-x"]}))
    point = space.default_point({"mu": 1, "lr_d": 1e-3, "layer_split": "C1-C1-x",
                                 "budget_split": (0.05, 0.25, 0.7)})
    assert point == {"lr_d": 1e-3, "budget_split.classifier": pytest.approx(0.05 / 0.7),
                     "budget_split.conv2": pytest.approx(0.25 / 0.7), "budget_split.dpagg": 1.0}
    # ratios the weights' range cannot hold (0.01 / 0.7 < low 0.05) are sampled too
    assert "budget_split.dpagg" not in space.default_point({"budget_split": (0.01, 0.3, 0.7)})


def test_random_stopping_and_resume_run_no_fixed_first_trial() -> None:
    """Random stopping's theorem needs i.i.d. trials: no fixed first trial."""
    from raydp_synth.tune.study import StudyRequest, first_points

    space = load_search_space(None, "dpaf", DIGITS)
    rs = StudyRequest(method="dpaf", epsilon=5.0, delta=1e-5, strategy="random-stopping",
                      sampler="random")
    resumed = StudyRequest(method="dpaf", epsilon=5.0, delta=1e-5, resume=True)
    default = DPAF.make_config(space.fixed, DIGITS)
    assert first_points(rs, space, default) is None
    assert first_points(resumed, space, default) is None


# --------------------------------------------------------------------- schema errors


def broken(**changes: Any) -> dict[str, Any]:
    """BASE with changes: ``params__mu={...}`` sets params.mu; a value of None deletes."""
    space = copy.deepcopy(BASE)
    for key, value in changes.items():
        *path, last = key.split("__")
        target = space
        for part in path:
            target = target[part]
        if value is None:
            target.pop(last, None)
        else:
            target[last] = value
    return space


SCHEMA_ERRORS = [
    ("not a mapping", "- a\n- b\n", ["expected a mapping"]),
    ("empty file", "", ["is empty"]),
    ("bad yaml", "method: dpaf\nparams: {mu: [1\n", ["not valid YAML", "line"]),
    ("duplicate key", "method: dpaf\nparams:\n  mu: {type: int, low: 1, high: 2}\n"
     "  mu: {type: int, low: 1, high: 3}\n", ["duplicate key 'mu'"]),
    ("unknown top-level", broken(param={}), ["unknown top-level key", "param"]),
    ("missing params", broken(params=None), ["missing top-level key", "params"]),
    ("method mismatch", broken(method="dpgan"), ["method", "'dpgan'", "'dpaf'"]),
    ("unknown param", broken(params__learning_rate={"type": "float", "low": 0.1, "high": 1}),
     ["params.learning_rate", "not a setting of DPAFConfig", "lr_d"]),
    ("unknown fixed", broken(fixed__epoch=3), ["fixed.epoch", "valid keys", "epochs"]),
    ("both", broken(fixed__mu=2), ["params.mu", "also in fixed"]),
    ("image_size param", broken(params__image_size={"type": "categorical", "choices": [8, 16]}),
     ["params.image_size", "cannot be searched", "dataset"]),
    ("seed param", broken(params__seed={"type": "int", "low": 0, "high": 9}),
     ["params.seed", "cannot be searched", "study"]),
    ("image_size fixed", broken(fixed__image_size=32), ["fixed.image_size", "cannot be fixed"]),
    ("params empty", broken(params={}), ["params", "non-empty mapping"]),
    ("spec not mapping", broken(params__mu=[1, 8]), ["params.mu", "expected a mapping"]),
    ("unknown type", broken(params__mu={"type": "integer", "low": 1, "high": 8}),
     ["params.mu", "unknown type 'integer'", "categorical"]),
    ("missing type", broken(params__mu={"low": 1, "high": 8}), ["params.mu", "missing 'type'"]),
    ("missing field", broken(params__mu={"type": "int", "low": 1}),
     ["params.mu", "missing field(s) high"]),
    ("extra field", broken(params__layer_split={"type": "categorical", "choices": ["C1-C1-x"],
                                                "low": 1}),
     ["params.layer_split", "unknown field(s) low"]),
    ("low > high", broken(params__lr_d={"type": "float", "low": 0.1, "high": 0.01}),
     ["params.lr_d", "empty range"]),
    ("float low == high", broken(params__lr_d={"type": "float", "low": 0.001, "high": 0.001}),
     ["params.lr_d", "in fixed"]),
    ("int low == high", broken(params__mu={"type": "int", "low": 2, "high": 2}),
     ["params.mu", "in fixed"]),
    ("log low <= 0", broken(params__lr_d={"type": "float", "low": 0.0, "high": 0.01,
                                          "log": True}),
     ["params.lr_d", "log: true needs low > 0"]),
    ("log and step", broken(params__mu={"type": "int", "low": 1, "high": 9, "step": 2,
                                        "log": True}),
     ["params.mu", "cannot be combined with step"]),
    ("step misfit", broken(params__mu={"type": "int", "low": 1, "high": 8, "step": 2}),
     ["params.mu", "multiple of step=2"]),
    ("bool bound", broken(params__mu={"type": "int", "low": True, "high": 8}),
     ["params.mu", "low=True must be an integer"]),
    ("float for an int field", broken(params__mu={"type": "float", "low": 1, "high": 8}),
     ["params.mu", "use type: int"]),
    ("empty choices", broken(params__layer_split={"type": "categorical", "choices": []}),
     ["params.layer_split", "choices is empty"]),
    ("list choice", broken(params__layer_split={"type": "categorical", "choices": [[1, 2]]}),
     ["params.layer_split", "must be scalars"]),
    ("duplicate choice", broken(params__layer_split={"type": "categorical",
                                                     "choices": ["C1-C1-x", "C1-C1-x"]}),
     ["params.layer_split", "listed twice"]),
    ("one weight", broken(params__budget_split={"type": "weights", "names": ["all"],
                                                "low": 0.1, "high": 1}),
     ["params.budget_split", "at least 2 names"]),
    ("weights on a float", broken(params__lr_d={"type": "weights", "names": ["a", "b"],
                                                "low": 0.1, "high": 1}),
     ["params.lr_d", "needs a tuple setting"]),
    ("weights count", broken(params__budget_split={"type": "weights", "names": ["a", "b"],
                                                   "low": 0.1, "high": 1}),
     ["params.budget_split", "three positive weights"]),
    ("zero weight", broken(params__budget_split={"type": "weights", "names": ["a", "b", "c"],
                                                 "low": 0.0, "high": 1}),
     ["params.budget_split", "low=0 must be > 0"]),
    ("fixed invalid", broken(fixed__epochs=-1), ["fixed.epochs", "Expected epochs=-1"]),
    ("fixed too big for the data", broken(fixed__classifier_batch_size=5000),
     ["fixed.classifier_batch_size", "exceeds the 1442 training records"]),
    ("high invalid", broken(params__topk_fraction={"type": "float", "low": 0.5, "high": 1.5}),
     ["params.topk_fraction", "high=1.5", "topk_fraction=1.5"]),
]


@pytest.mark.parametrize(("content", "expected"), [c[1:] for c in SCHEMA_ERRORS],
                         ids=[c[0] for c in SCHEMA_ERRORS])
def test_schema_errors_are_one_clear_line(tmp_path: Path, content: Any, expected: list[str]) -> None:
    path = write(tmp_path, content)
    with pytest.raises(ConfigError) as err:
        load_search_space(path, "dpaf", DIGITS)
    message = str(err.value)
    assert "\n" not in message
    assert message.startswith(str(path))
    for part in expected:
        assert part in message, (part, message)


def test_missing_file_and_directory(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"nope\.yaml not found"):
        load_search_space(tmp_path / "nope.yaml", "dpaf", DIGITS)
    with pytest.raises(ConfigError, match="is not a file"):
        load_search_space(tmp_path, "dpaf", DIGITS)


def test_yaml_float_without_dot_is_accepted(tmp_path: Path) -> None:
    text = DPAF.search_space_file().read_text().replace("1.0e-4", "1e-4")
    assert "low: 1e-4" in text
    space = load(tmp_path, text)
    assert space.params["lr_d"].low == 1e-4


# ------------------------------------------------------------------ fitting the data


def test_no_layer_split_fits(tmp_path: Path) -> None:
    path = write(tmp_path, broken(params__layer_split={
        "type": "categorical", "choices": ["C2-C2-x", "C3-C1-x"]}))
    with pytest.raises(ConfigError) as err:
        load_search_space(path, "dpaf", DIGITS)
    message = str(err.value)
    assert "\n" not in message and message.startswith(str(path))
    assert "params.layer_split: no choice fits 16x16x1 images" in message
    assert "allows at most 3" in message  # what fits


def test_no_layer_split_fits_a_single_choice(tmp_path: Path) -> None:
    data = DataInfo(num_records=1442, image_size=8, channels=1, num_classes=10)
    with pytest.raises(ConfigError, match=r"params\.layer_split: .*8x8x1 images.*at most 2"):
        load(tmp_path, broken(params__layer_split={"type": "categorical",
                                                   "choices": ["C2-C1-x"]}), data)


def test_filtering_is_generic_over_params(tmp_path: Path) -> None:
    """Not DPAF-specific: a batch size larger than the data is dropped like a layer split."""
    space = load(tmp_path, broken(params__batch_size={"type": "categorical",
                                                      "choices": [512, 4096]}))
    assert space.params["batch_size"].choices == (512,)
    assert any("params.batch_size: dropped 4096" in n and "exceeds the 1442" in n
               for n in space.notes)


def test_choices_that_do_not_fit_together_are_refused(tmp_path: Path) -> None:
    # With 1 epoch, batch 1024 leaves 2 GAN iterations: mu=4 would never train conv2*.
    space = broken(params__batch_size={"type": "categorical", "choices": [256, 1024]},
                   fixed__epochs=1)
    with pytest.raises(ConfigError) as err:
        load(tmp_path, space)
    message = str(err.value)
    assert "batch_size=1024" in message and "numeric params at their high" in message and "mu=4" in message
    assert "does not fit 16x16x1" in message and "\n" not in message


def test_no_fit_blames_the_param_whose_choices_all_fail(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"params\.n_critic: no choice fits .*n_critic=0 >= 1"):
        load(tmp_path, broken(params__n_critic={"type": "categorical", "choices": [0, -1]}))


def test_set_fixes_a_setting_and_stops_searching_it() -> None:
    space = load_search_space(None, "dpaf", DIGITS)
    fixed = space.with_fixed({"mu": "4", "epochs": "2"})
    assert "mu" not in fixed.params and "mu" in space.params  # the original is unchanged
    assert fixed.fixed["mu"] == "4" and fixed.fixed["epochs"] == "2"
    assert any("mu fixed to '4' by --set" in note for note in fixed.notes)
    sampler = make_sampler("random", 0)
    study = optuna.create_study(sampler=sampler)
    config = {**fixed.define_by_run(study.ask())}
    assert config["mu"] == "4" and config["epochs"] == "2"
    config = DPAF.make_config(fixed.settings_from_trial_config(
        {**study.trials[0].params, **config}), DIGITS)
    assert config.mu == 4 and config.epochs == 2
    assert space.with_fixed({}) is space
