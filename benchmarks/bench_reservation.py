"""What the driver gateway's input bound costs honest budgets, and that dense text cannot beat it
(issue 32).

The gateway reserves a call's input as the UTF-8 bytes of the JSON it forwards plus
ADDED_TOKENS (runtime/driver_gateway/admission.py), where it used to reserve bytes/4 + 16.

1. Tokens per byte. A byte-level BPE tokenizer (SmolLM2's, from the a2c model cache, as
   `a2c models prepare` leaves it; the part is skipped without it) counts tokens of honest text
   (the project's docs, its Python source, real scaffold requests) and of dense text (CJK,
   CJK extension B, emoji, random punctuation, random printable bytes). The bound holds when no
   text has more tokens than bytes; the old estimate is beaten where tokens > bytes/4.

2. An honest session against a budget. An agent's conversation grows by a tool result a turn
   (the project's source files, one after another), each call asking for 4,096 output tokens
   and using 400; the provider bills the tokenizer's count (or bytes/3.5 without it). The
   session runs until admission refuses a call; printed per estimate (bytes/4, the bound, and
   the bound with the provider's count where the bound does not fit): the calls made, the
   budget metered when refused, and the share of the budget left unusable. Against a token
   budget, and against a cost budget at claude-sonnet-4-5's prices with the history read from
   the prompt cache (the reservation prices input at the dearest rate, a cache write).

Usage: python benchmarks/bench_reservation.py
"""

from __future__ import annotations

import json
import random
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _tokenizer():
    try:
        from tokenizers import Tokenizer

        from a2c.paths import cache_dir
    except ImportError:
        return None
    path = cache_dir() / "models" / "smollm2-135m-instruct" / "tokenizer.json"
    return Tokenizer.from_file(str(path)) if path.is_file() else None


def _samples() -> dict[str, str]:
    rnd = random.Random(32)
    docs = "\n".join(p.read_text() for p in sorted((ROOT / "docs").glob("*.md")))[:400_000]
    code = "\n".join(p.read_text() for p in sorted((ROOT / "runtime").rglob("*.py")))[:400_000]
    fixtures = "\n".join(json.dumps(json.loads(p.read_text())["body"])
                         for p in sorted((ROOT / "tests/scripted_driver/fixtures").glob("*.json")))
    return {
        "docs (English)": docs,
        "python source": code,
        "scaffold requests (JSON)": fixtures,
        "CJK": "".join(chr(rnd.randint(0x4E00, 0x9FFF)) for _ in range(20_000)),
        "CJK ext B (4-byte)": "".join(chr(rnd.randint(0x20000, 0x2A6DF)) for _ in range(20_000)),
        "emoji": "".join(chr(rnd.randint(0x1F300, 0x1F6FF)) for _ in range(20_000)),
        "random punctuation": "".join(rnd.choice("!#$%&()*+,-./:;<=>?@[]^_{|}~")
                                      for _ in range(50_000)),
        "random printable": "".join(chr(rnd.randint(0x20, 0x7E)) for _ in range(50_000)),
        "random Latin-1 + Greek": "".join(chr(rnd.randint(0xA1, 0x3FF)) for _ in range(20_000)),
    }


def tokens_per_byte(tok) -> list[tuple[str, int, int]]:
    rows = []
    for name, text in _samples().items():
        rows.append((name, len(text.encode("utf-8")), len(tok.encode(text).ids)))
    return rows


def old_estimate(n: int) -> int:
    return n // 4 + 16


def new_estimate(n: int) -> int:
    from a2c.runtime.driver_gateway.admission import ADDED_TOKENS
    return n + ADDED_TOKENS


