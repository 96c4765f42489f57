"""Shared fixtures and the two test tiers.

* ``ray``: the test starts (or shares) a local Ray cluster. Every test that asks
  for the ``ray_local`` fixture must carry it; a test without it that starts Ray
  fails (:func:`_no_ray_outside_ray_tests`), so ``-m "not ray"`` provably needs
  no Ray cluster.
* ``slow``: the test takes more than a couple of seconds. Every ``ray`` and
  ``fault`` test is ``slow`` too, so the quick tier ``pytest -m "not slow"``
  needs no Ray cluster and runs in about a minute; CI runs everything.
"""

from __future__ import annotations

import os
import sys

import pytest

from raydp_synth.runtime.ray_session import RAY_SETTINGS

# The settings of every run and study (state tracking for the dashboard's Train page
# included) hold for the test session's cluster too.
for _name, _value in RAY_SETTINGS.items():
    os.environ.setdefault(_name, _value)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Refuse a ``ray_local`` test without the ``ray`` marker; make ``ray``/``fault`` tests slow."""
    unmarked = [item.nodeid for item in items
                if "ray_local" in getattr(item, "fixturenames", ())
                and item.get_closest_marker("ray") is None]
    if unmarked:
        raise pytest.UsageError("tests using the ray_local fixture must be marked "
                                f"@pytest.mark.ray: {', '.join(unmarked)}")
    for item in items:
        if item.get_closest_marker("ray") or item.get_closest_marker("fault"):
            item.add_marker(pytest.mark.slow)


def _ray_is_initialized() -> bool:
    ray = sys.modules.get("ray")
    return ray is not None and ray.is_initialized()


@pytest.fixture(autouse=True)
def _no_ray_outside_ray_tests(request: pytest.FixtureRequest):
    """Fail a test not marked ``ray`` that calls ``ray.init`` or leaves Ray running.

    ``ray.init`` (which Ray's auto-init goes through too) raises inside such a test,
    and the test fails afterwards even if the code under test caught that error.
    """
    if request.node.get_closest_marker("ray") is not None:
        yield
        return
    message = f"{request.node.nodeid} starts Ray but is not marked @pytest.mark.ray"
    refused: list[str] = []
    was_initialized = _ray_is_initialized()
    ray = sys.modules.get("ray")
    if ray is None:
        yield
    else:
        def refuse(*args, **kwargs):
            refused.append(message)
            raise AssertionError(message)

        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(ray, "init", refuse)
            yield
    if not was_initialized and _ray_is_initialized():
        sys.modules["ray"].shutdown()
        refused.append(message)
    if refused:
        pytest.fail(message)


@pytest.fixture(scope="session", autouse=True)
def _empty_torch_hub(tmp_path_factory: pytest.TempPathFactory):
    """No test sees the user's torch hub cache: evaluations find no Inception weights
    unless a test names a file (tests/evaluation/inception_helpers.py)."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("TORCH_HOME", str(tmp_path_factory.mktemp("torch_home")))
        yield


@pytest.fixture(scope="session")
def ray_local():
    """One real local Ray cluster (2 CPUs) shared by the Ray tests of a session."""
    import ray

    if not ray.is_initialized():
        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield ray
    ray.shutdown()
