"""The grader service as a process: auth, path rules, limits, journal, queue, resume.

Evaluation runs through the service's real child-process machinery, with a stand-in evaluator
(`fake_evaluator.py`) so these tests exercise the plumbing in seconds; the real grader on a real
model is covered in test_grader_real.py.
"""

from __future__ import annotations

import json
import os
import signal
import threading
import time
from pathlib import Path

import pytest
from service_helpers import make_model

from a2c.contracts.events import read_events, verify_events
from a2c.runtime.grader_service import GraderClientError as ServiceError
from a2c.runtime.grader_service import ServiceClient, read_journal
from a2c.runtime.grader_service import start_grader_service as start_service


def wait_for(predicate, timeout=30.0, poll=0.05):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(poll)
    raise AssertionError("condition not reached in time")


def out(run: Path) -> Path:
    return run / "workspace" / "output"


def refused(call) -> ServiceError:
    with pytest.raises(ServiceError) as info:
        call()
    return info.value


# ------------------------------------------------------------------------------------- auth
def test_health_needs_no_token_everything_else_does(service):
    handle, run = service()
    anonymous = ServiceClient(handle.url, None)
    assert anonymous.health()
    for call in (anonymous.list, anonymous.time, lambda: anonymous.status(1),
                 lambda: anonymous.submit("/workspace/output/x")):
        err = refused(call)
        assert err.status == 401 and err.code == "unauthorized"
    wrong = ServiceClient(handle.url, handle.token[:-1] + ("0" if handle.token[-1] != "0" else "1"))
    err = refused(wrong.time)
    assert err.status == 401 and "token" in err.body["message"]
    # Not "Bearer": refused even with the right token.
    status, body = ServiceClient(handle.url, None).request(
        "GET", "/time", raise_for_status=False)
    assert status == 401
    assert handle.client().time()["submissions_left"] == 50
    assert read_journal(run) == []


def test_wrong_scheme_refused(service):
    import http.client

    handle, _ = service()
    conn = http.client.HTTPConnection("127.0.0.1", handle.ready.port, timeout=10)
    conn.request("GET", "/time", headers={"Authorization": f"Basic {handle.token}"})
    assert conn.getresponse().status == 401
    conn.close()


# ------------------------------------------------------------------------------------- paths
def test_path_escapes_are_refused(service, tmp_path):
    handle, run = service()
    client = handle.client()
    make_model(out(run) / "good")
    outside = make_model(tmp_path / "elsewhere")
    make_model(run / "workspace" / "not-output")
    (out(run) / "link-out").symlink_to(outside, target_is_directory=True)
    inner = make_model(out(run) / "sneaky")
    (inner / "extra.safetensors").symlink_to(outside / "model.safetensors")
    cases = {
        "/workspace/output/../not-output": "path_escape",
        "output/../not-output": "path_escape",
        "/workspace/output/good/../../not-output": "path_escape",
        str(outside): "path_escape",
        "/etc": "path_escape",
        "not-output": "path_escape",
        "/workspace/output/link-out": "path_escape",
        "/workspace/output/sneaky": "path_escape",
        "/workspace/output/missing": "bad_request",
    }
    for path, code in cases.items():
        err = refused(lambda p=path: client.submit(p))
        assert err.status == 400 and err.code == code, (path, err.body)
        assert err.body["limit"] == "/workspace/output"
        assert err.body["message"]
    assert read_journal(run) == []  # nothing refused was journaled or counted
    assert client.time()["submissions_left"] == 50
    # The legitimate forms: agent path, relative to the workspace, relative to output/, host path.
    for path in ("/workspace/output/good", "output/good", "good", str(out(run) / "good")):
        res = client.submit(path)
        assert res["status"] == "queued"
    subs = client.list()["submissions"]
    assert {s["model_path"] for s in subs} == {"/workspace/output/good", str(out(run) / "good")}


