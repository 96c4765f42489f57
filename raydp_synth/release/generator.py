"""A trained generator together with what sampling it needs (method, config, data).

Used to write the release, to score a run, and to evaluate a run directory from
its ``release/`` folder or from one of its checkpoints. Sampling draws latents from
a public seed: synthetic data is post-processing of the (DP) generator.
"""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from raydp_synth.config import config_to_dict
from raydp_synth.data import DataInfo
from raydp_synth.errors import ConfigError
from raydp_synth.methods import Method, get_method
from raydp_synth.release.layout import GENERATOR_CONFIG, GENERATOR_WEIGHTS, LEGACY_GENERATOR_WEIGHTS

__all__ = ["GENERATOR_CONFIG", "GENERATOR_WEIGHTS", "LEGACY_GENERATOR_WEIGHTS",
           "TrainedGenerator", "load_weights", "save_weights"]


def save_weights(state_dict: Mapping[str, torch.Tensor], path: Path) -> None:
    """Write a state dict as safetensors (each tensor copied: safetensors refuses
    tensors that share memory, and a state dict may hold tied weights)."""
    from safetensors.torch import save_file

    tensors = {key: value.detach().cpu().contiguous().clone()
               for key, value in state_dict.items()}
    save_file(tensors, str(path), metadata={"format": "pt"})


def load_weights(path: Path) -> dict[str, torch.Tensor]:
    """A state dict from ``generator.safetensors`` or a legacy ``generator.pt``."""
    if path.suffix == ".safetensors":
        from safetensors.torch import load_file

        return load_file(str(path), device="cpu")
    state = torch.load(path, map_location="cpu", weights_only=True)
    if not isinstance(state, Mapping):
        raise ConfigError(f"{path} does not hold a state dict; is it a generator's weights?")
    return dict(state)


@dataclass
class TrainedGenerator:
    """A method's generator with its config, ready to sample.

    Attributes:
        method: the registered method.
        config: the method's typed config.
        data: public facts of the data it was trained for.
        module: the generator network (eval mode, CPU).
        class_names: display names of the labels.
    """

    method: Method
    config: Any
    data: DataInfo
    module: torch.nn.Module
    class_names: tuple[str, ...]

    @classmethod
    def build(
        cls,
        *,
        method: str,
        config: Mapping[str, Any],
        data_info: Mapping[str, Any],
        class_names: list[str] | tuple[str, ...],
        state_dict: Mapping[str, torch.Tensor],
    ) -> TrainedGenerator:
        m = get_method(method)
        data = DataInfo(**data_info)
        typed = m.make_config(config, data)
        module = m.build_generator(typed, data)
        module.load_state_dict(state_dict)
        return cls(method=m, config=typed, data=data, module=module.cpu().eval(),
                   class_names=tuple(class_names))

    def descriptor(self) -> dict[str, Any]:
        """What ``generator.json`` records: the method, its config, the class names and
        ``data_info``. Public, but not free of the data: ``data_info.num_records`` is
        n, the training split's size, a declared public fact that the release states
        exactly (q = B/n; docs/privacy.md, "What the guarantee assumes public"); the
        image size, channels and class set are declarations, and nothing else
        depends on the sensitive records except through the DP-trained weights."""
        return {"method": self.method.name, "config": config_to_dict(self.config),
                "data_info": self.data.__dict__, "class_names": list(self.class_names)}

    @classmethod
    def from_release(cls, release_dir: str | os.PathLike[str]) -> TrainedGenerator:
        """Load a release folder: ``generator.json`` and ``generator.safetensors``
        (or, from a release written before safetensors, ``generator.pt``).

        Args:
            release_dir: the ``release/`` folder of a run or study (str or path).

        Raises:
            ConfigError: a file is missing or cannot be read.
        """
        release_dir = Path(release_dir).expanduser()
        spec_path = release_dir / GENERATOR_CONFIG
        weights = release_dir / GENERATOR_WEIGHTS
        if not weights.is_file() and (release_dir / LEGACY_GENERATOR_WEIGHTS).is_file():
            weights = release_dir / LEGACY_GENERATOR_WEIGHTS
        for path in (spec_path, weights):
            if not path.is_file():
                raise ConfigError(f"{path} is missing; is {release_dir} a release folder?")
        try:
            spec = json.loads(spec_path.read_text())
        except (OSError, ValueError) as exc:
            raise ConfigError(f"{spec_path} cannot be read as JSON ({exc}); restore it") from None
        return cls.build(**spec, state_dict=load_weights(weights))

    def with_state(self, state_dict: Mapping[str, torch.Tensor]) -> TrainedGenerator:
        """The same generator with other weights (e.g. a checkpoint's), on its device."""
        device = next(self.module.parameters()).device
        module = self.method.build_generator(self.config, self.data)
        module.load_state_dict(state_dict)
        return TrainedGenerator(method=self.method, config=self.config, data=self.data,
                                module=module.to(device).eval(), class_names=self.class_names)

    def on(self, device: str | torch.device) -> TrainedGenerator:
        """The same generator sampling on ``device`` (latents still drawn on the CPU
        from the public seed, so samples do not depend on the device's RNG)."""
        return dataclasses.replace(self, module=self.module.to(device))

    def sample(self, labels: torch.Tensor, *, seed: int, batch_size: int = 512) -> torch.Tensor:
        """Images in [-1, 1] for the given labels (latents from the public ``seed``),
        on the CPU whatever device the generator samples on."""
        gen = torch.Generator().manual_seed(seed)
        chunks = [self.method.sample(self.module, self.config, labels[i : i + batch_size],
                                     rng=gen).cpu()
                  for i in range(0, len(labels), batch_size)]
        if not chunks:
            return torch.zeros((0, self.data.channels, self.data.image_size, self.data.image_size))
        return torch.cat(chunks).clamp(-1, 1)

    def balanced(self, count: int, *, seed: int) -> tuple[np.ndarray, np.ndarray]:
        """``count`` synthetic images with labels cycling over the classes."""
        labels = torch.arange(count) % self.data.num_classes
        return self.sample(labels, seed=seed).numpy().astype(np.float32), labels.numpy()
