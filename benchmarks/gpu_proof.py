"""A GPU proof, ready to run (issue 24, point 6): in each backend (local = bubblewrap, and docker
where an engine answers), what an agent given `--gpus` sees inside its sandbox, what the grader
uses, how long each phase takes, and whether SFT on that GPU moves the score.

Per backend, three runs of the `arith` task (each through `a2c.runtime.run` prepare/execute,
the path `a2c run` takes):

  probe     a one-off agent (built here, `probe_agent`) whose launcher runs PROBE_PY inside the
            sandbox: the /dev/nvidia* nodes it sees, CUDA_VISIBLE_DEVICES, the driver's GPU names
            where /proc shows them, and torch.cuda (is_available, device_count, names, a 512x512
            matmul on cuda checked against the CPU). It writes gpu_probe.json in its workspace,
            which this script reads back after the run. Same launch path, same `--gpus`, so what
            it saw is what the other two runs' agents see.
  scaffold  an LLM scaffold (default claude-code) against the scripted driver doing SFT:
            `a2c run arith --agent claude-code --driver scripted:sft-recipe --gpus 0`.
  ref       a reference agent (default ref-sft) with the same `--gpus`.

Per run, the JSON (`--out`) holds: the probe's observations (probe runs), the grader's devices
(run.json `gpus`, the CUDA_VISIBLE_DEVICES its service gets, the evaluations' backends and
devices where results record them), the timings (prepare, setup = image and preflight, baseline,
agent, grading = drain after the agent, total), the score baseline -> best and the status; then
`checks` (each with ok and what it compared) and a one-line verdict per check.

On a GPU machine (as root, after README's GPU box setup):

    .venv/bin/python benchmarks/gpu_proof.py --out gpu_proof.json

`--rehearse` is for a CPU machine, as root: it makes fake /dev/nvidia0, /dev/nvidia1 and the
control nodes (mknod major 195, as tests/runtime/sandbox/test_sandbox_gpus.py does), runs only
the probe with `--model tiny` and a short budget, agent on GPU 1 and grader on GPU 0, asserts the
agent saw exactly its node and not the grader's and that CUDA is unavailable there (no driver),
and removes the nodes after. For docker in a rehearsal (no NVIDIA runtime here), the container
configuration the backend would use (`docker_container.container_kwargs`, with its
`device_requests`) is built from the probe run's own sandbox spec and recorded, not run.

    .venv/bin/python benchmarks/gpu_proof.py --rehearse --out /tmp/gpu_proof.json
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
import tempfile
import time
import traceback
from datetime import datetime
from pathlib import Path

TASK = "arith"
PROBE_ID = "gpu-probe"
PROBE_FILE = "gpu_probe.json"         # in the probe run's workspace
PROBE_PREFIX = "GPU_PROBE_JSON "      # the same JSON on the probe's stdout (agent.log)
PROBE_BUDGET = "3m"
REHEARSE_BUDGET = "90s"
REHEARSE_GPUS, REHEARSE_GRADER_GPUS = "1", "0"
KINDS = ("probe", "scaffold", "ref")
# fake nodes for a rehearsal: name -> (major, minor), as the sandbox GPU tests make them
FAKE_NODES = {"nvidia0": (195, 0), "nvidia1": (195, 1), "nvidiactl": (195, 255),
              "nvidia-uvm": (510, 0)}

# Runs inside the sandbox (cwd = the workspace in every backend). Never fails: every error is
# recorded in the JSON it prints and writes.
PROBE_PY = r'''
import glob, json, os, time
out = {"uid": os.getuid(), "cuda_visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES"),
       "dev_nvidia": sorted(os.path.basename(p) for p in glob.glob("/dev/nvidia*")),
       "proc_gpus": []}
for info in sorted(glob.glob("/proc/driver/nvidia/gpus/*/information")):
    try:
        fields = {}
        for line in open(info).read().splitlines():
            key, sep, value = line.partition(":")
            if sep:
                fields[key.strip().lower()] = value.strip()
        out["proc_gpus"].append({"name": fields.get("model"), "uuid": fields.get("gpu uuid"),
                                 "minor": fields.get("device minor")})
    except Exception as exc:
        out["proc_gpus"].append({"error": type(exc).__name__})
t = {}
try:
    import torch
    t["version"] = torch.__version__
    t["cuda_build"] = torch.version.cuda
    t["is_available"] = bool(torch.cuda.is_available())
    t["device_count"] = int(torch.cuda.device_count())
    t["names"] = [torch.cuda.get_device_name(i) for i in range(t["device_count"])] \
        if t["is_available"] else []
    if t["is_available"]:
        start = time.time()
        a = torch.randn(512, 512, device="cuda")
        b = a @ a
        torch.cuda.synchronize()
        ref = a.cpu().double() @ a.cpu().double()
        t["matmul"] = {"ok": True, "device": str(b.device), "shape": list(b.shape),
                       "seconds": round(time.time() - start, 4),
                       "max_abs_diff_vs_cpu": float((b.cpu().double() - ref).abs().max())}
    else:
        t["matmul"] = {"ok": False, "skipped": "torch.cuda.is_available() is False"}
except Exception as exc:
    t["error"] = type(exc).__name__ + ": " + str(exc)[:300]
out["torch"] = t
text = json.dumps(out, sort_keys=True)
with open("gpu_probe.json", "w") as fh:
    fh.write(text + "\n")
print("GPU_PROBE_JSON " + text, flush=True)
'''


# ------------------------------------------------------------------ pure parts

def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--backends", default=None,
                   help="comma list of local,docker (default: local, plus docker if an engine "
                        "answers)")
    p.add_argument("--runs", default=",".join(KINDS),
                   help=f"which runs per backend, a comma list of {','.join(KINDS)}")
    p.add_argument("--scaffold", default="claude-code", help="the LLM scaffold (default %(default)s)")
    p.add_argument("--driver", default="scripted:sft-recipe",
                   help="the scaffold's driver (default %(default)s)")
    p.add_argument("--agent", default="ref-sft", help="the reference agent (default %(default)s)")
    p.add_argument("--budget", default="10m",
                   help="wall-clock budget of the scaffold and reference runs (default %(default)s)")
    p.add_argument("--model", default=None,
                   help="base model override (default: the task's, SmolLM2; `tiny` to rehearse)")
    p.add_argument("--gpus", default=None,
                   help="the agent's GPUs, host indices as `a2c run --gpus` (default 0; "
                        f"{REHEARSE_GPUS} when rehearsing)")
    p.add_argument("--grader-gpus", default=None,
                   help="the grader's GPUs (default: a2c's choice, one free device not the "
                        f"agent's, else none; {REHEARSE_GRADER_GPUS} when rehearsing)")
    p.add_argument("--agent-env", action="append", default=[], metavar="KEY=VALUE",
                   help="extra environment for the scaffold and reference agents (repeatable), "
                        "e.g. SFT_STEPS=10 for a shorter recipe")
    p.add_argument("--agent-param", action="append", default=[], metavar="NAME=VALUE",
                   help="a param of the reference agent (repeatable; `a2c agents params "
                        "ref-sft`), e.g. steps=10 for a shorter run")
    p.add_argument("--runs-dir", default=None, help="where the runs go (default: a new temp dir)")
    p.add_argument("--out", default=None, help="the JSON report's path (default: "
                   "gpu_proof.json in the runs dir); a summary goes to stdout either way")
    p.add_argument("--rehearse", action="store_true",
                   help="CPU machine, as root: fake device nodes, the probe only, tiny model")
    args = p.parse_args(argv)
    args.runs = [r.strip() for r in args.runs.split(",") if r.strip()]
    bad = [r for r in args.runs if r not in KINDS]
    if bad:
        p.error(f"--runs: unknown {bad[0]!r} (choose among {', '.join(KINDS)})")
    if args.backends is not None:
        args.backends = [b.strip() for b in args.backends.split(",") if b.strip()]
        bad = [b for b in args.backends if b not in ("local", "docker")]
        if bad:
            p.error(f"--backends: unknown {bad[0]!r} (local, docker)")
    env = {}
    for item in args.agent_env:
        key, sep, value = item.partition("=")
        if not sep or not key:
            p.error(f"--agent-env {item!r}: expected KEY=VALUE")
        env[key] = value
    args.agent_env = env
    from a2c.contracts.agent_params import AgentParamError, parse_assignments
    try:
        args.agent_param = parse_assignments(args.agent_param)
    except AgentParamError as exc:
        p.error(str(exc))
    if args.rehearse:
        args.runs = ["probe"]
        args.model = args.model or "tiny"
        if args.model != "tiny":
            p.error("--rehearse runs with --model tiny")
        args.gpus = args.gpus or REHEARSE_GPUS
        args.grader_gpus = args.grader_gpus or REHEARSE_GRADER_GPUS
    else:
        args.gpus = args.gpus or "0"
    return args


def parse_probe(text: str) -> dict | None:
    """The probe's JSON: a whole-file JSON object (gpu_probe.json) or the last
    `GPU_PROBE_JSON {...}` line of a log; None when neither is there."""
    text = text or ""
    with contextlib.suppress(ValueError):
        data = json.loads(text)
        if isinstance(data, dict):
            return data
    found = None
    for line in text.splitlines():
        at = line.find(PROBE_PREFIX)
        if at >= 0:
            with contextlib.suppress(ValueError):
                found = json.loads(line[at + len(PROBE_PREFIX):])
    return found if isinstance(found, dict) else None


def probe_gpu_nodes(probe: dict) -> list[str]:
    """The per-GPU nodes (nvidiaN) among what the probe saw in /dev."""
    return sorted((n for n in probe.get("dev_nvidia") or []
                   if n.startswith("nvidia") and n[6:].isdigit()), key=lambda n: int(n[6:]))


def _ts(value: str) -> float:
    return datetime.fromisoformat(str(value).replace("Z", "+00:00")).timestamp()


def event_timings(events: list[dict], execute_start: float | None = None) -> dict:
    """Seconds per phase from the run's events: setup (execute's start, when known, to
    run_started: the docker image and the preflight), baseline (to baseline_scored: the base
    model's score, cached per task, model and grader), grader_start (to agent_started: the
    grader service), agent (to agent_exited), grading (to run_finished: the evaluations still
    queued, the final split, the record)."""
    first: dict[str, float] = {}
    for event in events:
        with contextlib.suppress(KeyError, TypeError, ValueError):
            first.setdefault(event["type"], _ts(event["ts"]))
    scored = "baseline_scored" if "baseline_scored" in first else "agent_started"
    marks = [("baseline", "run_started", scored),
             ("grader_start", scored, "agent_started"),
             ("agent", "agent_started", "agent_exited"),
             ("grading", "agent_exited", "run_finished")]
    out: dict[str, float | None] = {}
    if execute_start is not None and "run_started" in first:
        out["setup"] = round(first["run_started"] - execute_start, 2)
    for name, a, b in marks:
        if name == "grader_start" and a == b:
            continue
        out[name] = round(first[b] - first[a], 2) if a in first and b in first else None
    return out


def _device_fields(result: dict) -> dict:
    """What an evaluation result says about where it ran: its backend, any device key."""
    out = {}
    for key in ("backend", "device", "devices", "cuda_visible_devices"):
        if result.get(key) is not None:
            out[key] = result[key]
    for nested in ("metrics", "info", "meta"):
        inner = result.get(nested)
        if isinstance(inner, dict):
            for key in ("device", "devices", "backend"):
                if inner.get(key) is not None:
                    out[f"{nested}.{key}"] = inner[key]
    return out


def describe_run(run_dir: Path, wall: dict | None = None) -> dict:
    """One run's entry from its folder: status, isolation, scores, GPUs (agent's and grader's),
    the grader's CUDA_VISIBLE_DEVICES, what its results say about devices, the timings, and the
    probe's observations when the workspace holds them."""
    run_dir = Path(run_dir)
    wall = wall or {}
    run = json.loads((run_dir / "run.json").read_text(encoding="utf-8"))
    events = []
    events_path = run_dir / "events.jsonl"
    if events_path.is_file():
        for line in events_path.read_text(encoding="utf-8").splitlines():
            with contextlib.suppress(ValueError):
                events.append(json.loads(line))
    gpus = run.get("gpus") or {}
    results = []
    for path in sorted((run_dir / "results").glob("*.json")):
        with contextlib.suppress(ValueError, OSError):
            data = json.loads(path.read_text(encoding="utf-8"))
            if isinstance(data, dict):
                results.append({"result": path.stem, "score": data.get("score"),
                                "elapsed_s": data.get("elapsed_s"), "cached": data.get("cached"),
                                **_device_fields(data)})
    timings = {"prepare": wall.get("prepare"),
               **event_timings(events, wall.get("execute_start")),
               "total": wall.get("total")}
    # the evaluations this run paid for (a cached baseline's time was another run's)
    evaluated = [r["elapsed_s"] for r in results
                 if isinstance(r.get("elapsed_s"), (int, float)) and not r.get("cached")]
    timings["evaluations_sum"] = round(sum(evaluated), 2) if evaluated else None
    entry = {
        "run_dir": str(run_dir), "run_id": run.get("run_id"), "agent": run.get("agent"),
        "status": run.get("status"), "isolation": run.get("isolation"),
        "base_model": (run.get("base_model") or {}).get("spec"),
        "driver": run.get("driver"),
        "score": {"baseline": run.get("baseline_score"), "best": run.get("best_score"),
                  "valid_submissions": run.get("valid_submissions")},
        "agent_exit": run.get("agent_exit"),
        "gpus": {"agent": list(gpus.get("agent") or []), "grader": list(gpus.get("grader") or [])},
        "grader": {"gpus": list(gpus.get("grader") or []),
                   "cuda_visible_devices": grader_visible(run),
                   "results": results},
        "timings_s": timings,
    }
    probe_path = run_dir / "workspace" / PROBE_FILE
    probe = parse_probe(probe_path.read_text(encoding="utf-8")) if probe_path.is_file() else None
    if probe is None and (run_dir / "logs" / "agent.log").is_file():
        probe = parse_probe((run_dir / "logs" / "agent.log").read_text(errors="replace"))
    if probe is not None:
        entry["agent_saw"] = {**probe, "gpu_nodes": probe_gpu_nodes(probe)}
    return entry


