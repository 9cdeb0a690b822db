"""The evaluation prompt format of level 3, stated once and used everywhere: the generic
`PromptFormat` (each environment kind subclasses it in its own folder, `EnvKind.prompt_format`),
`get_format(kind)`, history truncation and `describe` (what PROMPT_FORMAT.md renders).

The rollout grader, the example rollout script in the workspace and the reference agent all build
prompts with `PromptFormat.messages(...)`, so training and evaluation prompts are identical (the
paper saw >50-point losses from mismatched formats).

A conversation is chat messages:

    system:    the format's instruction
    user:      task message (few-shot examples, if any, then the task and the first observation)
    assistant: action 1
    user:      observation after action 1
    ...
    user:      latest observation  (+ "Valid actions: ..." where the environment lists them)

History truncation (the spec's `grader.env.history`): when the conversation exceeds `max_tokens`,
whole (action, observation) turns are dropped oldest first, always keeping the system message, the
task message (task and few-shot examples) and the first `keep_first_turns` turns, and always the
latest observation. It never raises.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from a2c.contracts.env_info import StepInfo
from a2c.runtime.envs.base import BadAction

OMITTED = "[earlier turns omitted]"


def approx_tokens(text: str) -> int:
    """A tokenizer-free estimate (≈4 characters a token); deterministic."""
    return len(text) // 4 + 1


def clean_text(text: str) -> str:
    """Normalise engine text: drop prompt lines ('>'), status bars and runs of blank lines."""
    lines = []
    for line in text.replace("\r", "").split("\n"):
        s = line.rstrip()
        if s.lstrip().startswith(">"):
            continue
        lines.append(s.strip())
    out = "\n".join(lines)
    out = re.sub(r"\n{3,}", "\n\n", out)
    return out.strip()


@dataclass
class Turn:
    action: str
    observation: str


@dataclass(frozen=True)
class ExampleEpisode:
    """A made-up episode that only shows the layout: `describe` renders its first two steps
    into the workspace's PROMPT_FORMAT.md. `info` is the environment's before the first action;
    each turn is (action, observation, the info after it)."""
    task: str
    first_observation: str
    info: dict
    turns: tuple[tuple[str, str, dict], ...]


class PromptFormat:
    kind = "generic"
    system = ("You are an agent acting in an environment. Reply with exactly one action and "
              "nothing else.")
    list_actions = True          # append "Valid actions: ..." to the latest observation
    max_listed_actions = 40
    example: ExampleEpisode | None = None  # what `describe` renders (default: prompts.EXAMPLE)

    def __init__(self, options: dict | None = None):
        self.options = dict(options or {})

    # -- text of each part ---------------------------------------------------------------------
    def fewshot(self) -> str:
        return ""

    def task_message(self, task: str, first_observation: str) -> str:
        parts = []
        shots = self.fewshot()
        if shots:
            parts.append(shots)
        if task:
            parts.append(f"Goal: {task}")
        parts.append(f"Observation: {first_observation}")
        return "\n\n".join(parts)

    def observation_message(self, observation: str) -> str:
        return f"Observation: {observation}"

    def actions_suffix(self, info: dict) -> str:
        acts = StepInfo.from_dict(info).admissible_commands if self.list_actions else ()
        if not acts:
            return ""
        acts = list(acts)[: self.max_listed_actions]
        return "\n\nValid actions: " + ", ".join(acts) + "\n\nAction:"

    # -- the conversation ----------------------------------------------------------------------
    def messages(self, task: str, first_observation: str, turns: list[Turn], info: dict,
                 *, max_tokens: int | None = None, keep_first_turns: int = 0,
                 count_tokens: Callable[[str], int] = approx_tokens) -> list[dict]:
        """The prompt for the next action (see the module docstring for the layout)."""
        head = [{"role": "system", "content": self.system}]
        first = self.task_message(task, first_observation)
        suffix = self.actions_suffix(info)
        if not turns:
            return head + [{"role": "user", "content": first + suffix}]
        head.append({"role": "user", "content": first})
        pairs = [[{"role": "assistant", "content": t.action},
                  {"role": "user", "content": self.observation_message(t.observation)}] for t in turns]
        pairs[-1][1] = {"role": "user", "content": pairs[-1][1]["content"] + suffix}
        keep = max(0, min(keep_first_turns, len(pairs) - 1))
        fixed, middle, last = pairs[:keep], pairs[keep:-1], pairs[-1]

        def size(msgs):
            return sum(count_tokens(m["content"]) + 4 for m in msgs)

        if max_tokens:
            budget = max_tokens - size(head) - size([m for p in fixed for m in p]) - size(last)
            kept: list[list[dict]] = []
            for pair in reversed(middle):          # newest first
                s = size(pair)
                if s > budget:
                    break
                kept.insert(0, pair)
                budget -= s
            dropped = len(middle) - len(kept)
            middle = kept
            if dropped:
                # mark the cut inside the next user message so the roles still alternate
                target = middle[0] if middle else last
                target = [target[0], {"role": "user",
                                      "content": f"{OMITTED}\n" + target[1]["content"]}]
                if middle:
                    middle[0] = target
                else:
                    last = target
        out = head + [m for p in fixed for m in p] + [m for p in middle for m in p] + last
        return out

    # -- actions -------------------------------------------------------------------------------
    ACTION_RULE = ("The action is the first non-empty line of the model's output, with a leading "
                   "`>`, `Action:` or `Command:` (any case) removed, surrounding backticks, quotes "
                   "and spaces stripped and one trailing period removed. An output with no "
                   "non-empty line is a bad action: the episode ends as failed (score 0).")

    def layout(self) -> list[str]:
        """The message layout in words (Markdown list items) for the workspace documentation."""
        items = [
            f"`system`: always exactly\n   > {self.system}",
            "`user`: `Goal: <goal>` + blank line + `Observation: <first observation>`"
            + (" (after the few-shot examples)" if self.fewshot() else "") + ".",
            "For every action taken so far: `assistant`: the action (the *parsed* action, not "
            "the raw output), then `user`: `Observation: <what the environment answered>`.",
        ]
        if self.list_actions:
            items.append("The latest `user` message (the first one at step 1) ends with a blank "
                         "line, `Valid actions: a, b, c` (the environment's admissible commands, "
                         f"at most {self.max_listed_actions}), a blank line and `Action:`.")
        return items

    def parse_action(self, output: str) -> str:
        """The action in a model output: its first non-empty line, prefixes stripped."""
        for line in (output or "").split("\n"):
            s = line.strip()
            s = re.sub(r"^(>|action\s*:|command\s*:)\s*", "", s, flags=re.I).strip()
            s = s.strip("`\"' ").rstrip(".").strip()
            if s:
                return s
        raise BadAction(f"no action in model output {output[:80]!r}")
