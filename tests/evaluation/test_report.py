"""Evaluating a run directory: outputs, CLI, and no reads of the sensitive splits."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image

from raydp_synth.cli import run_cli
from raydp_synth.config import config_to_dict
from raydp_synth.data import DataInfo, DatasetSplits, ImageDataset, load_dataset, parse_dataset_spec
from raydp_synth.errors import ConfigError
from raydp_synth.evaluate import main as evaluate_main
from raydp_synth.evaluation.inception import missing_weights_note
from raydp_synth.evaluation.report import (
    EVALUATION_FILE,
    PLOT_FILE,
    EvaluationSettings,
    evaluate_run,
    format_table,
)
from raydp_synth.methods import get_method
from raydp_synth.release import TrainedGenerator, privacy_statement, write_release

INFO = DataInfo(num_records=1442, image_size=16, channels=1, num_classes=10)
FAST = EvaluationSettings(num_synthetic=200, curve_synthetic=100, classifiers=("logreg",),
                          feature_steps=30)


class SealedSplit(ImageDataset):
    """A split whose records may not be read: any access to them fails the test."""

    def __post_init__(self) -> None:
        super().__post_init__()
        object.__setattr__(self, "_shape", super().image_shape)
        object.__setattr__(self, "_sealed", True)

    def __getattribute__(self, name: str):
        if name in ("images", "labels") and object.__getattribute__(self, "__dict__").get("_sealed"):
            raise AssertionError(f"evaluation read the sensitive split's {name}")
        return super().__getattribute__(name)

    @property
    def image_shape(self) -> tuple[int, int, int]:
        return object.__getattribute__(self, "_shape")

    def __len__(self) -> int:
        raise AssertionError("evaluation read the sensitive split's size")


def _sealed(split: ImageDataset) -> SealedSplit:
    return SealedSplit(images=split.images, labels=split.labels, num_classes=split.num_classes,
                       name=split.name)


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory) -> Path:
    """A run directory as the driver writes it, from an untrained DPAF generator
    and two checkpoints (no Ray needed: evaluation only reads files)."""
    out = tmp_path_factory.mktemp("eval") / "run"
    method = get_method("dpaf")
    config = method.make_config({}, INFO)
    plan = method.plan(config.__class__(**{**config.__dict__, "epochs": 5.0}), target_epsilon=5.0,
                       delta=1e-5, data=INFO, score_share=0.05)
    torch.manual_seed(0)
    module = method.build_generator(config, INFO)
    generator = TrainedGenerator.build(method="dpaf", config=config_to_dict(config),
                                       data_info=INFO.__dict__, class_names=[str(i) for i in range(10)],
                                       state_dict=module.state_dict())
    out.mkdir(parents=True)
    (out / "run.json").write_text(json.dumps({"method": "dpaf", "dataset": "digits", "seed": 0}))
    (out / "score.json").write_text(json.dumps({"value": 0.1, "private": True, "noise_std": 0.03,
                                                "num_records": 165, "classifier": "logreg"}))
    write_release(out / "release", generator=generator,
                  statement=privacy_statement(plan, scope="test", dataset="digits"),
                  num_synthetic=100, seed=0)
    for step, eps in [(10, 2.0), (20, 4.9)]:
        ckpt = out / "ray" / "train" / f"checkpoint_{step}"
        ckpt.mkdir(parents=True)
        torch.save({"generator": module.state_dict()}, ckpt / "state.pt")
        (ckpt / "metrics.json").write_text(json.dumps(
            [{"phase": 2, "epoch": step // 10, "step": step, "epsilon_spent": eps}]))
    return out


@pytest.mark.slow
def test_evaluation_reads_only_the_test_split(run_dir) -> None:
    real = load_dataset("digits", image_size=16)
    splits = DatasetSplits(train=_sealed(real.train), val=_sealed(real.val), test=real.test,
                           class_names=real.class_names)
    result = evaluate_run(run_dir, splits=splits, settings=FAST)
    assert set(result["final"]) == {"cas_logreg", "fid_cnn", "is_cnn", "precision_cnn", "recall_cnn", "diversity_cnn"}
    assert result["inception"]["available"] is False
    assert [p["step"] for p in result["curve"]] == [10, 20]
    assert [p["epsilon_spent"] for p in result["curve"]] == [2.0, 4.9]
    # Both checkpoints hold the released weights: the last is the released point.
    assert [p["released"] for p in result["curve"]] == [False, True]
    assert result["num_classes"] == 10
    assert result["reference"]["feature_network_trained_on"] == "test split"
    # Its accuracy is measured on the test images held out of its training.
    held = len(real.test) - result["reference"]["feature_network_training_records"]
    assert 0 < held < len(real.test) / 3
    assert result["reference"]["feature_network_accuracy_on"].startswith(f"{held} test images held out")


def test_sealed_split_really_guards() -> None:
    real = load_dataset("digits", image_size=16)
    sealed = _sealed(real.train)
    with pytest.raises(AssertionError, match="sensitive"):
        _ = sealed.images
    assert sealed.image_shape == (1, 16, 16)


@pytest.mark.slow
def test_evaluate_cli_prints_the_table_and_writes_json_and_plot(run_dir, capsys,
                                                               monkeypatch) -> None:
    # The CLI's two CNNs (CAS and the domain CNN of FID/IS) at FAST's 30 steps, not the
    # product's 400 (a minute or more each on a contended CI core): every figure is
    # still computed and printed, which is what this checks.
    from raydp_synth.evaluation import classifiers, report

    feature_network = report.feature_network
    monkeypatch.setattr(report, "feature_network", lambda reference, *, seed, steps, **kw:
                        feature_network(reference, seed=seed, steps=FAST.feature_steps, **kw))
    monkeypatch.setitem(classifiers.fit_classifier.__kwdefaults__, "cnn_steps",
                        FAST.feature_steps)
    monkeypatch.setitem(classifiers.CLASSIFIER_STEPS, "cnn", FAST.feature_steps)
    assert evaluate_main([str(run_dir), "--num-synthetic", "200", "--curve-synthetic", "100"]) == 0
    printed = capsys.readouterr().out
    for needle in ("cas_logreg", "cas_mlp", "cas_cnn", "fid_cnn", "is_cnn", "epsilon="):
        assert needle in printed
    # No terminal (pytest's capture): no bar, one progress line per step instead.
    steps = [line for line in printed.splitlines() if line.startswith("[raydp_synth] evaluation ")]
    assert [line.split(":")[0] for line in steps] == [
        f"[raydp_synth] evaluation {i}/4" for i in range(1, 5)]
    # No Inception weights (the tests' torch hub cache is empty): one line says so.
    assert [line for line in printed.splitlines() if "--fid-weights" in line] == [
        "  note: " + missing_weights_note()]
    result = json.loads((run_dir / EVALUATION_FILE).read_text())
    assert set(result["final"]) == {"cas_logreg", "cas_mlp", "cas_cnn", "fid_cnn", "is_cnn",
                                    "precision_cnn", "recall_cnn", "diversity_cnn"}
    assert result["inception"] == {"available": False, "reason": missing_weights_note()}
    assert all(np.isfinite(v) for v in result["final"].values())
    assert 1.0 <= result["final"]["is_cnn"] <= 10.0
    assert result["selection_score"]["private"] is True
    plot = Image.open(run_dir / PLOT_FILE)
    assert plot.width > 600 and plot.height > 200
    # curator-only outputs stay out of the release folder
    assert not (run_dir / "release" / EVALUATION_FILE).exists()


def test_evaluate_cli_on_a_non_run_directory_is_one_clear_line(tmp_path, capsys) -> None:
    with pytest.raises(SystemExit) as exit_info:
        run_cli(evaluate_main, [str(tmp_path)])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: ") and "run.json" in err and "\n" not in err


@pytest.mark.slow
def test_a_public_reference_network_puts_the_is_curve_in_the_release(run_dir, tmp_path) -> None:
    """Schwabedal et al. 2020's privacy-utility curve (IS against epsilon) is publishable when the IS
    network is trained on public data only: it goes into release/, CAS/FID do not."""
    from raydp_synth.evaluation.report import PUBLIC_CURVE_JSON, PUBLIC_CURVE_PLOT
    from tests.data.helpers import write_png

    rng = np.random.default_rng(0)
    for i in range(40):
        write_png(tmp_path / "pub" / f"c{i % 10}" / f"{i:02d}.png",
                  rng.integers(0, 256, (8, 8), dtype=np.uint8))
    result = evaluate_run(run_dir, public_reference=parse_dataset_spec(f"folder:{tmp_path / 'pub'}"), settings=FAST)
    assert result["reference"]["feature_network_trained_on"].endswith("(public)")
    curve = json.loads((run_dir / "release" / PUBLIC_CURVE_JSON).read_text())
    assert [p["epsilon_spent"] for p in curve["points"]] == [2.0, 4.9]
    assert set(curve["points"][0]) == {"epsilon_spent", "epoch", "is_cnn"}
    assert Image.open(run_dir / "release" / PUBLIC_CURVE_PLOT).width > 300
    for name in (PUBLIC_CURVE_JSON, PUBLIC_CURVE_PLOT):
        (run_dir / "release" / name).unlink()  # the module's other tests see a plain release


def test_evaluation_sample_counts_follow_the_method_unless_given() -> None:
    from raydp_synth.evaluation.report import default_settings

    assert (default_settings("dpaf").num_synthetic, default_settings("dpaf").curve_synthetic) \
        == (10_000, 2_000)
    slow = default_settings("privimage-d")  # 50-step DDIM sampling
    assert (slow.num_synthetic, slow.curve_synthetic) == (2_000, 500)
    given = default_settings("privimage-d", num_synthetic=300, curve_synthetic=None, seed=4)
    assert (given.num_synthetic, given.curve_synthetic, given.seed) == (300, 500, 4)


@pytest.mark.slow
def test_curve_checkpoints_are_spread_and_keep_the_last(run_dir) -> None:
    from raydp_synth.evaluation.report import spread_checkpoints

    items = list(range(10))
    assert spread_checkpoints(items, None) == items
    assert spread_checkpoints(items, 3) == [3, 6, 9]
    assert spread_checkpoints(items, 1) == [9]
    assert spread_checkpoints(items, 0) == []
    assert spread_checkpoints(items, 20) == items
    result = evaluate_run(run_dir, settings=dataclasses.replace(FAST, curve_checkpoints=1))
    assert [p["step"] for p in result["curve"]] == [20]
    assert result["settings"]["device"] == "cpu" and result["settings"]["curve_checkpoints"] == 1


@pytest.mark.slow
def test_the_inception_figures_come_with_weights(run_dir, tmp_path) -> None:
    """With a weights file (here a random Inception), evaluation.json carries the
    field's figures beside the domain-CNN ones, and records how they were made."""
    from tests.evaluation.inception_helpers import small_inputs, write_random_inception_weights

    weights = write_random_inception_weights(tmp_path / "inception.pth")
    settings = dataclasses.replace(FAST, fid_weights=weights, inception_samples=20,
                                   curve_checkpoints=0)
    with small_inputs():
        result = evaluate_run(run_dir, settings=settings)
    assert set(result["final"]) == {"cas_logreg", "fid_cnn", "is_cnn", "fid_inception",
                                    "is_inception", "precision", "recall", "precision_cnn", "recall_cnn", "diversity_cnn"}
    assert all(np.isfinite(v) for v in result["final"].values())
    assert 0 <= result["final"]["precision"] <= 1 and 0 <= result["final"]["recall"] <= 1
    record = result["inception"]
    assert record["available"] is True and record["weights"] == str(weights)
    assert len(record["sha256"]) == 64
    # 20 synthetic images against 20 of the 190 test images
    assert (record["synthetic_samples"], record["real_samples"]) == (20, 20)
    table = format_table(result)
    assert "fid_inception" in table and "20 synthetic vs 20 test images" in table
    assert "note:" not in table
    assert json.loads((run_dir / EVALUATION_FILE).read_text())["inception"] == record