def grader_visible(run: dict) -> str | None:
    """The grader service's CUDA_VISIBLE_DEVICES, computed as the runner computes it."""
    try:
        from a2c.contracts.run_info import RunInfo
        from a2c.runtime.run.devices import grader_visible as visible
    except ImportError:
        return None
    try:
        info = RunInfo.from_dict({"run_id": "", "task": "", "agent": "", **run})
    except (TypeError, ValueError):   # not a run.json this a2c reads
        return None
    return visible(info)


def device_lines(log: str, limit: int = 8) -> list[str]:
    """Lines of an agent's log that name a device (cuda, gpu, nvidia), first `limit`."""
    words = ("cuda", "gpu", "nvidia")
    return [ln.strip()[:300] for ln in log.splitlines()
            if any(w in ln.lower() for w in words)][:limit]


def check(name: str, ok: bool, detail) -> dict:
    return {"check": name, "ok": bool(ok), "detail": detail}


def probe_checks(entry: dict, rehearse: bool) -> list[dict]:
    """What a probe run must show: exactly the agent's GPU nodes, none of the grader's,
    CUDA_VISIBLE_DEVICES as a2c names the agent's devices, the grader's devices apart; on a GPU
    machine CUDA works on exactly the agent's devices, rehearsing it is unavailable (no driver)."""
    from a2c.runtime.sandbox import gpus as gpu_mod
    saw = entry.get("agent_saw")
    agent, grader = entry["gpus"]["agent"], entry["gpus"]["grader"]
    exit_ = entry.get("agent_exit") or {}
    # the probe submits nothing: its run ends `no_submission` (a normal end), its launcher rc 0
    out = [check("probe ran inside the sandbox",
                 saw is not None and exit_.get("returncode") == 0
                 and entry["status"] in ("finished", "no_submission"),
                 {"status": entry["status"], "isolation": entry["isolation"],
                  "agent_exit": exit_})]
    if saw is None:
        return out
    want = [f"nvidia{i}" for i in agent]
    out.append(check("agent sees exactly its GPU nodes", saw["gpu_nodes"] == want,
                     {"saw": saw["gpu_nodes"], "agent_gpus": agent}))
    leaked = [f"nvidia{i}" for i in grader if f"nvidia{i}" in saw["gpu_nodes"]]
    out.append(check("agent sees none of the grader's nodes", not leaked,
                     {"grader_gpus": grader, "leaked": leaked}))
    cvd = gpu_mod.visible_devices(tuple(agent)) if agent else None   # unset without GPUs
    out.append(check("CUDA_VISIBLE_DEVICES names the agent's devices",
                     saw.get("cuda_visible_devices") == cvd,
                     {"saw": saw.get("cuda_visible_devices"), "expected": cvd}))
    out.append(check("grader's devices are not the agent's", not set(agent) & set(grader),
                     {"agent": agent, "grader": grader,
                      "grader_cuda_visible_devices": entry["grader"]["cuda_visible_devices"]}))
    torch_ = saw.get("torch") or {}
    if rehearse or not agent:
        why = "a CPU machine with fake nodes" if rehearse else "no GPU given (--gpus none)"
        out.append(check(f"CUDA unavailable inside, as expected on {why}",
                         torch_.get("is_available") is False,
                         {k: torch_.get(k) for k in ("is_available", "device_count", "error")}))
    else:
        out.append(check("torch.cuda works on exactly the agent's devices",
                         torch_.get("is_available") is True
                         and torch_.get("device_count") == len(agent)
                         and (torch_.get("matmul") or {}).get("ok") is True,
                         {k: torch_.get(k) for k in ("is_available", "device_count", "names",
                                                     "matmul", "error")}))
    return out


