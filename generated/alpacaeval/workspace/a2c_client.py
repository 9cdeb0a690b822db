#!/usr/bin/env python3
"""a2c grading client: submit a trained model for scoring and check results and time left.

    python a2c_client.py submit output/my-model [--note "sft 2 epochs"] [--wait]
    python a2c_client.py status [ID]        # one submission (without ID: all, like list)
    python a2c_client.py list               # every submission with its score
    python a2c_client.py time               # time and submissions left
    python a2c_client.py wait ID            # block until a submission is scored

Add --json for machine-readable output. The model path is a folder with the full model
(config, tokenizer and weights, as written by `save_pretrained`) inside $A2C_OUTPUT_DIR.
Reads A2C_GRADER_URL (http://127.0.0.1:PORT or unix:/path/to.sock) and A2C_TOKEN.
Exit status: 0 ok, 1 refused or failed, 2 usage error, 3 grader unreachable.
Standard library only.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import socket
import sys
import time

DEFAULT_SOCKET = "unix:/run/a2c/grader.sock"


class UnixHTTPConnection(http.client.HTTPConnection):
    def __init__(self, path, timeout):
        super().__init__("localhost", timeout=timeout)
        self.unix_path = path

    def connect(self):
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(self.timeout)
        sock.connect(self.unix_path)
        self.sock = sock


class Unreachable(Exception):
    pass


class Refused(Exception):
    def __init__(self, status, body):
        self.status = status
        self.body = body
        super().__init__(body.get("message") or body.get("error") or f"HTTP {status}")


def grader_url():
    return os.environ.get("A2C_GRADER_URL") or DEFAULT_SOCKET


def connection(url, timeout):
    if url.startswith("unix:"):
        return UnixHTTPConnection(url[len("unix:"):], timeout)
    rest = url.split("://", 1)[-1].rstrip("/")
    host, _, port = rest.partition(":")
    if url.startswith("https://"):
        return http.client.HTTPSConnection(host, int(port or 443), timeout=timeout)
    return http.client.HTTPConnection(host, int(port or 80), timeout=timeout)


def call(method, path, body=None, timeout=60.0):
    url = grader_url()
    headers = {"Accept": "application/json"}
    token = os.environ.get("A2C_TOKEN")
    if token:
        headers["Authorization"] = "Bearer " + token
    data = None
    if body is not None:
        data = json.dumps(body).encode("utf-8")
        headers["Content-Type"] = "application/json"
    conn = connection(url, timeout)
    try:
        conn.request(method, path, body=data, headers=headers)
        resp = conn.getresponse()
        raw = resp.read()
    except (OSError, http.client.HTTPException) as exc:
        raise Unreachable(f"cannot reach the grader at {url}: {exc}")
    finally:
        conn.close()
    try:
        payload = json.loads(raw) if raw else {}
    except ValueError:
        payload = {"error": "bad_response", "message": raw[:300].decode("utf-8", "replace")}
    if resp.status >= 400:
        raise Refused(resp.status, payload)
    return payload


# ------------------------------------------------------------------------------- formatting
def fmt_seconds(s):
    if s is None:
        return "unlimited"
    s = int(max(0, s))
    h, rem = divmod(s, 3600)
    m, sec = divmod(rem, 60)
    if h:
        return f"{h}h{m:02d}m{sec:02d}s"
    if m:
        return f"{m}m{sec:02d}s"
    return f"{sec}s"


def fmt_score(sub):
    if sub.get("status") == "scored" and sub.get("score") is not None:
        text = f"{sub['score']:.2f}"
        ci = sub.get("ci95")
        if ci:
            text += f" (95% CI {ci[0]:.1f}-{ci[1]:.1f})"
        return text
    if sub.get("status") == "invalid":
        return "invalid"
    return "-"


def describe(sub):
    lines = [f"submission {sub['id']}: {sub['status']}"]
    if sub.get("model_path"):
        lines.append(f"  model:  {sub['model_path']}")
    if sub.get("note"):
        lines.append(f"  note:   {sub['note']}")
    if sub.get("status") == "scored":
        lines.append(f"  score:  {fmt_score(sub)}")
    if sub.get("duplicate_of") is not None:
        lines.append(f"  identical weights to submission {sub['duplicate_of']}: its result is reused")
    if sub.get("copy_of_base"):
        lines.append("  these are the base model's weights")
    if sub.get("error"):
        lines.append(f"  error:  {sub['error']}")
    if sub.get("queue_position"):
        lines.append(f"  queue position: {sub['queue_position']}")
    return "\n".join(lines)


def refusal_text(exc):
    body = exc.body
    code = body.get("error", f"HTTP {exc.status}")
    text = f"refused ({code}): {body.get('message', '')}".rstrip()
    if body.get("limit") is not None and code in ("submission_limit", "too_soon", "deadline_passed"):
        limit = body["limit"]
        if code == "deadline_passed":
            limit = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(limit))
        elif code == "too_soon":
            limit = f"{limit:g} s between submissions"
        text += f" [limit: {limit}]"
    if code == "unauthorized":
        text += " [is A2C_TOKEN set?]"
    return text


# ------------------------------------------------------------------------------- commands
def wait_for(sid, timeout, quiet, as_json):
    start = time.monotonic()
    delay = 1.0
    last = None
    while True:
        sub = call("GET", f"/submissions/{sid}")
        if sub["status"] in ("scored", "invalid"):
            return sub
        if not quiet and not as_json and sub["status"] != last:
            print(f"submission {sid}: {sub['status']}...", file=sys.stderr)
            last = sub["status"]
        if timeout is not None and time.monotonic() - start > timeout:
            return sub
        time.sleep(delay)
        # at most 2 s between looks: the caller waits for the score, so a longer pause only
        # adds idle time after it (one cheap local GET every 2 s costs the grader nothing)
        delay = min(delay * 1.5, 2.0)


def cmd_submit(args):
    path = args.path
    if not os.path.isabs(path):
        path = os.path.abspath(path)
    res = call("POST", "/submit", {"model_path": path, "note": args.note or ""})
    if args.wait:
        sub = wait_for(res["id"], args.timeout, False, args.json)
        if args.json:
            print(json.dumps(sub, indent=1))
        else:
            print(describe(sub))
        return 0 if sub["status"] == "scored" else 1
    if args.json:
        print(json.dumps(res, indent=1))
    else:
        left = res.get("submissions_left")
        print(f"submitted {path} as submission {res['id']} ({res['status']}, queue position "
              f"{res.get('queue_position', '?')}"
              + (f"; {left} submissions left" if left is not None else "") + ")")
        print(f"check it with: python a2c_client.py status {res['id']}   "
              f"(or: python a2c_client.py wait {res['id']})")
    return 0


def cmd_status(args):
    if args.id is None:
        return cmd_list(args)
    sub = call("GET", f"/submissions/{args.id}")
    print(json.dumps(sub, indent=1) if args.json else describe(sub))
    return 0


def cmd_list(args):
    data = call("GET", "/submissions")
    if args.json:
        print(json.dumps(data, indent=1))
        return 0
    subs = data.get("submissions", [])
    if not subs:
        print("no submissions yet")
    else:
        print(f"{'id':>3}  {'status':<8}  {'score':<28}  model")
        for sub in subs:
            extra = f"  (= {sub['duplicate_of']})" if sub.get("duplicate_of") is not None else ""
            print(f"{sub['id']:>3}  {sub['status']:<8}  {fmt_score(sub):<28}  "
                  f"{sub.get('model_path', '')}{extra}")
    best = data.get("best")
    if best:
        print(f"best: submission {best['id']} with {best['score']:.2f}")
    if data.get("submissions_left") is not None:
        print(f"submissions left: {data['submissions_left']}")
    return 0


def cmd_time(args):
    data = call("GET", "/time")
    if args.json:
        print(json.dumps(data, indent=1))
        return 0
    print(f"time left: {fmt_seconds(data.get('remaining_s'))}")
    if data.get("deadline"):
        print(f"deadline:  {time.strftime('%Y-%m-%d %H:%M:%S UTC', time.gmtime(data['deadline']))}")
    left = data.get("submissions_left")
    print(f"submissions left: {'unlimited' if left is None else left}")
    if data.get("next_submission_in_s"):
        print(f"next submission allowed in: {fmt_seconds(data['next_submission_in_s'])}")
    return 0


def cmd_wait(args):
    sub = wait_for(args.id, args.timeout, False, args.json)
    print(json.dumps(sub, indent=1) if args.json else describe(sub))
    if sub["status"] not in ("scored", "invalid"):
        print(f"still {sub['status']} after {args.timeout:g} s", file=sys.stderr)
        return 1
    return 0 if sub["status"] == "scored" else 1


def build_parser():
    task = os.environ.get("A2C_TASK_ID")
    parser = argparse.ArgumentParser(
        prog="a2c_client.py",
        description="Submit models to the a2c grader" + (f" for task '{task}'" if task else "")
                    + " and check scores and time left.",
        epilog="Environment: A2C_GRADER_URL (http://127.0.0.1:PORT or unix:/path.sock), A2C_TOKEN. "
               "Exit status: 0 ok, 1 refused or failed, 2 usage error, 3 grader unreachable.")
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--json", action="store_true", help="print the grader's JSON answer")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    p = sub.add_parser("submit", parents=[common], help="submit a model folder for scoring",
                       description="Submit a model folder (inside $A2C_OUTPUT_DIR) for scoring.")
    p.add_argument("path", help="model folder, e.g. output/ckpt-1")
    p.add_argument("--note", default="", help="a short note stored with the submission")
    p.add_argument("--wait", action="store_true", help="wait until it is scored")
    p.add_argument("--timeout", type=float, default=None, help="with --wait: give up after S s")
    p.set_defaults(func=cmd_submit)
    p = sub.add_parser("status", parents=[common], help="status and score of a submission",
                       description="Status and score of one submission (without ID: all).")
    p.add_argument("id", nargs="?", type=int)
    p.set_defaults(func=cmd_status)
    p = sub.add_parser("list", parents=[common], help="all submissions with scores")
    p.set_defaults(func=cmd_list)
    p = sub.add_parser("time", parents=[common], help="time and submissions left")
    p.set_defaults(func=cmd_time)
    p = sub.add_parser("wait", parents=[common], help="wait until a submission is scored")
    p.add_argument("id", type=int)
    p.add_argument("--timeout", type=float, default=None, help="give up after S seconds")
    p.set_defaults(func=cmd_wait)
    return parser


def main(argv=None):
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except Refused as exc:
        if getattr(args, "json", False):
            print(json.dumps({"status": exc.status, **exc.body}, indent=1))
        print(refusal_text(exc), file=sys.stderr)
        return 1
    except Unreachable as exc:
        print(str(exc), file=sys.stderr)
        return 3
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
