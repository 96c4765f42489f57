"""A relative --storage is refused on a Ray cluster of several live nodes (ray.nodes()
lists; no multi-node cluster needed)."""

from __future__ import annotations

from pathlib import Path

import pytest

from raydp_synth.errors import ConfigError
from raydp_synth.runtime.shared_storage import alive_nodes, require_shared_storage


def _nodes(*alive: bool) -> list[dict]:
    """Nodes as ``ray.nodes()`` describes them (the keys read here)."""
    return [{"NodeID": f"{i:056x}", "Alive": a, "NodeManagerAddress": f"10.0.0.{i}"}
            for i, a in enumerate(alive)]


def test_one_node_takes_any_storage() -> None:
    require_shared_storage(Path("studies"), _nodes(True))
    require_shared_storage("studies", _nodes(True, False, False))  # the dead ones don't count


@pytest.mark.parametrize("storage", ["/storage/studies", Path("/mnt/nfs/studies"), "~/studies"])
def test_an_absolute_path_is_the_users_choice_on_a_cluster(storage) -> None:
    require_shared_storage(storage, _nodes(True, True, True))


@pytest.mark.parametrize("storage", [Path("studies"), "./studies", "../shared/studies"])
def test_a_relative_path_on_several_nodes_is_one_line(storage) -> None:
    with pytest.raises(ConfigError) as err:
        require_shared_storage(storage, _nodes(True, True, False))
    message = str(err.value)
    assert message.startswith(f"--storage {storage} is relative, but the Ray cluster has 2 nodes")
    assert "--storage /storage/studies" in message and "\n" not in message


def test_alive_nodes() -> None:
    assert alive_nodes([]) == 0
    assert alive_nodes(_nodes(True, False, True)) == 2
    assert alive_nodes([{"NodeID": "x"}]) == 0  # a node without state is not counted alive