def summary_lines(report: dict) -> list[str]:
    """The report in a few readable lines."""
    lines = [f"GPU proof ({'rehearsal: fake nodes, no GPU' if report['rehearse'] else 'real devices'}"
             f"), host GPUs {report['host']['gpus']}, backends {', '.join(report['backends'])}"]
    for row in report["runs"]:
        head = f"- {row['backend']}/{row['kind']} ({row.get('agent')})"
        if row.get("error"):
            lines.append(f"{head}: ERROR {row['error']}")
            continue
        if row.get("container_config"):
            cfg = row["container_config"]
            lines.append(f"{head}: not run ({row['note']}); device_requests "
                         f"{json.dumps(cfg.get('device_requests'))}, image {cfg.get('image')}, "
                         f"CUDA_VISIBLE_DEVICES "
                         f"{cfg.get('environment.CUDA_VISIBLE_DEVICES')!r}")
            if row.get("cuda_visible_devices_note"):
                lines.append(f"    note: {row['cuda_visible_devices_note']}")
            continue
        score, t = row["score"], row["timings_s"]
        lines.append(f"{head}: {row['status']} in {row['isolation']}, score {score['baseline']} -> "
                     f"{score['best']}, gpus agent {row['gpus']['agent']} grader "
                     f"{row['gpus']['grader']} (grader CUDA_VISIBLE_DEVICES="
                     f"{row['grader']['cuda_visible_devices']!r})")
        lines.append("    timings s: " + ", ".join(f"{k} {v}" for k, v in t.items()
                                                    if v is not None))
        saw = row.get("agent_saw")
        if saw:
            tt = saw.get("torch") or {}
            lines.append(f"    agent saw: nodes {saw['gpu_nodes']} (all /dev/nvidia*: "
                         f"{saw.get('dev_nvidia')}), CUDA_VISIBLE_DEVICES="
                         f"{saw.get('cuda_visible_devices')!r}, torch {tt.get('version')} "
                         f"cuda available {tt.get('is_available')}, count "
                         f"{tt.get('device_count')}, names {tt.get('names')}, matmul "
                         f"{(tt.get('matmul') or {}).get('ok')}")
    for c in report["checks"]:
        lines.append(f"{'ok  ' if c['ok'] else 'FAIL'} {c['check']}: {json.dumps(c['detail'])}")
    lines.append(f"verdict: {'all checks pass' if report['ok'] else 'SOME CHECKS FAILED'}")
    return lines