def test_symlink_inside_output_is_fine(service):
    handle, run = service()
    target = make_model(out(run) / "real")
    (out(run) / "alias").symlink_to(target, target_is_directory=True)
    assert handle.client().submit("/workspace/output/alias")["id"] == 1


# ------------------------------------------------------------------------------------- requests
def test_bad_json_and_missing_field(service):
    import http.client

    handle, _ = service()
    headers = {"Authorization": f"Bearer {handle.token}", "Content-Type": "application/json"}
    conn = http.client.HTTPConnection("127.0.0.1", handle.ready.port, timeout=10)
    conn.request("POST", "/submit", body=b"{not json", headers=headers)
    resp = conn.getresponse()
    body = json.loads(resp.read())
    assert resp.status == 400 and body["error"] == "bad_request" and "JSON" in body["message"]
    # The connection stays usable after a refusal (keep-alive).
    conn.request("POST", "/submit", body=b'{"note": "x"}', headers=headers)
    resp = conn.getresponse()
    body = json.loads(resp.read())
    assert resp.status == 400 and body["error"] == "bad_request"
    assert "model_path" in body["message"] and "limit" in body
    conn.request("POST", "/submit", body=b'[1, 2]', headers=headers)
    resp = conn.getresponse()
    assert resp.status == 400 and json.loads(resp.read())["error"] == "bad_request"
    conn.request("GET", "/nope", headers=headers)
    resp = conn.getresponse()
    assert resp.status == 404 and json.loads(resp.read())["error"] == "not_found"
    conn.close()
    err = refused(lambda: handle.client().status(99))
    assert err.status == 404 and err.code == "not_found"


# ------------------------------------------------------------------------------------- limits
def test_submission_limit(service):
    handle, run = service(max_submissions=2)
    client = handle.client()
    make_model(out(run) / "m")
    client.submit("output/m")
    assert client.submit("output/m")["submissions_left"] == 0
    err = refused(lambda: client.submit("output/m"))
    assert err.status == 429 and err.code == "submission_limit" and err.body["limit"] == 2
    assert "2" in err.body["message"]
    assert len([e for e in read_journal(run) if e["op"] == "received"]) == 2


def test_min_interval(service):
    handle, run = service(min_interval_s=30)
    client = handle.client()
    make_model(out(run) / "m")
    client.submit("output/m")
    err = refused(lambda: client.submit("output/m"))
    assert err.status == 409 and err.code == "too_soon" and err.body["limit"] == 30
    assert 0 < err.body["retry_after_s"] <= 30
    assert client.time()["next_submission_in_s"] > 0


def test_deadline(service):
    handle, run = service(deadline_unix=time.time() - 5)
    client = handle.client()
    make_model(out(run) / "m")
    err = refused(lambda: client.submit("output/m"))
    assert err.status == 410 and err.code == "deadline_passed"
    assert err.body["limit"] == pytest.approx(json.loads(
        (run / "grader" / "service.json").read_text())["deadline_unix"])
    t = client.time()
    assert t["remaining_s"] == 0 and t["deadline"] == err.body["limit"]


def test_time_endpoint(service):
    handle, run = service(max_submissions=7)
    t = handle.client().time()
    assert set(t) >= {"deadline", "remaining_s", "submissions_left"}
    assert 3500 < t["remaining_s"] <= 3600 and t["submissions_left"] == 7


