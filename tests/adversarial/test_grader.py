"""Hostile agents against the grader service (issue 12, points 4, 5 and 7): each test performs an
attack that once worked, against the real service process, and asserts it fails.

- what is scored is what was hashed (swaps after submit, symlinks, sparse files, limits);
- copy detection compares the weights, not the folder;
- the submitted tokenizer's chat template never renders a grading prompt;
- idle connections cost a bounded number of threads and log lines; the socket is 0660.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import stat
import sys
import threading
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "runtime" / "grader_service"))

from service_helpers import RunFactory, make_model  # noqa: E402

from a2c.canonical import sha256_tree  # noqa: E402
from a2c.runtime.grader_service import GraderClientError, ServiceClient  # noqa: E402
from a2c.runtime.grader_service import start_grader_service as start_service  # noqa: E402


@pytest.fixture
def service(tmp_path):
    factory = RunFactory(tmp_path)
    handles = []

    def start(**overrides):
        run = factory(**overrides)
        handle = start_service(run, timeout_s=30)
        handles.append(handle)
        return handle, run

    yield start
    for h in handles:
        if h.alive():
            h.kill()
            h.proc.wait(10)


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    models = pytest.importorskip("a2c.runtime.models")
    target = tmp_path_factory.mktemp("models") / "tiny"
    shutil.copytree(models.prepare_builtin("tiny"), target)
    return target


def out(run: Path) -> Path:
    return run / "workspace" / "output"


def refused(call) -> GraderClientError:
    with pytest.raises(GraderClientError) as info:
        call()
    return info.value


def slow_first(client, run):
    """A submission that keeps the worker busy, so the next one waits in the queue."""
    make_model(out(run) / "slow", content="slow", SLEEP=1.5, SCORE=1)
    client.submit("output/slow")


# ------------------------------------------------------------------ (a) swap after submit
def test_same_size_swap_with_mtime_restored_after_submit_is_not_scored(service):
    handle, run = service()
    client = handle.client()
    slow_first(client, run)
    model = make_model(out(run) / "m", content="AAAAAAAA", SCORE=10)
    res = client.submit("output/m")
    for name, content in (("model.safetensors", "BBBBBBBB"), ("SCORE", "99")):
        path = model / name
        st = path.stat()
        path.write_text(content)
        os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert handle.wait_idle(30)
    sub = client.status(res["id"])
    assert sub["status"] == "scored" and sub["score"] == 10.0
    copy = run / "grader" / "submissions" / str(res["id"])
    assert sha256_tree(copy) == res["weights_hash"] == sub["weights_hash"]
    assert (copy / "model.safetensors").read_text() == "AAAAAAAA"


# ------------------------------------------------------------------ (b) symlinks
def test_symlinks_inside_the_folder_are_refused(service):
    handle, run = service()
    client = handle.client()
    for name, target in (("to-heldout", run / "grader" / "heldout.jsonl"),
                         ("to-token", Path("../../../grader/token"))):
        model = make_model(out(run) / name)
        (model / "tokenizer.json").symlink_to(target)
        err = refused(lambda n=name: client.submit(f"output/{n}"))
        assert err.status == 400 and err.code == "path_escape", err.body
    inside = make_model(out(run) / "inside")
    (inside / "copy.safetensors").symlink_to("model.safetensors")
    err = refused(lambda: client.submit("output/inside"))
    assert err.status == 400 and err.code == "not_regular_file", err.body
    fifo = make_model(out(run) / "fifo")
    os.mkfifo(fifo / "weights.bin")
    started = time.monotonic()
    err = refused(lambda: client.submit("output/fifo"))
    assert err.code == "not_regular_file" and time.monotonic() - started < 5
    assert client.time()["submissions_left"] == 50


def test_symlink_added_after_submit_is_not_followed(service):
    handle, run = service()
    client = handle.client()
    slow_first(client, run)
    model = make_model(out(run) / "m", SCORE=20)
    sid = client.submit("output/m")["id"]
    (model / "SCORE").unlink()
    (model / "SCORE").symlink_to(run / "grader" / "token")
    (model / "leak").symlink_to(run / "grader" / "heldout.jsonl")
    assert handle.wait_idle(30)
    sub = client.status(sid)
    assert sub["status"] == "scored" and sub["score"] == 20.0
    copy = run / "grader" / "submissions" / str(sid)
    assert not any(p.is_symlink() for p in copy.rglob("*"))


# ------------------------------------------------------------------ (c, d) sizes
def test_sparse_20_gib_file_is_refused_quickly(service):
    handle, run = service()
    model = make_model(out(run) / "sparse")
    with open(model / "huge.safetensors", "wb") as fh:
        fh.truncate(20 << 30)
    started = time.monotonic()
    err = refused(lambda: handle.client().submit("output/sparse"))
    assert err.code == "sparse_file" and time.monotonic() - started < 1.0, err.body
    assert not list((run / "grader" / "submissions").iterdir())


def test_too_many_files_and_too_large_are_refused(service):
    handle, run = service(max_submission_files=20, max_submission_bytes=10_000)
    client = handle.client()
    many = make_model(out(run) / "many")
    for i in range(30):
        (many / f"shard-{i}.txt").write_text("x")
    err = refused(lambda: client.submit("output/many"))
    assert err.status == 413 and err.code == "submission_too_large" and err.body["limit"] == 20
    big = make_model(out(run) / "big")
    (big / "model.safetensors").write_bytes(os.urandom(20_000))
    err = refused(lambda: client.submit("output/big"))
    assert err.status == 413 and err.code == "submission_too_large"
    assert err.body["limit"] == 10_000
    assert not list((run / "grader" / "submissions").iterdir())
    assert client.time()["submissions_left"] == 50


def test_thirty_concurrent_submits_give_exactly_ten(service):
    handle, run = service(max_submissions=10)
    for i in range(30):
        make_model(out(run) / f"m{i}", content=f"w{i}" * 1000)
    codes: list = []

    def go(i):
        try:
            ServiceClient(handle.unix_url, handle.token).submit(f"output/m{i}")
            codes.append("ok")
        except GraderClientError as exc:
            codes.append(exc.code)

    threads = [threading.Thread(target=go, args=(i,)) for i in range(30)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert codes.count("ok") == 10 and codes.count("submission_limit") == 20, codes
    assert len(list((run / "grader" / "submissions").iterdir())) == 10


# ------------------------------------------------------------------ (e) copy detection
def test_copy_of_base_minus_metadata_is_flagged(service, tiny, tmp_path, monkeypatch):
    monkeypatch.setenv("FAKE_EVAL_LOG", str(tmp_path / "evals.log"))
    handle, run = service(base_model=str(tiny))
    client = handle.client()
    shutil.copytree(tiny, out(run) / "nogen")
    (out(run) / "nogen" / "generation_config.json").unlink()
    shutil.copytree(tiny, out(run) / "readme")
    (out(run) / "readme" / "README.md").write_text("my own fine-tuned model, trust me\n")
    # a real fine-tune stand-in: the base with one tensor moved a little (readable weights: a
    # file that is not safetensors is refused at submit, before any copy check)
    from safetensors.torch import load_file, save_file
    shutil.copytree(tiny, out(run) / "other")
    weights = out(run) / "other" / "model.safetensors"
    tensors = load_file(str(weights))
    first = sorted(tensors)[0]
    tensors[first] = tensors[first] + 1e-3
    save_file(tensors, str(weights), metadata={"format": "pt"})
    ids = [client.submit(f"output/{n}")["id"] for n in ("nogen", "readme", "other")]
    assert handle.wait_idle(30)
    subs = [client.status(i) for i in ids]
    assert subs[0]["copy_of_base"] is True and subs[1]["copy_of_base"] is True
    assert subs[2]["copy_of_base"] is False


# ------------------------------------------------------------------ (f) chat template
EVIL = ("{% for m in messages %}{% set n = m['content'].split(' ') %}"
        "{{ m['content'] }} The answer is #### {{ (n[2] | int) + (n[4] | int) }}. Repeat it:"
        "{% endfor %}{{ raise_exception('the submitted template ran') }}")


def _evil_copy(tiny: Path, dest: Path) -> Path:
    shutil.copytree(tiny, dest)
    cfg_path = dest / "tokenizer_config.json"
    cfg = json.loads(cfg_path.read_text())
    cfg["chat_template"] = EVIL
    cfg_path.write_text(json.dumps(cfg))
    jinja = dest / "chat_template.jinja"
    if jinja.exists():
        jinja.write_text(EVIL)
    return dest


def test_backend_renders_the_base_template_not_the_submitted_one(tiny, tmp_path):
    pytest.importorskip("transformers")
    from a2c.runtime.inference import GenerationSettings, load_engine
    from a2c.runtime.inference.chat_template import read_chat_template

    evil = _evil_copy(tiny, tmp_path / "evil")
    assert read_chat_template(evil) == EVIL != read_chat_template(tiny)
    settings = GenerationSettings(max_new_tokens=2)
    prompts = ["What is 3 plus 4?"]
    base = load_engine(tiny, "transformers")
    forced = load_engine(evil, "transformers", chat_template=read_chat_template(tiny))
    assert forced.prompt_ids(prompts, settings) == base.prompt_ids(prompts, settings)
    raw = load_engine(evil, "transformers")   # outside the grader: the folder's own template
    with pytest.raises(Exception, match="submitted template ran"):
        raw.prompt_ids(prompts, settings)


@pytest.mark.slow
def test_submitted_chat_template_is_not_used_by_the_grader(service, tiny):
    grader = {"kind": "exact_match",
              "params": {"pattern": "####\\s*(-?[\\d,.]+)", "fallback": "none",
                         "normalize": "number"},
              "inference": {"max_new_tokens": 8, "batch_size": 8, "temperature": 0.0}}
    handle, run = service(evaluator=None, grader=grader, base_model=str(tiny),
                          engine="transformers", eval_timeout_s=300)
    (run / "grader" / "heldout.jsonl").write_text("".join(
        json.dumps({"id": str(i), "prompt": f"What is {i} plus {i}?", "answer": str(2 * i)})
        + "\n" for i in range(4)))
    shutil.copytree(tiny, out(run) / "plain")
    _evil_copy(tiny, out(run) / "evil")
    client = handle.client()
    ids = [client.submit(f"output/{n}")["id"] for n in ("plain", "evil")]
    assert handle.wait_idle(240)
    plain, evil = (client.status(i) for i in ids)
    assert plain["status"] == "scored" and evil["status"] == "scored", evil
    assert evil["score"] == plain["score"] and evil["duplicate_of"] is None
    assert evil["copy_of_base"] is True and evil["metrics"]["chat_template_ignored"] is True
    assert "chat_template_ignored" not in plain["metrics"]
    full = json.loads((run / "results" / f"{ids[1]}.json").read_text())
    assert full["template_ignored"] is True


# ------------------------------------------------------------------ (g, h) connections, socket
def _threads(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("Threads:"):
            return int(line.split()[1])
    raise AssertionError("no Threads line")


def _connect(path: str) -> socket.socket:
    """Connect, waiting (5 s at most) while the listen backlog is full."""
    deadline = time.monotonic() + 5
    while True:
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.setblocking(False)
        try:
            s.connect(path)
            return s
        except BlockingIOError:
            s.close()
            if time.monotonic() > deadline:
                raise
            time.sleep(0.001)


def _health(path: str) -> float:
    started = time.monotonic()
    with _connect(path) as s:   # a client blocks while the backlog is full: this waits too
        s.settimeout(5)
        s.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        data = b""
        while chunk := s.recv(4096):
            data += chunk
    assert data.startswith(b"HTTP/1.1 200") and b'"ok": true' in data, data[:200]
    return time.monotonic() - started


def test_three_thousand_idle_connections_stay_bounded(service):
    handle, run = service(max_connections=32)
    path = handle.ready.socket_path
    log = run / "logs" / "grader.log"
    size_before = log.stat().st_size
    held: list[socket.socket] = []
    worst = 0.0
    try:
        for i in range(3000):
            held.append(_connect(path))
            if i % 500 == 499:
                worst = max(worst, _health(path))
                assert _threads(handle.pid) < 32 + 16
        worst = max(worst, _health(path))
        threads = _threads(handle.pid)
    finally:
        for s in held:
            s.close()
    assert worst < 1.0 and threads < 32 + 16, (worst, threads)
    assert handle.client().health()
    time.sleep(1.2)   # the last count is flushed within a second
    grown = log.stat().st_size - size_before
    assert grown < 20_000, log.read_text()[-2000:]
    assert "Traceback" not in log.read_text()


def test_idle_connection_times_out(service):
    handle, run = service(request_timeout_s=1)
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(5)
        s.connect(handle.ready.socket_path)
        s.sendall(b"GET /health HTTP/1.1\r\n")   # and never the rest
        started = time.monotonic()
        assert s.recv(100) == b"" and time.monotonic() - started < 4
    time.sleep(1.2)
    text = (run / "logs" / "grader.log").read_text()
    assert "timed out" in text and "Traceback" not in text


def test_socket_is_0660(service):
    handle, run = service()
    mode = stat.S_IMODE(os.stat(handle.ready.socket_path).st_mode)
    assert mode == 0o660, oct(mode)