# ------------------------------------------------------------------ the runs

def probe_agent(root: Path) -> Path:
    """ROOT/agents/gpu-probe: a verified agent bundle whose launcher runs PROBE_PY (its
    manifest by a2c.contracts.bundle.write_agent_manifest)."""
    from a2c.contracts.bundle import write_agent_manifest
    folder = root / "agents" / PROBE_ID
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "launch.sh").write_text("#!/usr/bin/env bash\nexec python - <<'PROBE'\n"
                                      + PROBE_PY.strip() + "\nPROBE\n")
    (folder / "prompt.md").write_text("{{ instructions }}\n")
    agent = {"id": PROBE_ID, "title": "GPU probe (benchmarks/gpu_proof.py)", "type": "reference",
             "launch": {"command": "bash", "env": {}, "pass_env": []},
             "driver": {"required": False, "default": None, "models": []},
             "transcript": {"source": "stdout", "format": "text", "ext": "log", "path": None},
             "prompt": "{{ instructions }}\n"}
    write_agent_manifest(folder, agent, "gpu_proof")
    return folder


@contextlib.contextmanager
def fake_nodes(dev: Path = Path("/dev")):
    """Fake /dev/nvidia0, /dev/nvidia1 and control nodes (character devices, major 195; opening
    them fails without a driver, but a sandbox binds and lists them like real ones), removed
    after. Nodes that exist already are left alone."""
    if os.geteuid() != 0:
        raise SystemExit("--rehearse makes device nodes: run it as root")
    made = []
    try:
        for name, (major, minor) in FAKE_NODES.items():
            node = dev / name
            if not node.exists():
                os.mknod(node, 0o666 | 0o020000, os.makedev(major, minor))
                made.append(node)
        yield [str(n) for n in made]
    finally:
        for node in made:
            node.unlink(missing_ok=True)