def test_missing_named_weights_are_refused_up_front(tmp_path, capsys) -> None:
    with pytest.raises(ConfigError, match="--fid-weights .*nope.pth is not a file"):
        EvaluationSettings(fid_weights=tmp_path / "nope.pth")
    with pytest.raises(ConfigError, match="at least 20"):
        EvaluationSettings(inception_samples=5)
    with pytest.raises(SystemExit) as exit_info:
        run_cli(evaluate_main, [str(tmp_path), "--fid-weights", str(tmp_path / "nope.pth")])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: --fid-weights") and "\n" not in err


def test_the_held_out_part_is_a_fifth_of_each_class_and_disjoint() -> None:
    from raydp_synth.evaluation.report import held_out_split

    test = load_dataset("digits", image_size=8).test
    train_part, held = held_out_split(test, seed=3)
    assert len(train_part) + len(held) == len(test)
    for label in np.unique(test.labels):
        count = int((test.labels == label).sum())
        assert int((held.labels == label).sum()) == min(count - 1, max(1, round(0.2 * count)))
    # Disjoint: no held-out image is among the training part's (as rows of pixels).
    seen = {row.tobytes() for row in train_part.images}
    duplicates = sum(row.tobytes() in seen for row in held.images)
    dupes_in_test = len(test) - len({row.tobytes() for row in test.images})
    assert duplicates <= dupes_in_test  # only images the test split itself repeats
    again, held_again = held_out_split(test, seed=3)
    assert np.array_equal(held.labels, held_again.labels)
    assert np.array_equal(held.images, held_again.images)
