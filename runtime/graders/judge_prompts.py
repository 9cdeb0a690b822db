"""The pairwise judge's prompt: what the judge model is asked, and the versions that key the cache.

`PROMPT_VERSION` and `PARSER_VERSION` are part of every cached judgment's key
(`judge_client.JudgeClient.cache_key`): change the wording or the parsing and the cache misses.
"""

from __future__ import annotations

PROMPT_VERSION = "a2c-pairwise-1"
# How a reply becomes a judgment (verdict patterns, which token's logprobs); part of the cache key.
PARSER_VERSION = 2
SYSTEM_PROMPT = (
    "You are a careful and impartial judge of the quality of answers given by AI assistants. "
    "You compare two answers to the same instruction and decide which one a thoughtful human "
    "would prefer: the more helpful, correct, honest and relevant one. Do not let the order of the "
    "answers or their length influence you.")
USER_TEMPLATE = (
    "## Instruction\n\n{instruction}\n\n"
    "## Answer A\n\n{output_a}\n\n"
    "## Answer B\n\n{output_b}\n\n"
    "## Task\n\nWhich answer is better? Reply with exactly one letter: A or B.")

# The judge templates a spec may name (`grader.params.judge_template`).
JUDGE_TEMPLATES = ("alpaca_eval",)