def docker_answers() -> tuple[bool, dict]:
    """(an engine answers, what it says about GPU runtimes)."""
    try:
        from a2c.runtime.sandbox.docker_engine import client
        info = client().info()
    except Exception as exc:  # noqa: BLE001 - no engine is an answer, not a failure
        return False, {"error": str(exc)[:200]}
    runtimes = sorted((info.get("Runtimes") or {}).keys())
    return True, {"runtimes": runtimes, "default_runtime": info.get("DefaultRuntime"),
                  "nvidia_runtime": "nvidia" in runtimes}


def container_config(run_dir: Path) -> dict:
    """The docker backend's container configuration for this run's agent (`container_kwargs`
    on the sandbox spec the runner builds, confined), JSON-ready: what a docker run would
    start, with its device_requests, recorded where no NVIDIA runtime can run it."""
    from a2c.runtime.run.agent import sandbox_spec
    from a2c.runtime.run.context import RunContext
    from a2c.runtime.run.resolve import load_agent
    from a2c.runtime.sandbox.docker import image_tag
    from a2c.runtime.sandbox.docker_container import LIB_DIR, container_kwargs
    ctx = RunContext.load(run_dir)
    agent = load_agent(ctx.paths.agent, verify=False)
    spec = sandbox_spec(agent, ctx.run, ctx.paths, True, {})
    kwargs = container_kwargs(spec, image_tag(spec), library=ctx.run_dir / LIB_DIR)
    keep = ("image", "command", "user", "network_mode", "read_only", "cap_drop",
            "security_opt", "mem_limit", "nano_cpus", "pids_limit", "ipc_mode")
    out = {k: kwargs.get(k) for k in keep if k in kwargs}
    out["device_requests"] = [dict(r) for r in kwargs.get("device_requests") or []]
    out["environment.CUDA_VISIBLE_DEVICES"] = kwargs["environment"].get("CUDA_VISIBLE_DEVICES")
    out["devices"] = kwargs.get("devices")
    return out