# ------------------------------------------------------------------------------------- queue
def test_concurrent_submissions_all_journaled_and_answered(service):
    handle, run = service()
    client = handle.client()
    for i in range(20):
        make_model(out(run) / f"m{i}", content=f"weights {i}", SCORE=i)
    results, errors = {}, []

    def go(i):
        try:
            results[i] = ServiceClient(handle.unix_url if i % 2 else handle.url,
                                       handle.token).submit(f"/workspace/output/m{i}", note=str(i))
        except Exception as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=go, args=(i,)) for i in range(20)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not errors
    assert sorted(r["id"] for r in results.values()) == list(range(1, 21))
    received = [e for e in read_journal(run) if e["op"] == "received"]
    assert sorted(e["id"] for e in received) == list(range(1, 21))
    assert handle.wait_idle(120)
    subs = client.list()["submissions"]
    assert len(subs) == 20 and all(s["status"] == "scored" for s in subs)
    for s in subs:  # each answer belongs to its own model
        assert s["score"] == float(s["note"])
    assert client.list()["best"]["score"] == 19.0
    check = verify_events(run / "events.jsonl")
    assert check.ok, check
    types = [e["type"] for e in read_events(run / "events.jsonl")]
    assert types.count("submission_received") == 20 and types.count("submission_scored") == 20


def test_status_fields_and_no_heldout_leak(service):
    handle, run = service()
    client = handle.client()
    make_model(out(run) / "m", SCORE=42)
    sid = client.submit("output/m", note="first")["id"]
    assert handle.wait_idle(30)
    sub = client.status(sid)
    assert sub["status"] == "scored" and sub["score"] == 42.0 and sub["ci95"] == [32.0, 52.0]
    assert sub["note"] == "first" and sub["valid"] is True and sub["duplicate_of"] is None
    assert sub["metrics"] == {"accuracy": 0.42}
    # Full results (with held-out items) stay grader-side.
    blob = json.dumps([client.list(), sub, client.time()])
    assert "SECRET-HELDOUT" not in blob and "host_path" not in blob
    full = json.loads((run / "results" / f"{sid}.json").read_text())
    assert full["items"][0]["prompt"] == "SECRET-HELDOUT" and full["submission_id"] == sid
    scored = [e for e in read_journal(run) if e["op"] == "scored"]
    assert scored[0]["result"] == f"results/{sid}.json" and scored[0]["score"] == 42.0


def test_duplicate_weights_scored_once(service, tmp_path):
    log = tmp_path / "evals.log"
    handle, run = service()
    handle.stop(10)
    handle = start_service(run, env={**os.environ, "FAKE_EVAL_LOG": str(log)})
    try:
        client = handle.client()
        make_model(out(run) / "a", content="same", SCORE=61)
        make_model(out(run) / "b", content="same", SCORE=61)   # same bytes, another folder
        make_model(out(run) / "c", content="different", SCORE=10)
        ids = [client.submit(p)["id"] for p in ("output/a", "output/b", "output/a", "output/c")]
        assert handle.wait_idle(60)
        subs = {s["id"]: s for s in client.list()["submissions"]}
        assert subs[ids[1]]["duplicate_of"] == ids[0] and subs[ids[2]]["duplicate_of"] == ids[0]
        assert subs[ids[1]]["score"] == subs[ids[0]]["score"] == 61.0
        assert subs[ids[3]]["duplicate_of"] is None and subs[ids[3]]["score"] == 10.0
        assert len(log.read_text().splitlines()) == 2   # a and c only
        dup = json.loads((run / "results" / f"{ids[1]}.json").read_text())
        assert dup["duplicate_of"] == ids[0] and dup["score"] == 61.0
        scored = [e for e in read_events(run / "events.jsonl") if e["type"] == "submission_scored"]
        assert [e["data"]["duplicate_of"] for e in scored] == [None, ids[0], ids[0], None]
    finally:
        handle.kill()


