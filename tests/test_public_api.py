"""``raydp_synth``'s public API (docs/api.md, "The API in one page"): every name of
``__all__`` resolves to the object its module defines, and only on first use."""

from __future__ import annotations

import importlib
import subprocess
import sys

import pytest

import raydp_synth


@pytest.mark.parametrize("name", raydp_synth.__all__)
def test_every_exported_name_resolves(name: str) -> None:
    value = getattr(raydp_synth, name)
    module = importlib.import_module(raydp_synth._EXPORTS[name])
    assert value is getattr(module, name)
    assert name in dir(raydp_synth)


def test_the_table_and_all_agree() -> None:
    assert sorted(raydp_synth.__all__) == sorted(raydp_synth._EXPORTS)
    assert raydp_synth.__version__


def test_an_unknown_name_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="no attribute 'run_everything'"):
        raydp_synth.run_everything  # noqa: B018


def test_star_import_and_first_use_load_the_modules() -> None:
    code = ("import sys; from raydp_synth import *; "
            "print(all(m in sys.modules for m in ('raydp_synth.train.driver', "
            "'raydp_synth.tune.study', 'raydp_synth.release.generator')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout
    assert out.strip() == "True"