def one_run(kind: str, backend: str, args, runs_dir: Path, agent: str) -> dict:
    from a2c.runtime import run as run_mod
    scaffold = kind == "scaffold"
    opts = run_mod.RunOptions(
        bundle=TASK, agent=agent, backend=backend, runs_dir=runs_dir / backend / kind,
        model=args.model, gpus=args.gpus, grader_gpus=args.grader_gpus,
        budget=(REHEARSE_BUDGET if args.rehearse else PROBE_BUDGET) if kind == "probe"
        else args.budget,
        driver=args.driver if scaffold else None,
        agent_env=dict(args.agent_env) if kind != "probe" else {},
        agent_params=dict(args.agent_param) if kind == "ref" else {})
    said: list[str] = []

    def report(line: str) -> None:
        said.append(line)
        print(f"  [{backend}/{kind}] {line}", flush=True)
    t0 = time.monotonic()
    ctx = run_mod.prepare(opts, report=report)
    t1 = time.monotonic()
    execute_start = time.time()
    try:
        run_mod.execute(ctx, report=report)
    finally:
        t2 = time.monotonic()
    wall = {"prepare": round(t1 - t0, 2), "execute_start": execute_start,
            "total": round(t2 - t0, 2)}
    entry = describe_run(ctx.run_dir, wall)
    log = ctx.paths.agent_log
    text = log.read_text(errors="replace") if log.is_file() else ""
    if kind != "probe":   # what the trainer said about its device, where it said anything
        entry["agent_log_device_lines"] = device_lines(text)
    if entry.get("status") not in ("finished", "no_submission"):
        entry["agent_log_tail"] = text[-1500:]
    entry["reported"] = said[-12:]
    return entry


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    runs_dir = Path(args.runs_dir or tempfile.mkdtemp(prefix="a2c-gpu-proof-"))
    runs_dir.mkdir(parents=True, exist_ok=True)
    out_path = Path(args.out) if args.out else runs_dir / "gpu_proof.json"
    engine, engine_info = docker_answers()
    backends = args.backends or (["local", "docker"] if engine else ["local"])
    from a2c.runtime.sandbox import gpus as gpu_mod
    report: dict = {"rehearse": args.rehearse, "task": TASK, "backends": backends,
                    "options": {k: getattr(args, k) for k in (
                        "scaffold", "driver", "agent", "budget", "model", "gpus", "grader_gpus",
                        "agent_env", "agent_param", "runs")},
                    "docker_engine": {"answers": engine, **engine_info},
                    "started": datetime.now().astimezone().isoformat(timespec="seconds"),
                    "runs": [], "checks": []}
    if args.rehearse:
        report["note"] = ("rehearsal on a CPU machine: fake /dev/nvidia* nodes (mknod major 195), "
                          "the probe only, tiny model; CUDA is expected to be unavailable inside; "
                          "docker's GPU path is recorded as the container configuration, not run")
    probe_root = runs_dir / "agents-src"
    probe = probe_agent(probe_root)
    agents = {"probe": str(probe), "scaffold": args.scaffold, "ref": args.agent}
    nodes = fake_nodes() if args.rehearse else contextlib.nullcontext([])
    with nodes as made:
        found = gpu_mod.list_gpus()
        report["host"] = {"gpus": [{"index": g.index, "node": g.node, "name": g.name,
                                    "uuid": g.uuid} for g in found],
                          "control_nodes": gpu_mod.control_nodes(), "fake_nodes_made": made}
        local_probe_dir = None
        for backend in backends:
            for kind in args.runs:
                row = {"backend": backend, "kind": kind, "agent": agents[kind]}
                if args.rehearse and backend == "docker":
                    if local_probe_dir is None:
                        row["error"] = "no local probe run to build the container config from"
                    else:
                        row["note"] = ("rehearsal: no NVIDIA container runtime here, so the "
                                       "container is not started; this is the configuration the "
                                       "docker backend would start for the probe run's spec")
                        row["container_config"] = container_config(local_probe_dir)
                        want = list(report["runs"][0]["gpus"]["agent"])
                        got = [i for r in row["container_config"]["device_requests"]
                               for i in r.get("DeviceIDs") or []]
                        cvd = row["container_config"]["environment.CUDA_VISIBLE_DEVICES"]
                        # the runtime numbers a container's GPUs from 0: host indices would
                        # name other devices there; UUIDs name the same device everywhere
                        report["checks"].append(check(
                            "docker: CUDA_VISIBLE_DEVICES counts from 0 (or names UUIDs)",
                            bool(cvd) and (cvd.startswith("GPU-") or cvd == ",".join(
                                str(i) for i in range(len(want)))),
                            {"cuda_visible_devices": cvd, "agent_gpus": want}))
                        report["checks"].append(check(
                            "docker: device_requests name exactly the agent's GPUs",
                            got == want and all(r.get("Driver") == "nvidia" for r in
                                                row["container_config"]["device_requests"]),
                            {"device_ids": got, "agent_gpus": want}))
                    report["runs"].append(row)
                    continue
                print(f"{backend}/{kind}: {agents[kind]} ...", flush=True)
                try:
                    entry = one_run(kind, backend, args, runs_dir, agents[kind])
                except Exception as exc:  # noqa: BLE001 - one failed run is a row, not the end
                    row["error"] = f"{type(exc).__name__}: {exc}"
                    row["traceback"] = traceback.format_exc()[-2000:]
                    report["runs"].append(row)
                    report["checks"].append(check(f"{backend}/{kind} ran", False, row["error"]))
                    continue
                row.update(entry)
                report["runs"].append(row)
                if kind == "probe":
                    if backend == "local":
                        local_probe_dir = Path(entry["run_dir"])
                    for c in probe_checks(entry, args.rehearse):
                        report["checks"].append({**c, "check": f"{backend}: {c['check']}"})
                else:
                    report["checks"].append(check(
                        f"{backend}/{kind} finished with a scored submission",
                        entry["status"] == "finished" and entry["score"]["best"] is not None,
                        entry["score"] | {"status": entry["status"]}))
                    report["checks"].append(check(
                        f"{backend}/{kind} best above baseline (SFT on the GPU moved the score)",
                        entry["score"]["best"] is not None and entry["score"]["baseline"] is not None
                        and entry["score"]["best"] > entry["score"]["baseline"], entry["score"]))
    if args.rehearse:
        left = [n for n in made if Path(n).exists()]
        report["checks"].append(check("fake nodes removed after", not left, {"left": left}))
    report["ok"] = all(c["ok"] for c in report["checks"]) and bool(report["checks"])
    report["finished"] = datetime.now().astimezone().isoformat(timespec="seconds")
    out_path.parent.mkdir(parents=True, exist_ok=True)
    out_path.write_text(json.dumps(report, indent=2, sort_keys=True, default=str) + "\n")
    print("\n".join(summary_lines(report)))
    print(f"report: {out_path}")
    return 0 if report["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
