"""The FID Inception-v3, as the field computes FID, IS and precision/recall.

The network is torch-fidelity's ``FeatureExtractorInceptionV3``: a port of the
TensorFlow graph ``pt_inception-2015-12-05`` that the original FID code (Heusel et
al. 2017) and the inception score code (Salimans et al. 2016) use, with
TensorFlow 1's bilinear resize to 299x299, so its features are the ones published
FIDs are computed on. It reads uint8 RGB images; :class:`InceptionFeatures` turns
our float images in [-1, 1] (1 or 3 channels) into that, and returns the 2048-d
pool3 features (FID, precision/recall) and the 1008 bias-free logits
(``logits_unbiased``, the IS's input in torch-fidelity and TensorFlow's code).

**Nothing is downloaded.** The weights come from a file the user names
(``--fid-weights PATH``) or from the torch hub cache where torch-fidelity (or
pytorch-fid) left them (:func:`cached_weights`). Without either, the evaluation
says so in one line (:func:`missing_weights_note`) and reports only the domain-CNN
figures. The file is read with ``torch.load(weights_only=True)`` first: a file
that is not a plain state dict of tensors is refused before torch-fidelity's own
(pickle-enabled) load sees it.

**Compatibility shim.** ``import torch_fidelity`` runs the package's
``__init__``, which imports its CLIP/VGG extractors and through them torchvision;
with a CPU build of torch and a CUDA build of torchvision (the only torchvision
wheels some machines have) that import fails (``operator torchvision::nms does not
exist``). The Inception module itself needs only torch. :func:`extractor_class`
imports the package normally and, only if that fails, loads
``torch_fidelity.feature_extractor_inceptionv3`` from the installed package's
directory without running its ``__init__`` (a bare package module standing in for
it during that import, removed afterwards), so a later ``import torch_fidelity``
behaves as before.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import sys
import types
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from raydp_synth.errors import ConfigError
from raydp_synth.evaluation.metrics import frechet_distance, precision_recall, split_inception_score

__all__ = [
    "INCEPTION_WEIGHTS_URL",
    "WEIGHTS_FILE_NAMES",
    "InceptionFeatures",
    "InceptionOutputs",
    "cached_weights",
    "extractor_class",
    "inception_figures",
    "load_without_package_init",
    "missing_weights_note",
    "resolve_weights",
    "to_uint8_rgb",
]

#: Where torch-fidelity downloads its weights from (we never do).
INCEPTION_WEIGHTS_URL = ("https://github.com/toshas/torch-fidelity/releases/download/v0.2.0/"
                         "weights-inception-2015-12-05-6726825d.pth")
#: Names under ``torch.hub.get_dir()/checkpoints`` that hold these weights:
#: torch-fidelity's download, then pytorch-fid's (the same conversion of the graph).
WEIGHTS_FILE_NAMES = ("weights-inception-2015-12-05-6726825d.pth",
                      "pt_inception-2015-12-05-6726825d.pth")
_MODULE = "torch_fidelity.feature_extractor_inceptionv3"
#: The features read: pool3 (FID, precision/recall) and the bias-free logits (IS).
_FEATURES = ["2048", "logits_unbiased"]


def cached_weights() -> Path | None:
    """The Inception weights in the torch hub cache (``$TORCH_HOME/hub/checkpoints``),
    where torch-fidelity or pytorch-fid would have downloaded them, if there."""
    folder = Path(torch.hub.get_dir()) / "checkpoints"
    return next((folder / name for name in WEIGHTS_FILE_NAMES if (folder / name).is_file()), None)


def resolve_weights(path: Path | str | None) -> Path | None:
    """The weights file to use: ``path`` if given (it must exist), else the hub cache's
    (None when there is none)."""
    if path is None:
        return cached_weights()
    path = Path(path).expanduser()
    if not path.is_file():
        raise ConfigError(f"--fid-weights {path} is not a file; give the Inception weights "
                          f"file ({WEIGHTS_FILE_NAMES[0]}, from {INCEPTION_WEIGHTS_URL})")
    return path


def missing_weights_note() -> str:
    """The one line an evaluation without Inception weights prints."""
    folder = Path(torch.hub.get_dir()) / "checkpoints"
    return (f"no Inception weights, so no fid_inception/is_inception/precision/recall "
            f"(only the domain-CNN fid_cnn/is_cnn): download {INCEPTION_WEIGHTS_URL} and pass "
            f"--fid-weights FILE or put it in {folder}/")


@contextmanager
def _package_without_init() -> Iterator[None]:
    """``torch_fidelity`` as a bare package module (its directory, no ``__init__``
    run) while the block imports submodules; the previous entry comes back after."""
    spec = importlib.util.find_spec("torch_fidelity")
    if spec is None or not spec.submodule_search_locations:
        raise ImportError("torch-fidelity is not installed; pip install 'torch-fidelity>=0.4,<0.5'")
    stub = types.ModuleType("torch_fidelity")
    stub.__path__ = list(spec.submodule_search_locations)
    stub.__spec__ = spec
    previous = sys.modules.get("torch_fidelity")
    sys.modules["torch_fidelity"] = stub
    try:
        yield
    finally:
        if previous is None:
            sys.modules.pop("torch_fidelity", None)
        else:
            sys.modules["torch_fidelity"] = previous


def load_without_package_init() -> types.ModuleType:
    """``torch_fidelity.feature_extractor_inceptionv3`` imported without running the
    package's ``__init__`` (the compatibility shim of the module docstring)."""
    with _package_without_init():
        return importlib.import_module(_MODULE)


