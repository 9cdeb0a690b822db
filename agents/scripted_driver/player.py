"""Choosing the reply: the script position from the request alone, then the turn as this
scaffold's own tool call (or fenced command, for text-protocol scaffolds).

Position = the number of model turns already in the conversation, except that a turn with
`until` is held (played again) while the text that came back after its last play does not match
its pattern, at most `max_repeats` times. Replaying the history through that rule is pure, so
the same request always gets the same reply. Requests without tools are side requests (titles,
summaries, quota probes): a short text with the script's side usage, consuming no turn.
"""

from __future__ import annotations

import json
import posixpath
from dataclasses import dataclass, field

from a2c.agents.scripted_driver import tools as T
from a2c.agents.scripted_driver.script import Script, TemplateProblem, Turn
from a2c.wires import Conversation, Usage

END_TEXT = "The scripted session is over."
_MESSAGE_PARAMS = ("message", "final_answer", "summary", "result", "text", "answer")


@dataclass
class Reply:
    """What the model says this time, before it is put into a wire's format."""

    kind: str                       # run | write | say | end | side
    usage: Usage
    text: str = ""
    calls: list[T.Call] = field(default_factory=list)
    turn: int | None = None         # script index; None for side replies
    repeat: int = 0                 # how many times this turn was played before
    via: str = ""                   # the tool used (or "text" / "plain")


def position(script: Script, results: list[str]) -> tuple[int, int]:
    """(turn index, earlier plays of it) after the model turns whose results are `results`."""
    pos, repeats = 0, 0
    for result in results:
        turn = script.turns[pos] if pos < len(script.turns) else None
        if turn is not None and turn.until is not None and not turn.until.search(result or "") \
                and repeats + 1 < turn.max_repeats:
            repeats += 1
        else:
            pos, repeats = pos + 1, 0
    return pos, repeats


def _fenced(lang: str, text: str, command: str) -> str:
    thought = text or "THOUGHT: Running the next step of the plan."
    return f"{thought}\n\n```{lang}\n{command}\n```"


def _absolute(conv: Conversation, path: str) -> str | None:
    if path.startswith("/"):
        return path
    cwd = T.working_dir(conv.prompt)
    return posixpath.normpath(posixpath.join(cwd, path)) if cwd else None


def _command_reply(conv: Conversation, turn: Turn | None, kind: str, command: str,
                   timeout: float | None, text: str, usage: Usage, note: str = "") -> Reply:
    index = turn.index if turn else None
    if not conv.tools:
        lang = T.text_fence(conv.prompt) or "bash"
        return Reply(kind, usage, _fenced(lang, text, command), turn=index, via="text")
    shell = T.find_shell(conv.tools)
    if shell is None:
        return Reply(kind, usage, f"(scripted driver: this scaffold offers no shell tool; wanted "
                                  f"to run: {command})", turn=index, via="plain")
    return Reply(kind, usage, text, [T.shell_call(shell, command, timeout, note)], turn=index,
                 via=shell.name)


def _say(conv: Conversation, turn: Turn | None, text: str, usage: Usage, kind: str) -> Reply:
    index = turn.index if turn else None
    stop = T.sentinel(conv.prompt)
    if stop:
        return _command_reply(conv, turn, kind, stop, None, text, usage, note="finish")
    finish = T.find_finish(conv.tools)
    if finish is not None:
        props = T._props(finish)
        param = next((p for p in _MESSAGE_PARAMS if p in props), None)
        args = T._fill(finish, {param: text} if param else {}, "finish")
        return Reply(kind, usage, "", [T.Call(finish.name, args)], turn=index, via=finish.name)
    return Reply(kind, usage, text, turn=index, via="plain")


def side_reply(script: Script, conv: Conversation) -> Reply:
    try:
        text = script.side_answer(conv.prompt)  # side.text, or computed from the request
    except TemplateProblem as exc:
        text = f"(scripted driver: the script's side.template failed: {exc})"
    if conv.json_reply:
        # Gemini CLI's next-speaker check asks for this object; any other JSON request gets it
        # too, which is valid JSON and says the model is done.
        text = json.dumps({"reasoning": script.side_text, "next_speaker": "user"})
    return Reply("side", script.side_usage, text, via="plain")


def choose(script: Script, conv: Conversation) -> Reply:
    """The reply to `conv` under `script`."""
    # A script that only answers questions (a side.template and no run or write turn: the
    # analysis scripts) plays no fenced commands, so a fence quoted in its question (an agent's
    # README in a digest) does not make it a text-protocol scaffold's turn.
    answers_only = script.side_template is not None and all(t.kind == "say"
                                                            for t in script.turns)
    text_mode = not conv.tools and not answers_only and T.text_fence(conv.prompt) is not None
    if not conv.tools and not text_mode:
        return side_reply(script, conv)
    pos, repeats = position(script, conv.results)
    if pos >= len(script.turns):
        return _say(conv, None, END_TEXT, Usage(), "end")   # past the script: costs nothing
    turn = script.turns[pos]
    if turn.kind == "run":
        # A held turn is played again as a new poll, numbered as a model would: scaffolds stop
        # a run of identical tool calls as a loop (Gemini CLI at five; its warning then reads
        # like the turn's result).
        command = turn.command if not repeats else f"{turn.command}\n# poll {repeats + 1}"
        reply = _command_reply(conv, turn, "run", command, turn.timeout, turn.text,
                               turn.usage, note=turn.name and turn.name.replace("-", " "))
    elif turn.kind == "write":
        writer = T.find_write(conv.tools)
        target = _absolute(conv, turn.path) if writer else None
        if writer is not None and target is not None:
            reply = Reply("write", turn.usage, turn.text, [T.write_call(writer, target,
                                                                        turn.content)],
                          turn=turn.index, via=writer.name)
        else:
            reply = _command_reply(conv, turn, "write", T.heredoc(turn.path, turn.content), None,
                                   turn.text, turn.usage, note=f"write {turn.path}")
    else:
        reply = _say(conv, turn, turn.text, turn.usage, "say")
    reply.repeat = repeats
    return reply
