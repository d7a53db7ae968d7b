"""Peer blame: the ranks that healthy ranks' timeouts name point at the hung node."""
from pathlib import Path

from engine import spatial
from engine.diagnose import diagnose
from engine.parse import parse_job
from engine.peers import named_hosts, named_ranks
from tests.helpers.jobs import make_job, training_lines, write_rank

NOTIFY = ("EI0002: [PID: 1326{r}] 2024-07-24-16:08:19.449.094 The wait execution of the Notify register "
          "times out. Reason: The Notify register has not received the Notify record from remote rank: "
          "[{peer}]. base information: [streamID:[14], taskID[14670], taskType[Notify Wait]]")


def test_named_ranks_reads_the_common_shapes() -> None:
    lines = [NOTIFY.format(r=1, peer=5), "recv from remote rank 5 failed", "Gloo: peer rank = 7 closed",
             "[rank3]: iteration 10 done", "rank 5 is fine"]
    assert named_ranks(lines) == {5: 2, 7: 1}


def _hang_job(root: Path) -> Path:
    """node-003 (ranks 6, 7) hangs and logs nothing more; the others time out naming rank 7."""
    job = make_job(root, nodes=5, ranks_per_node=2, fault_node=None, iterations=20)
    for rank in range(10):
        node = rank // 2
        lines = training_lines(rank, 15)
        if node != 3:
            lines += [NOTIFY.format(r=rank, peer=7)]
        write_rank(job / f"node-{node:03d}" / f"rank-{rank:04d}.log", lines)
    return job


def test_a_silent_hung_node_is_named_by_its_peers(tmp_path: Path, monkeypatch) -> None:
    job = _hang_job(tmp_path / "job-1")
    with_blame = {n.node: n.score for n in diagnose(job).nodes}
    assert max(with_blame, key=with_blame.__getitem__) == "node-003", with_blame
    monkeypatch.setitem(spatial.WEIGHTS, "blame", 0.0)
    without = {n.node: n.score for n in diagnose(job).nodes}
    assert with_blame["node-003"] - without.get("node-003", 0.0) >= 0.45  # the peers' word counts
    assert all(with_blame[n] == without[n] for n in without if n != "node-003")  # and nobody else's


def test_the_node_whose_launcher_killed_a_worker_that_ignored_sigterm_is_the_suspect(tmp_path: Path) -> None:
    # a stopped rank (SIGSTOP) logs nothing; every other rank times out; only its launcher says
    # that a worker would not stop
    job = tmp_path / "job-2"
    timeout = "[rank{r}]: RuntimeError: [pair.cc:553] Timed out waiting 8000ms for recv operation to complete"
    for rank in range(8):
        node = rank // 2
        lines = training_lines(rank, 10) + ([] if rank == 5 else [timeout.format(r=rank)])
        write_rank(job / f"node-{node:03d}" / f"rank-{rank:04d}.log", lines)
    for node in range(4):
        agent = ["W1201 08:00:02.100000 77 torch/distributed/elastic/multiprocessing/api.py:897] "
                 "Sending process 5679 closing signal SIGTERM"]
        if node == 2:
            agent.append("W1201 08:00:32.100000 77 torch/distributed/elastic/multiprocessing/api.py:1047] "
                         "Unable to shutdown process 2357 via 15, forcefully exiting via 9")
        write_rank(job / f"node-{node:03d}" / "agent.log", agent)
    d = diagnose(job)
    assert d.nodes[0].node == "node-002", [(n.node, n.score) for n in d.nodes]
    assert "Timed out waiting" in d.events[0].template


def test_a_host_the_launcher_cannot_reach_is_the_suspect(tmp_path: Path) -> None:
    """Open MPI's launcher on the first node says which host its ssh could not reach: that node (which,
    never started, logs nothing but its kernel's NIC reset) is the suspect, not the launcher's."""
    job = tmp_path / "job-3"
    for node in range(4):
        lines = training_lines(node, 3)
        if node == 0:
            lines += ["ssh: connect to host hpc-a100-188 port 22: Connection timed out",
                      "ORTE was unable to reliably start one or more daemons.",
                      "  Remote daemon: [[19351,0],3] on node hpc-a100-188"]
        write_rank(job / f"hpc-a100-{173 + 5 * node if node < 3 else 188}" / f"rank-{node:04d}.log", lines)
    d = diagnose(job)
    assert d.nodes[0].node == "hpc-a100-188", [(n.node, n.score) for n in d.nodes]


def test_named_hosts_reads_whole_names_of_other_nodes_only(tmp_path: Path) -> None:
    job = tmp_path / "job-4"
    names = ["algo-1", "algo-2", "algo-12", "0"]
    say = {"algo-1": ["Connection to algo-12 lost", "saved /ckpt/algo-2/x.pt failed",
                      "algo-1 failed itself", "host algo-10 is not in the job"]}
    for n in names:
        write_rank(job / n / "rank.log", say.get(n, ["fine 0"]))
    parsed = parse_job(job)
    ids = [i for i, t in enumerate(parsed.templates) if "algo-1" in t.nodes]
    assert named_hosts(parsed, ids) == {"algo-12": 1.0}  # not a path's part, not itself, not "0"
