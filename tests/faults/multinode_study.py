"""A study on a simulated 4-node Ray cluster, with a worker node preempted mid-trial.

Run as ``python -m tests.faults.multinode_study OUT_DIR`` (its own process: a test
session's local Ray cannot be swapped for another cluster). Starts a head and two
worker nodes of one CPU each plus a spare (``ray.cluster_utils.Cluster``), so a
trial's two Ray Train workers of one CPU each must run on two nodes; runs a 2-trial
DPAF study; while the first trial trains, preempts a worker node that hosts one of
its workers: drained with the preemption reason, as a spot reclaim or a deleted
Kubernetes pod is, then removed (no graceful shutdown). Ray Train and Tune would
retry a preempted worker's run on their own (the spare node has room); the trial
must fail instead, its grant kept (raydp_synth/train/pipeline.py: no_retries). The
second trial then runs on the nodes left.
Writes what it saw to ``OUT_DIR/observed.json`` for the test to check.

The cluster's health checks are tightened (every 0.5 s, dead after 3 misses) so the
dead node is noticed in about a second rather than Ray's 15: what the test checks
(the grant kept, no rerun, the statement) does not depend on how fast.
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from pathlib import Path

from tests.faults.test_study_faults import longer_tiny, reported_an_epoch, train_workers

#: GCS health checks of the simulated nodes: a killed node is declared dead after 3
#: missed checks 0.5 s apart (1.1 s measured; Ray's defaults: every 3 s, 5 misses).
HEALTH_CHECKS = {"health_check_period_ms": 500, "health_check_failure_threshold": 3}


#: How long a drained node lives on before it is killed (a spot reclaim's notice,
#: shortened): Ray marks its actors' deaths as preemptions once the deadline passed.
RECLAIM_NOTICE_S = 0.3


def drain_for_preemption(address: str, node_id: str) -> None:
    """What a spot reclaim or a deleted Kubernetes pod does first (Ray's SIGTERM
    handler of ``ray start --block``): the node is drained with the preemption reason
    and a deadline, after which its actors' deaths say ``preempted``. Returns once the
    deadline passed."""
    import ray
    from ray.core.generated import autoscaler_pb2

    gcs = ray._raylet.GcsClient(address=address)
    deadline_ms = int(time.time() * 1000 + RECLAIM_NOTICE_S * 1000)
    accepted, why = gcs.drain_node(
        node_id, autoscaler_pb2.DrainNodeReason.Value("DRAIN_NODE_REASON_PREEMPTION"),
        "a spot reclaim (test)", deadline_ms)
    assert accepted, why
    time.sleep(2 * RECLAIM_NOTICE_S)


def main(out: Path) -> int:
    import ray
    from ray.cluster_utils import Cluster

    from raydp_synth.accountant.ledger import Ledger
    from raydp_synth.tune.study import StudyRequest, run_study

    cluster = Cluster(initialize_head=True, head_node_args={
        "num_cpus": 1, "_system_config": HEALTH_CHECKS})
    # Two worker nodes and a spare: after one is killed, a 2-worker trial still fits
    # (what an autoscaler's replacement would do; Cluster.add_node cannot run in the
    # monitor thread).
    workers = [cluster.add_node(num_cpus=1) for _ in range(3)]
    cluster.wait_for_nodes()
    os.environ["RAY_ADDRESS"] = cluster.address
    study = out / "multinode"
    observed: dict = {"head": cluster.head_node.node_id, "pairs": [], "killed": None}

    def monitor() -> None:
        seen_pairs: set[frozenset] = set()
        deadline = time.monotonic() + 900
        while time.monotonic() < deadline and not finished.is_set():
            time.sleep(0.25)  # each poll lists every actor (GCS)
            if not ray.is_initialized():
                continue
            alive = {aid: info for aid, info in train_workers().items()
                     if info["State"] == "ALIVE"}
            if len(alive) != 2:
                continue
            nodes = [info["Address"]["NodeID"] for info in alive.values()]
            if frozenset(alive) not in seen_pairs:
                seen_pairs.add(frozenset(alive))
                observed["pairs"].append(nodes)
                log.write(f"{time.time():.1f} train workers on {nodes}\n")
            if observed["killed"] is not None:
                continue  # the next trial's pair is recorded above
            grants = [e for e in Ledger(study / "ledger.jsonl").entries() if e["kind"] == "grant"]
            # The first trial is mid-training (its first epoch is reported): kill a
            # node that runs one of its workers.
            if len(grants) == 1 and reported_an_epoch(study, grants[0]["trial_id"]):
                victim = next(n for n in workers if n.node_id in nodes)
                log.write(f"{time.time():.1f} draining {victim.node_id} for preemption\n")
                drain_for_preemption(cluster.address, victim.node_id)
                log.write(f"{time.time():.1f} removing {victim.node_id}\n")
                cluster.remove_node(victim, allow_graceful=False)
                log.write(f"{time.time():.1f} removed\n")
                observed["killed"] = {"node": victim.node_id, "trial": grants[0]["trial_id"]}

    log = (out / "monitor.log").open("a", buffering=1)

    def logged_monitor() -> None:
        try:
            monitor()
        except BaseException as exc:  # noqa: BLE001 - recorded for the test to show
            observed["monitor_error"] = repr(exc)
            log.write(f"monitor failed: {exc!r}\n")
            raise

    finished = threading.Event()
    thread = threading.Thread(target=logged_monitor, daemon=True)
    thread.start()
    try:
        result = run_study(StudyRequest(
            method="dpaf", epsilon=6.0, delta=1e-5, trials=2, workers_per_trial=2,
            search_space=longer_tiny(out), storage=out, name="multinode", evaluate=False,
            synthetic_samples=20,
        ))
        observed["finished"] = [t["trial"] for t in result.trials]
        observed["best"] = result.best_trial
        observed["statement_epsilon"] = result.statement["epsilon"]
    finally:
        finished.set()
        thread.join(timeout=5)
        observed["grants"] = [e for e in Ledger(study / "ledger.jsonl").entries()
                              if e["kind"] == "grant"]
        (out / "observed.json").write_text(json.dumps(observed, indent=2))
        ray.shutdown()
        cluster.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1])))