def test_failing_model_is_invalid_and_service_stays_up(service):
    handle, run = service(eval_timeout_s=3)
    client = handle.client()
    make_model(out(run) / "broken", CRASH=1)
    make_model(out(run) / "hangs", HANG=1)
    make_model(out(run) / "rejected", INVALID=1)
    make_model(out(run) / "fine", SCORE=77)
    ids = [client.submit(f"output/{n}")["id"] for n in ("broken", "hangs", "rejected", "fine")]
    assert handle.wait_idle(60) and handle.alive()
    subs = {s["id"]: s for s in client.list()["submissions"]}
    broken, hangs, rejected, fine = (subs[i] for i in ids)
    assert broken["status"] == "invalid" and broken["score"] is None
    assert "Unable to load weights" in broken["error"] and "status 1" in broken["error"]
    assert hangs["status"] == "invalid" and "timed out after 3 s" in hangs["error"]
    assert rejected["status"] == "invalid" and rejected["error"] == "grader said no"
    assert fine["status"] == "scored" and fine["score"] == 77.0
    scored = {e["data"]["id"]: e["data"] for e in read_events(run / "events.jsonl")
              if e["type"] == "submission_scored"}
    assert scored[ids[0]]["valid"] is False and "Unable to load" in scored[ids[0]]["error"]
    assert json.loads((run / "results" / f"{ids[0]}.json").read_text())["valid"] is False
    # An invalid result is not reused for identical weights: it is evaluated again.
    again = client.submit("output/broken")["id"]
    assert handle.wait_idle(30)
    assert client.status(again)["duplicate_of"] is None


def test_weights_changed_after_submission_the_submitted_copy_is_scored(service):
    # Issue 12: the grader copies the folder at submit and evaluates that copy, so what the agent
    # writes afterwards changes nothing (before, the change made the submission invalid).
    handle, run = service()
    client = handle.client()
    make_model(out(run) / "slow", SLEEP=1.5, SCORE=1)
    make_model(out(run) / "moving", content="v1", SCORE=30)
    client.submit("output/slow")
    res = client.submit("output/moving")
    (out(run) / "moving" / "model.safetensors").write_text("v2 - the agent kept training")
    (out(run) / "moving" / "SCORE").write_text("99")
    assert handle.wait_idle(30)
    sub = client.status(res["id"])
    assert sub["status"] == "scored" and sub["score"] == 30.0
    assert sub["weights_hash"] == res["weights_hash"]
    copy = run / "grader" / "submissions" / str(res["id"])
    assert (copy / "model.safetensors").read_text() == "v1"


# ------------------------------------------------------------------------------------- lifecycle
def test_sigterm_finishes_running_evaluation(service):
    handle, run = service()
    client = handle.client()
    make_model(out(run) / "slow", SLEEP=2, SCORE=5)
    make_model(out(run) / "next", content="other", SCORE=6)
    client.submit("output/slow")
    client.submit("output/next")
    wait_for(lambda: client.status(1)["status"] == "running")
    assert handle.stop(timeout=30) == 0
    journal = read_journal(run)
    scored = [e["id"] for e in journal if e["op"] == "scored"]
    assert scored == [1]               # the running one finished, the queued one waits for resume
    assert not (run / "grader" / "ready").exists()
    assert not Path(handle.ready.socket_path).exists()
    handle2 = start_service(run)
    try:
        assert handle2.wait_idle(30)
        assert handle2.client().status(2)["score"] == 6.0
    finally:
        handle2.kill()


