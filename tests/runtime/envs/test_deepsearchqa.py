"""DeepSearchQA adapter: BM25 over the fixture corpus, scoring, ReAct episodes, failures, data split."""

from __future__ import annotations

import csv
import json
import re
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from a2c.runtime.envs import deepsearchqa as dsqa
from a2c.runtime.envs.base import BadAction
from a2c.runtime.envs.prompts import get_format
from a2c.runtime.envs.rollout_grader import RolloutGrader

ROOT = Path(__file__).resolve().parents[3]
FIX = ROOT / "tests" / "fixtures" / "l3" / "deepsearchqa"
CORPUS = FIX / "corpus.jsonl"


def fixture_records() -> list[dict]:
    with (FIX / "DSQA-fixture.csv").open(newline="") as f:
        rows = list(csv.DictReader(f))
    return [{"id": f"q{i}", "prompt": r["problem"], "answer": r["answer"],
             "answer_type": r["answer_type"], "corpus": "corpus.jsonl"} for i, r in enumerate(rows)]


# the research plan of each fixture question: actions before the answer
PLANS = {
    "q0": ["search[Halden glassworks]", "search[Halden founded]", "open[d02]"],
    "q1": ["search[ports Grey Sea]"],
    "q2": ["search[Marrow River towns banks]"],
    "q3": ["search[Oskin River joins Marrow]", "search[bridge Brisk built]"],
    "q4": ["search[Marrow River rises mountains]", "search[Tessel Mountains highest peak]"],
    "q5": ["search[highest peak Tessel Mountains]", "open[d14]"],
    "q6": ["search[rivers rise Tessel Mountains]"],
    "q7": ["search[Queen Amsel founded]", "search[Port Ivo lighthouse]"],
}
ANSWERS = {"q0": "Amsel", "q1": "Saltmere, Farrow and Port Ivo", "q2": "Halden, Brisk, Farrow",
           "q3": "King Terin", "q4": "3,104", "q5": "Ilse Varga", "q6": "the Marrow River; Lenn River",
           "q7": "1340"}


class Researcher:
    """Plays each question's plan, then answers (or the override in `answers`)."""

    def __init__(self, records, answers=None, raw=None):
        self.by_q = {r["prompt"]: r["id"] for r in records}
        self.answers = {**ANSWERS, **(answers or {})}
        self.raw = raw or {}
        self.seen: dict[str, list[str]] = {}

    def __call__(self, prompts):
        outs = []
        for msgs in prompts:
            q = re.search(r"Goal: (.*?)\n\nObservation:", msgs[1]["content"], re.S).group(1).strip()
            qid = self.by_q[q]
            n = sum(1 for m in msgs if m["role"] == "assistant")
            if msgs[-1]["role"] == "user" and n:
                self.seen.setdefault(qid, []).append(msgs[-1]["content"])
            if qid in self.raw and n == 0:
                outs.append(self.raw[qid])
                continue
            plan = PLANS[qid]
            outs.append(plan[n] if n < len(plan) else f"answer[{self.answers[qid]}]")
        return outs


def grader(**options) -> RolloutGrader:
    return RolloutGrader({"kind": "rollout", "inference": {},
                          "env": {"kind": "deepsearchqa", "max_steps": 8, "data_root": str(FIX),
                                  "options": {"cache": False, **options}}})


# ------------------------------------------------------------------------------------ BM25
@pytest.mark.parametrize("engine", ["bm25s", "python"])
def test_bm25_ranking_on_the_fixture(engine):
    s = dsqa.CorpusSearch(CORPUS, engine=engine)
    assert s.engine == engine
    assert [d.id for d in s.search("Halden glassworks", 2)] == ["d07", "d02"]
    assert [d.id for d in s.search("ports on the Grey Sea", 3)] == ["d11", "d12", "d10"]
    assert s.search("Oskin joins Marrow", 1)[0].id == "d13"
    assert s.search("zebra quantum", 3) == []
    # hand-computed Lucene BM25 for a one-word query: idf * tf / (tf + k1 (1 - b + b dl/avgdl))
    import math
    toks = [dsqa.tokenize(f"{d.title} {d.text}") for d in s.docs]
    avgdl = sum(map(len, toks)) / len(toks)
    df = sum(1 for t in toks if "glassworks" in t)
    idf = math.log(1 + (len(toks) - df + 0.5) / (df + 0.5))
    i = [d.id for d in s.docs].index("d07")
    tf = toks[i].count("glassworks")
    want = idf * tf / (tf + 1.5 * (1 - 0.75 + 0.75 * len(toks[i]) / avgdl))
    assert s.search("glassworks", 1)[0].score == pytest.approx(want, rel=1e-5)