def session(estimate, count, budget_tokens=None, budget_usd=None, cap=4096, out=400,
            counted=False):
    """Calls made, metered use at the first refusal, for one estimate: the admission
    arithmetic of Ledger._grant for calls one at a time (`counted`: where the bound does not
    fit, admission.counted_estimate of the provider's count, as the gateway does on the wires
    with a counting route). The conversation's size and tokens are kept as running sums (each
    message counted once)."""
    from a2c.runtime.driver_gateway.admission import counted_estimate
    sonnet = {"input": 3.0, "output": 15.0, "cache_read": 0.30, "cache_write": 3.75}
    files = sorted((ROOT / "runtime").rglob("*.py")) + sorted((ROOT / "analysis").rglob("*.py"))
    head = json.dumps({"model": "m", "max_tokens": cap, "messages": []},
                      separators=(",", ":")).encode()
    first = {"role": "user", "content": "Fine-tune the base model for the task; report."}
    n_bytes = len(head) + len(json.dumps(first, ensure_ascii=False, separators=(",", ":")))
    true_in = count(first["content"]) + 4
    used_tokens, used_usd, calls = 0, 0.0, 0
    cached = 0            # tokens of history already in the prompt cache
    for path in files * 4:
        for message in ({"role": "assistant", "content": f"cat {path.name}"},
                        {"role": "user", "content": path.read_text()[:6000]}):
            n_bytes += 1 + len(json.dumps(message, ensure_ascii=False,
                                          separators=(",", ":")).encode())
            true_in += count(message["content"]) + 4          # + the template's markers
        est = estimate(n_bytes)
        if budget_tokens is not None:
            room = budget_tokens - used_tokens - est
            if room < 1 and counted:
                room = budget_tokens - used_tokens - counted_estimate(true_in, est)
            if room < 1:
                return calls, used_tokens, budget_tokens
            used_tokens += true_in + min(out, room, cap)
        else:
            room_usd = budget_usd - used_usd - est * sonnet["cache_write"] / 1e6
            if room_usd < sonnet["output"] / 1e6 and counted:
                room_usd = budget_usd - used_usd - \
                    counted_estimate(true_in, est) * sonnet["cache_write"] / 1e6
            got = min(cap, int(room_usd / (sonnet["output"] / 1e6)))
            if got < 1:
                return calls, used_usd, budget_usd
            fresh = true_in - cached
            used_usd += (cached * sonnet["cache_read"] + fresh * sonnet["cache_write"] +
                         min(out, got) * sonnet["output"]) / 1e6
            cached = true_in
        calls += 1
    return calls, (used_tokens if budget_tokens is not None else used_usd), \
        (budget_tokens or budget_usd)


def main() -> int:
    tok = _tokenizer()
    if tok is None:
        print("(SmolLM2's tokenizer is not in the a2c model cache: part 1 skipped, part 2 "
              "bills bytes/3.5)")
        count = lambda text: int(len(text.encode()) / 3.5)  # noqa: E731
    else:
        print("1. tokens per UTF-8 byte (SmolLM2 byte-level BPE tokenizer)")
        print(f"{'text':28} {'bytes':>9} {'tokens':>9} {'tok/byte':>9} {'bytes/4 beaten':>15}")
        worst = 0.0
        for name, n_bytes, n_tokens in tokens_per_byte(tok):
            worst = max(worst, n_tokens / n_bytes)
            print(f"{name:28} {n_bytes:9d} {n_tokens:9d} {n_tokens / n_bytes:9.3f} "
                  f"{'yes' if n_tokens > old_estimate(n_bytes) else 'no':>15}")
        print(f"most tokens per byte: {worst:.3f} (the bound holds: {worst <= 1.0})")
        count = lambda text: len(tok.encode(text).ids)  # noqa: E731
    print()
    print("2. an honest session until admission refuses (4,096-token cap, 400 used a call)")
    print("   (bytes+count: the provider's count where the bound does not fit; Anthropic, "
          "Responses and Gemini have a counting route, OpenAI Chat has none)")
    print(f"{'budget':>14} {'estimate':>12} {'calls':>6} {'metered':>12} {'unusable':>9}")
    for kw in ({"budget_tokens": 2_000_000}, {"budget_tokens": 10_000_000},
               {"budget_usd": 5.0}, {"budget_usd": 20.0}):
        for name, est, counted in (("bytes/4", old_estimate, False),
                                   ("bytes", new_estimate, False),
                                   ("bytes+count", new_estimate, True)):
            calls, used, budget = session(est, count, counted=counted, **kw)
            label = (f"{budget:,} tok" if "budget_tokens" in kw else f"${budget:g}")
            shown = f"{used:,}" if "budget_tokens" in kw else f"${used:.3f}"
            print(f"{label:>14} {name:>12} {calls:6d} {shown:>12} "
                  f"{(budget - used) / budget:8.1%}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