@pytest.mark.parametrize("kill_at", ["running", "queued"])
def test_sigkill_mid_evaluation_then_resume_loses_nothing(service, tmp_path, kill_at):
    log = tmp_path / "evals.log"
    env = {**os.environ, "FAKE_EVAL_LOG": str(log)}
    handle, run = service()
    handle.stop(10)
    handle = start_service(run, env=env)
    client = handle.client()
    for i in range(4):
        make_model(out(run) / f"m{i}", content=f"w{i}", SLEEP=1.0 if i == 0 else 0.2, SCORE=10 + i)
    ids = [client.submit(f"output/m{i}")["id"] for i in range(4)]
    wait_for(lambda: client.status(1)["status"] == "running")
    wait_for(lambda: log.exists() and log.read_text().strip())   # the child is evaluating
    os.kill(handle.pid, signal.SIGKILL)
    handle.proc.wait(10)
    # The evaluator child dies with the service (no orphan evaluating on).
    time.sleep(1.5)
    assert not (run / "grader" / "eval" / "1.json").exists()
    journal = read_journal(run)
    assert sorted(e["id"] for e in journal if e["op"] == "received") == ids
    assert not [e for e in journal if e["op"] == "scored"]
    # Leave a torn line as a crash mid-append would; it was never acknowledged.
    with open(run / "submissions.jsonl", "ab") as fh:
        fh.write(b'{"op": "received", "id": 99, "ts"')
    handle2 = start_service(run, env=env)
    try:
        c2 = handle2.client()
        assert handle2.wait_idle(60)
        subs = c2.list()["submissions"]
        assert [s["id"] for s in subs] == ids
        assert [s["score"] for s in subs] == [10.0, 11.0, 12.0, 13.0]
        make_model(out(run) / "after", content="after")
        assert c2.submit("output/after")["id"] == 5         # ids continue
        assert handle2.wait_idle(30)
    finally:
        handle2.kill()
    assert verify_events(run / "events.jsonl").ok
    journal = read_journal(run)
    assert [e["id"] for e in journal if e["op"] == "scored"] == [1, 2, 3, 4, 5]


def test_resume_keeps_scored_and_limits(service):
    handle, run = service(max_submissions=3)
    client = handle.client()
    make_model(out(run) / "m", SCORE=33)
    client.submit("output/m")
    assert handle.wait_idle(30)
    handle.stop(10)
    handle2 = start_service(run)
    try:
        c2 = handle2.client()
        assert c2.status(1)["score"] == 33.0 and c2.status(1)["status"] == "scored"
        assert c2.time()["submissions_left"] == 2
    finally:
        handle2.kill()


def test_service_json_errors(make_run, tmp_path):
    from a2c.errors import RunError

    with pytest.raises(RunError, match="service.json: missing"):
        start_service(tmp_path / "nowhere")
    run = make_run(port=None, socket_path=None)
    with pytest.raises(RunError, match="socket_path or port"):
        start_service(run, timeout_s=20)


def test_snapshot_at_each_submission(service):
    handle, run = service()
    client = handle.client()
    ws = run / "workspace"
    make_model(out(run) / "m1", content="1")
    r1 = client.submit("output/m1")
    (ws / "train.py").write_text("print('train harder')\n")
    make_model(out(run) / "m2", content="2")
    r2 = client.submit("output/m2")
    assert r1["snapshot"] and r2["snapshot"] and r1["snapshot"] != r2["snapshot"]
    snaps = [e["data"] for e in read_events(run / "events.jsonl") if e["type"] == "snapshot"]
    assert [s["submission_id"] for s in snaps] == [1, 2]
    assert all(s["reason"] == "submission" for s in snaps)
    import subprocess

    shown = subprocess.run(["git", f"--git-dir={run / 'snapshots.git'}", "show",
                            "submission-2:train.py"], capture_output=True, text=True, check=True)
    assert "train harder" in shown.stdout
    files = subprocess.run(["git", f"--git-dir={run / 'snapshots.git'}", "ls-tree", "-r",
                            "--name-only", "submission-1"], capture_output=True, text=True).stdout
    assert "train.py" in files and "output" not in files


def test_folder_swapped_for_symlink_after_submission(service, tmp_path):
    # Issue 12: evaluated from the grader's copy; the swap after submit is never followed.
    import shutil

    handle, run = service()
    client = handle.client()
    outside = make_model(tmp_path / "outside", content="v1", SCORE=99)
    make_model(out(run) / "slow", SLEEP=1.5, SCORE=1)
    make_model(out(run) / "swap", content="v1", SCORE=12)
    client.submit("output/slow")
    sid = client.submit("output/swap")["id"]
    shutil.rmtree(out(run) / "swap")
    (out(run) / "swap").symlink_to(outside, target_is_directory=True)
    assert handle.wait_idle(30)
    sub = client.status(sid)
    assert sub["status"] == "scored" and sub["score"] == 12.0