def test_engines_agree_and_index_is_cached(tmp_path):
    a = dsqa.CorpusSearch(CORPUS, engine="bm25s", cache_root=tmp_path)
    cached = list((tmp_path / "bm25").iterdir())
    assert len(cached) == 1 and (cached[0] / "params.index.json").is_file()
    b = dsqa.CorpusSearch(CORPUS, engine="bm25s", cache_root=tmp_path)        # loads the cache
    c = dsqa.CorpusSearch(CORPUS, engine="python")
    for q in ("rivers rise Tessel", "Queen Amsel founded", "bridge Brisk built", "Grey Sea"):
        ra, rb, rc = ([(d.id, round(d.score, 4)) for d in x.search(q, 5)] for x in (a, b, c))
        assert ra == rb == rc


# ------------------------------------------------------------------------------------ scoring
def test_single_answer_scoring():
    rec = {"answer": "King Terin", "answer_type": "Single Answer"}
    assert dsqa.score_answer("king terin.", rec).reward == 1.0
    s = dsqa.score_answer("Terin", rec)
    assert s.em == 0.0 and s.reward == pytest.approx(2 / 3) and not s.correct
    assert dsqa.score_answer("The 3,104", {"answer": "3104"}).correct
    assert dsqa.normalize_answer("The  Port, of Ivo!") == "port of ivo"


def test_set_answer_scoring():
    rec = {"answer": "Farrow, Port Ivo, Saltmere", "answer_type": "Set Answer"}
    full = dsqa.score_answer("Saltmere; the Farrow and Port Ivo", rec)
    assert full.reward == 1.0 and full.correct
    part = dsqa.score_answer("Farrow, Port Ivo", rec)            # 2 of 3, nothing extra
    assert part.precision == 1.0 and part.recall == pytest.approx(2 / 3)
    assert part.reward == pytest.approx(0.8) and not part.correct
    extra = dsqa.score_answer("Farrow, Port Ivo, Saltmere, Halden", rec)   # one excessive
    assert extra.precision == 0.75 and extra.recall == 1.0 and extra.excessive == 1
    dup = dsqa.score_answer("Farrow, farrow, FARROW", rec)        # duplicates count once
    assert dup.matched == 1 and dup.precision == 1.0
    assert dsqa.score_answer("Port", rec).reward == 0.0        # partial names do not match
    assert dsqa.score_answer("Port", rec, threshold=0.5).matched == 1
    assert dsqa.score_answer("a, b", {"answer": ["A", "B"]}).correct   # list gold = set


# ------------------------------------------------------------------------------------ episodes
def test_scripted_policy_gets_reward_1_on_every_fixture_question():
    recs = fixture_records()
    pol = Researcher(recs)
    result = grader().grade_policy(pol, recs)
    assert result.valid and result.n_items == 8 and result.score == 100.0
    assert result.metrics["success_rate"] == 100.0
    first = result.items[0]
    assert [t["action"] for t in first["trajectory"]][-1] == "answer[Amsel]"
    assert "d07: Halden glassworks" in pol.seen["q0"][0]               # search results shown
    assert "180,000 inhabitants" in pol.seen["q0"][2]                  # open[d02] shows the doc


def test_wrong_answers_bad_actions_and_missing_corpus():
    recs = fixture_records()
    recs.append({**recs[0], "id": "nocorpus", "prompt": "Unanswerable?", "corpus": "missing.jsonl"})
    pol = Researcher(recs, answers={"q1": "Farrow, Port Ivo"},
                     raw={"q2": "I think the towns are Halden and Brisk", "q3": "open[d99]",
                          "nocorpus": "search[x]"})
    result = grader().grade_policy(pol, recs)
    by = {it["id"]: it for it in result.items}
    assert by["q1"]["reward"] == pytest.approx(0.8) and not by["q1"]["won"]
    assert by["q2"]["error"].startswith("bad_action") and "no search[...]" in by["q2"]["error"]
    assert by["q3"]["error"].startswith("bad_action") and "no document 'd99'" in by["q3"]["error"]
    assert by["nocorpus"]["error"].startswith("env_crash") and "missing.jsonl" in by["nocorpus"]["error"]
    for q in ("q0", "q4", "q5", "q6", "q7"):
        assert by[q]["reward"] == 1.0
    assert result.metrics["failures"] == {"bad_action": 2, "env_crash": 1, "timeout": 0}


def test_never_answering_scores_zero_and_timeouts_fail_the_episode(monkeypatch):
    recs = fixture_records()[:2]
    looping = lambda prompts: ["search[Grey Sea]"] * len(prompts)     # noqa: E731
    result = grader().grade_policy(looping, recs)
    assert result.score == 0.0 and all(it["n_steps"] == 8 and it["error"] is None for it in result.items)

    slow_search = dsqa.CorpusSearch.search

    def search(self, query, k=3):
        if "slow" in query:
            time.sleep(3)
        return slow_search(self, query, k)

    monkeypatch.setattr(dsqa.CorpusSearch, "search", search)
    pol = Researcher(recs, raw={"q1": "search[slow ports]"})
    result = grader(step_timeout_s=1.0).grade_policy(pol, recs)
    by = {it["id"]: it for it in result.items}
    assert by["q1"]["error"].startswith("timeout") and by["q0"]["reward"] == 1.0


