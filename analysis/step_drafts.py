"""The trajectory's steps while they are being built: the replay of the driver record
(analysis/conversation.py) adds a tool result to the step whose call it answers long after that
step was made, and the native transcript (analysis/transcripts.py) lengthens outputs and adds
exit codes, so a step is a mutable draft until `freeze()` makes the frozen
a2c.contracts.trajectory.Step that trajectory.json is written from.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from a2c.contracts.trajectory import (
    CallExtra,
    Metrics,
    Observation,
    ObservationResult,
    ResultExtra,
    Step,
    StepExtra,
    ToolCall,
)


def _some(extra: Any) -> Any:
    """An extra that says nothing is not written."""
    return extra if extra is not None and extra.to_dict() else None


@dataclass
class DraftCall:
    tool_call_id: str
    function_name: str
    arguments: dict[str, Any]
    extra: CallExtra

    def freeze(self) -> ToolCall:
        return ToolCall(tool_call_id=self.tool_call_id, function_name=self.function_name,
                        arguments=self.arguments, extra=_some(self.extra))


@dataclass
class DraftResult:
    source_call_id: str | None
    content: str
    extra: ResultExtra | None = None

    def freeze(self) -> ObservationResult:
        return ObservationResult(source_call_id=self.source_call_id, content=self.content,
                                 extra=_some(self.extra))


@dataclass
class DraftStep:
    step_id: int
    source: str
    message: str
    timestamp: str | None
    extra: StepExtra
    tool_calls: list[DraftCall] = field(default_factory=list)
    results: list[DraftResult] = field(default_factory=list)
    model_name: str | None = None
    reasoning: str | None = None
    metrics: Metrics | None = None

    def answers(self, call_id: str | None) -> bool:
        """Whether a result of this step already answers the call `call_id`."""
        return any(r.source_call_id == call_id for r in self.results)

    def result_of(self, call_id: str | None) -> DraftResult | None:
        return next((r for r in self.results if r.source_call_id == call_id), None)

    def freeze(self) -> Step:
        results = tuple(r.freeze() for r in self.results)
        return Step(step_id=self.step_id, source=self.source, message=self.message,
                    timestamp=self.timestamp, model_name=self.model_name,
                    reasoning_content=self.reasoning,
                    tool_calls=tuple(c.freeze() for c in self.tool_calls) or None,
                    observation=Observation(results) if results else None,
                    metrics=self.metrics, extra=_some(self.extra))
