"""``--download``: fetch the named datasets a command declares.

Only on request: nothing downloads by default (our machines and CI have no
network). The training dataset, ``--public``, ``--public-validation`` and
``--tune-on-public`` (a request's parsed specs) are looked at; each named dataset
among them is fetched into its folder
(:func:`raydp_synth.data.named.download_named`: official files, MD5 verified,
written atomically).
"""

from __future__ import annotations

from collections.abc import Iterable

from raydp_synth.data.named import download_named
from raydp_synth.data.spec import NAMED_KINDS, DatasetSpec
from raydp_synth.errors import DataError

__all__ = ["download_declared"]


def download_declared(declarations: Iterable[DatasetSpec | None]) -> list[str]:
    """Fetch the files of every named dataset among ``declarations`` (parsed dataset
    specs; ``None`` entries are skipped).

    Returns:
        The absolute specs fetched.

    Raises:
        DataError: None of them is a named dataset, or a download failed.
    """
    given = [declared for declared in declarations if declared is not None]
    fetched: list[str] = []
    for declared in given:
        spec = declared.absolute()
        if spec.kind in NAMED_KINDS and str(spec) not in fetched:
            download_named(spec.kind, spec.data_dir)
            fetched.append(str(spec))
    if not fetched:
        raise DataError(f"--download fetches the named datasets ({', '.join(NAMED_KINDS)}); "
                        f"{', '.join(map(str, given))} names none of them, drop --download")
    return fetched
