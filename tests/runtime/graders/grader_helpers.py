"""Helpers for the grader tests (a uniquely named module: several test folders have a conftest)."""

from __future__ import annotations

import json
import re
import shutil
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
FIXTURES = ROOT / "tests" / "fixtures" / "graders"
GENERATED = ROOT / "generated"


def read_jsonl(path):
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def make_fixture_bundle(task_id: str, dest: Path, files: dict[str, Path],
                        splits: dict[str, dict] | None = None) -> Path:
    """A copy of generated/<task_id> whose data source is the given local files (the hub data
    sets are not on this machine), with a recomputed manifest so that Bundle.load verifies it."""
    from a2c.canonical import sha256_file, sha256_json
    from a2c.contracts.bundle import bundle_digest

    src = GENERATED / task_id
    if not (src / "bundle.json").is_file():
        pytest.skip(f"no bundle generated/{task_id}")
    shutil.copytree(src, dest)
    manifest = json.loads((dest / "bundle.json").read_text())
    task = manifest["task"]
    (dest / "data").mkdir(exist_ok=True)
    rel = {}
    for split, path in files.items():
        shutil.copy(path, dest / "data" / f"{split}.jsonl")
        rel[split] = f"data/{split}.jsonl"
    task["data"]["source"] = {"files": rel, "format": "jsonl"}
    for part, cfg in (splits or {}).items():
        task["data"][part] = cfg
    manifest["spec_hash"] = sha256_json(task)
    listed = {}
    for p in sorted(dest.rglob("*")):
        if p.is_file() and p.name != "bundle.json":
            listed[p.relative_to(dest).as_posix()] = sha256_file(p)
    manifest["files"] = listed
    manifest["digest"] = bundle_digest(manifest["spec_hash"], listed)
    (dest / "bundle.json").write_text(json.dumps(manifest, indent=2, sort_keys=True))
    return dest


# ------------------------------------------------------------------------------- fake judge
_ANSWERS = re.compile(r"## Instruction\n\n(.*)\n\n## Answer A\n\n(.*)\n\n## Answer B\n\n(.*)\n\n"
                      r"## Task", re.DOTALL)


class FakeJudge:
    """An OpenAI-compatible /v1/chat/completions server on loopback.

    `policy(instruction, a, b) -> "A" | "B"`; default: the longer answer wins (a length-biased
    judge). `fail_first` requests answer HTTP 500, `rate_limit_first` answer 429 with
    Retry-After: 0, instructions containing `fail_marker` always answer 500, `garbage` makes
    every reply unparseable, `logprobs` adds top_logprobs to replies."""

    def __init__(self):
        self.requests: list[dict] = []
        self.policy = lambda ins, a, b: "A" if len(a) >= len(b) else "B"
        self.fail_first = 0
        self.rate_limit_first = 0
        self.fail_marker: str | None = None
        self.garbage = False
        self.logprobs: float | None = None   # P(chosen letter) when set
        self.status: int | None = None        # answer every request with this status
        self.lock = threading.Lock()
        judge = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                with judge.lock:
                    judge.requests.append({"path": self.path, "body": body,
                                           "auth": self.headers.get("Authorization")})
                    n = len(judge.requests)
                if self.path != "/v1/chat/completions":
                    return self._send(404, {"error": "not found"})
                if judge.status:
                    return self._send(judge.status, {"error": "nope"})
                if n <= judge.rate_limit_first:
                    return self._send(429, {"error": "slow down"}, {"Retry-After": "0"})
                if n <= judge.rate_limit_first + judge.fail_first:
                    return self._send(500, {"error": "boom"})
                m = _ANSWERS.search(body["messages"][-1]["content"])
                ins, a, b = m.group(1), m.group(2), m.group(3)
                if judge.fail_marker and judge.fail_marker in ins:
                    return self._send(500, {"error": "always fails"})
                verdict = "I cannot decide." if judge.garbage else judge.policy(ins, a, b)
                choice = {"index": 0, "message": {"role": "assistant", "content": verdict},
                          "finish_reason": "stop"}
                if judge.logprobs is not None and body.get("logprobs"):
                    import math
                    other = "B" if verdict == "A" else "A"
                    choice["logprobs"] = {"content": [{"token": verdict, "logprob": math.log(
                        judge.logprobs), "top_logprobs": [
                        {"token": verdict, "logprob": math.log(judge.logprobs)},
                        {"token": other, "logprob": math.log(1 - judge.logprobs)}]}]}
                self._send(200, {"id": f"cmpl-{n}", "object": "chat.completion",
                                 "model": body["model"], "choices": [choice],
                                 "usage": {"prompt_tokens": 100, "completion_tokens": 1,
                                           "total_tokens": 101}})

            def _send(self, code, obj, headers=None):
                data = json.dumps(obj).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                for k, v in (headers or {}).items():
                    self.send_header(k, v)
                self.end_headers()
                self.wfile.write(data)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"
        self.thread = threading.Thread(target=self.server.serve_forever, args=(0.05,), daemon=True)
        self.thread.start()

    def completions(self):
        return [r for r in self.requests if r["path"] == "/v1/chat/completions"]

    def close(self):
        self.server.shutdown()
        self.server.server_close()