def extractor_class() -> type:
    """torch-fidelity's ``FeatureExtractorInceptionV3``: through the package as usual,
    else through the compatibility shim (module docstring) when the package's
    ``__init__`` cannot be imported (a torchvision that does not match torch)."""
    try:
        from torch_fidelity.feature_extractor_inceptionv3 import FeatureExtractorInceptionV3

        return FeatureExtractorInceptionV3  # type: ignore[no-any-return]
    except (ImportError, RuntimeError, OSError):
        pass
    # A failed package import may have left the (complete) Inception module behind.
    module = sys.modules.get(_MODULE) or load_without_package_init()
    return module.FeatureExtractorInceptionV3  # type: ignore[no-any-return]


def to_uint8_rgb(images: np.ndarray | torch.Tensor) -> torch.Tensor:
    """Float images [N, C, H, W] in [-1, 1] (C = 1 or 3) as the uint8 RGB
    [N, 3, H, W] the Inception network reads: ``round((x + 1) * 127.5)``, clipped to
    0..255; one channel is repeated three times (a gray image in RGB)."""
    x = torch.as_tensor(images, dtype=torch.float32)
    if x.ndim != 4 or x.shape[1] not in (1, 3):
        raise ValueError(f"need images [N, 1 or 3, H, W], got shape {tuple(x.shape)}")
    x = ((x + 1) * 127.5).round().clamp(0, 255).to(torch.uint8)
    return x.expand(-1, 3, -1, -1) if x.shape[1] == 1 else x


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


@dataclass(frozen=True)
class InceptionOutputs:
    """Per-image outputs: ``pool3`` [N, 2048] and ``logits`` [N, 1008] (bias-free)."""

    pool3: np.ndarray
    logits: np.ndarray


class InceptionFeatures:
    """The FID Inception-v3 with weights from ``weights``, on ``device``.

    Raises:
        ConfigError: the file is not a state dict of tensors for this network.
    """

    def __init__(self, weights: Path | str, *, device: str = "cpu", batch_size: int = 64) -> None:
        self.weights = Path(weights)
        self.device = device
        self.batch_size = batch_size
        try:
            torch.load(self.weights, map_location="cpu", weights_only=True)
        except Exception as err:
            raise ConfigError(f"{self.weights} is not a weights file torch can read safely "
                              f"({type(err).__name__}); use {WEIGHTS_FILE_NAMES[0]}") from None
        cls = extractor_class()
        try:
            network = cls("inception-v3-compat", list(_FEATURES),
                          feature_extractor_weights_path=str(self.weights))
        except (RuntimeError, KeyError) as err:
            first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
            raise ConfigError(f"{self.weights} does not hold the FID Inception-v3 weights "
                              f"({first}); use {WEIGHTS_FILE_NAMES[0]}") from None
        self.network: Any = network.to(device)
        self.sha256 = _sha256(self.weights)

    def __call__(self, images: np.ndarray | torch.Tensor) -> InceptionOutputs:
        """Pool3 features and logits of float images [N, C, H, W] in [-1, 1]."""
        pool3, logits = [], []
        with torch.no_grad():
            for start in range(0, len(images), self.batch_size):
                batch = to_uint8_rgb(images[start:start + self.batch_size]).to(self.device)
                features, unbiased = self.network(batch)
                pool3.append(features.cpu().numpy())
                logits.append(unbiased.cpu().numpy())
        if not pool3:
            raise ValueError("no images to compute Inception features of")
        return InceptionOutputs(pool3=np.concatenate(pool3), logits=np.concatenate(logits))

    def describe(self) -> dict[str, Any]:
        """What evaluation.json records of the network."""
        from importlib.metadata import PackageNotFoundError, version

        try:
            library = f"torch-fidelity {version('torch-fidelity')}"
        except PackageNotFoundError:
            library = "torch-fidelity"
        return {"weights": str(self.weights), "sha256": self.sha256,
                "network": f"{library} FeatureExtractorInceptionV3 (pool3 2048-d for FID and "
                           "precision/recall; softmax of logits_unbiased for IS)"}


def inception_figures(synthetic: np.ndarray, real: np.ndarray,
                      network: InceptionFeatures) -> tuple[dict[str, float], dict[str, Any]]:
    """The field's figures of ``synthetic`` against ``real`` images (float, [-1, 1]).

    Returns:
        ``{"fid_inception", "is_inception", "precision", "recall"}`` and a record of
        how they were computed (network, weights file and sha256, sample counts, the
        IS of the real images for scale).
    """
    fake, true = network(synthetic), network(real)
    precision, recall = precision_recall(true.pool3, fake.pool3, k=3)
    figures = {"fid_inception": frechet_distance(fake.pool3, true.pool3),
               "is_inception": split_inception_score(fake.logits, splits=10),
               "precision": precision, "recall": recall}
    record = {**network.describe(), "synthetic_samples": len(synthetic),
              "real_samples": len(real), "is_splits": 10, "precision_recall_k": 3,
              "is_real_test": split_inception_score(true.logits, splits=10)}
    return figures, record