def test_env_protocol_and_format():
    searchers = dsqa.make_search({"cache": False}, FIX)
    env = dsqa.DeepSearchQAEnv(fixture_records()[1], searchers, {"top_k": 2})
    obs, info = env.reset()
    assert info["task"].startswith("List all the ports") and "set of answers" in obs
    obs, r, done, info = env.step("search[Grey Sea ports]")
    assert info["results"] == ["d11", "d12"] and not done
    with pytest.raises(BadAction):
        env.step("lookup[Farrow]")
    obs, r, done, info = env.step("finish[Farrow, Port Ivo, Saltmere]")
    assert done and r == 1.0 and info["won"] and info["final_reward"] == 1.0
    fmt = get_format("deepsearchqa")
    assert fmt.parse_action("Thought: look it up\nAction: finish[Ilse Varga]") == "answer[Ilse Varga]"
    assert fmt.actions_suffix({"admissible_commands": ["x"]}) == ""
    with pytest.raises(BadAction):
        fmt.parse_action("Ilse Varga")


class _Judge(BaseHTTPRequestHandler):
    def log_message(self, *a):
        pass

    def do_POST(self):  # noqa: N802
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        prompt = body["messages"][0]["content"]
        response = prompt.split("Response: ")[1].split("\n")[0].lower()
        gold = json.loads(prompt.split("Ground truth (")[1].split("): ", 1)[1].split("\n")[0])
        verdict = {"correct": [g.lower() in response for g in gold], "excessive": 0}
        data = json.dumps({"choices": [{"message": {"content": json.dumps(verdict)}}]}).encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


def test_judge_scoring_hook(monkeypatch):
    srv = ThreadingHTTPServer(("127.0.0.1", 0), _Judge)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    try:
        monkeypatch.setenv("A2C_JUDGE_BASE_URL", f"http://127.0.0.1:{srv.server_address[1]}/v1")
        monkeypatch.setenv("A2C_JUDGE_MODEL", "stub")
        rec = {"prompt": "ports?", "answer": "Farrow, Port Ivo, Saltmere", "answer_type": "Set Answer"}
        s = dsqa.judge_score("They are the ports of Farrow and Port Ivo.", rec)
        assert s.recall == pytest.approx(2 / 3) and s.precision == 1.0
        monkeypatch.setenv("A2C_JUDGE_BASE_URL", "http://127.0.0.1:9/v1")     # nothing there
        with pytest.raises(dsqa.EnvCrash, match="judge failed"):
            dsqa.judge_score("Farrow", rec)
    finally:
        srv.shutdown()
        srv.server_close()


# ------------------------------------------------------------------------------------ data
def test_split_rule_and_generator(tmp_path):
    rows = list(range(900))
    a = dsqa.split_questions(rows, 1234)
    assert a == dsqa.split_questions(rows, 1234) and a != dsqa.split_questions(rows, 1)
    assert len(a["train"]) == 100 and len(a["test"]) == 200 and not set(a["train"]) & set(a["test"])
    from a2c.runtime.data.generators import get_generator

    gen = get_generator("deepsearchqa")
    params = {"questions": str(FIX / "DSQA-fixture.csv"), "corpus": str(CORPUS), "train": 3, "test": 4}
    out = gen(params, 7, tmp_path)
    assert (tmp_path / "corpus.jsonl").read_bytes() == CORPUS.read_bytes()
    assert len(out["train"]) == 3 and len(out["test"]) == 4
    ids = [r["id"] for r in out["train"] + out["test"]]
    assert len(set(ids)) == 7 and out == gen(params, 7, tmp_path / "again")
    assert {r["answer_type"] for r in out["test"] + out["train"]} <= {"Single Answer", "Set Answer"}
    assert all(r["corpus"] == "corpus.jsonl" for r in out["test"])
    from a2c.runtime.data import DataError
    with pytest.raises(DataError, match="not found"):
        gen({**params, "questions": str(tmp_path / "nope.csv")}, 7, tmp_path)
    with pytest.raises(DataError, match="available"):
        gen({**params, "train": 100, "test": 200}, 7, tmp_path)


def test_spec_compiles_with_the_split_and_scoring():
    from a2c.compiler.build import plan

    task = json.loads(plan([ROOT / "specs" / "tasks" / "deepsearchqa.yaml"])[0].files["bundle.json"])["task"]
    src = task["data"]["source"]
    assert src["generator"] == "deepsearchqa" and src["seed"] == 1234
    assert src["params"]["train"] == 100 and src["params"]["test"] == 200
    env = task["grader"]["env"]
    assert env["kind"] == "deepsearchqa" and env["options"]["provider"] == "bm25"
    assert env["options"]["scoring"] == "f1"


def test_search_provider_and_its_old_name():
    """`options.provider` picks the search provider; `backend`, its 0.1.0 name, still works."""
    assert dsqa.make_search({}, FIX).provider == "bm25"
    assert dsqa.make_search({"provider": "searxng"}, FIX).provider == "searxng"
    assert dsqa.make_search({"backend": "searxng"}, FIX).provider == "searxng"
    with pytest.raises(ValueError, match="unknown search provider 'google'"):
        dsqa.make_search({"provider": "google"}, FIX)