# ------------------------------------------------------------------------------- bundles
FIXTURE_DATA = {
    "gsm8k": ({"train": FIXTURES / "gsm8k_train.jsonl", "test": FIXTURES / "gsm8k_test.jsonl"},
              None),
    "alpacaeval": ({"eval": FIXTURES / "alpacaeval_eval.jsonl"},
                   {"agent": {"split": "eval", "slice": "0:3"},
                    "heldout": {"split": "eval", "slice": "3:"}}),
}
FIXTURE_DATA.update({f"{k}-strict": v for k, v in list(FIXTURE_DATA.items())})  # same data


def task_bundles(generated: Path = GENERATED):
    """Every level-1 and level-2 task bundle under `generated` (shipped or authored)."""
    out = []
    for manifest in sorted(Path(generated).glob("*/bundle.json")):
        data = json.loads(manifest.read_text())
        if data.get("kind") == "Task" and data["task"].get("level") in (1, 2):
            out.append(manifest.parent.name)
    return out


def usable_bundle(task_id, tmp_path, generated: Path = GENERATED):
    """The real bundle when its data is here, else the same bundle over fixture files."""
    from a2c.contracts.bundle import Bundle
    from a2c.runtime.data import DataError, load_split

    bundle = Bundle.load(Path(generated) / task_id)
    try:
        records = load_split(bundle.task, "heldout", bundle.root)
        return bundle.root, records, "real"
    except DataError:
        if task_id not in FIXTURE_DATA:
            pytest.skip(f"{task_id}: data not available here and no fixture")
    files, splits = FIXTURE_DATA[task_id]
    root = make_fixture_bundle(task_id, tmp_path / task_id, files, splits)
    bundle = Bundle.load(root)
    return root, load_split(bundle.task, "heldout", root), "fixture"


def wrong_answer(gold: str) -> str:
    """An answer that looks right and is not: the number plus one, or the word with its first
    letter changed (its case kept), so that it still matches the task's pattern."""
    from decimal import Decimal, InvalidOperation
    try:
        return str(Decimal(gold.replace(",", "")) + 1)
    except (InvalidOperation, ValueError):
        pass
    first = gold[:1] or "x"
    swap = {"q": "z", "Q": "Z"}.get(first, "Q" if first.isupper() else "q")
    return swap + gold[1:]


def answer_format_of(task) -> str:
    """The task's declared answer format (`grader.params.answer_format`, which the compiler
    fills in from the pattern when the spec leaves it out): how every test must write an answer
    to this task, never a format assumed from the arithmetic task."""
    from a2c.answer_format import derive

    params = task["grader"].get("params") or {}
    fmt = params.get("answer_format") or derive(str(params.get("pattern") or ""))
    assert fmt, f"{task['id']}: no answer format"
    return fmt


def perfect_and_corrupted(task, records):
    kind = task["grader"]["kind"]
    if kind == "exact_match":
        from a2c.answer_format import render
        from a2c.runtime.graders import get_grader

        g = get_grader(task["grader"])
        fmt = answer_format_of(task)
        gold = {r["id"]: render(fmt, g.gold_answer(r)) for r in records}
        bad = {r["id"]: render(fmt, wrong_answer(g.gold_answer(r))) for r in records}
    elif kind == "humaneval":
        gold = {r["id"]: r["answer"] for r in records}
        bad = {r["id"]: "    pass\n" for r in records}
    elif kind == "pairwise_judge":
        gold = {r["id"]: r["answer"] + " In more detail: " + r["answer"] for r in records}
        bad = {r["id"]: r["answer"][:5] for r in records}
    else:
        raise AssertionError(kind)
    return gold, bad


def write_preds(path, preds):
    with open(path, "w") as f:
        f.writelines(json.dumps({"id": i, "output": o}) + "\n" for i, o in preds.items())
    return path
