"""Evaluation: utility figures for the curator and the private selection score.

* :mod:`~raydp_synth.evaluation.classifiers`: the three CAS classifiers.
* :mod:`~raydp_synth.evaluation.inception`: the FID Inception-v3 (torch-fidelity),
  behind the field's ``fid_inception``, ``is_inception``, ``precision``, ``recall``.
* :mod:`~raydp_synth.evaluation.metrics`: FID, inception score, precision/recall.
* :mod:`~raydp_synth.evaluation.selection`: scoring a generator for selection (its
  release is the mechanism of :mod:`raydp_synth.privacy.selection_score`).
* :mod:`~raydp_synth.evaluation.report`: a run directory's ``evaluation.json`` and
  privacy-utility plot (``python -m raydp_synth.evaluate``).

Submodules are imported where used (training workers import only ``selection``).
"""
