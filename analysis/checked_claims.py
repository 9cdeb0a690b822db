"""A model's claim as it stated it (`StatedClaim`, `StatedCitation`: its answer's JSON, read
once) and once checked against the record, typed: each citation resolved
(`CheckedCitation`: verified or unverifiable, and who wrote what it quotes), each outcome check
(`OutcomeCheck`: true, false or unverifiable, with the record's fact) and the claim itself
(`CheckedClaim`: its status, why, its kind). analysis/citations.py resolves citations,
analysis/claims.py checks outcomes; narrate.py and review.py write them (`to_dict`) into
narrative.json and review.json, in the key order those files have always had.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from a2c.contracts.records import Record

VERIFIED = "verified"
UNVERIFIABLE = "unverifiable"
FALSE = "false"


@dataclass(frozen=True)
class StatedCitation(Record):
    """A citation as the model gave it: {kind, ref, quote} (any values: the model's JSON)."""

    kind: Any = None
    ref: Any = None
    quote: Any = None


@dataclass(frozen=True)
class StatedClaim(Record):
    """A claim as the model gave it: its text, its kind (its own label) and its citations."""

    text: Any = None
    kind: Any = None
    citations: Any = None

    @classmethod
    def of(cls, value: Any) -> StatedClaim:
        """The claim an answer holds: an object, or a bare string (no citations)."""
        if isinstance(value, StatedClaim):
            return value
        if isinstance(value, dict):
            return cls.from_dict(value)
        return cls(text=value if isinstance(value, str) else str(value), citations=[])


@dataclass
class CheckedCitation:
    kind: Any
    ref: Any
    quote: str
    status: str = UNVERIFIABLE
    why: str | None = None
    author: str | None = None        # runtime | agent (of what it quotes), when verified
    label: str | None = None         # the agent-written label, when the agent wrote it

    @property
    def verified(self) -> bool:
        return self.status == VERIFIED

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"kind": self.kind, "ref": self.ref, "quote": self.quote,
                               "status": self.status}
        for key, value in (("why", self.why), ("author", self.author), ("label", self.label)):
            if value is not None:
                out[key] = value
        return out


@dataclass(frozen=True)
class OutcomeCheck:
    kind: str
    result: str                      # true | false | unverifiable
    fact: str


@dataclass
class CheckedClaim:
    text: str
    citations: list[CheckedCitation] = field(default_factory=list)
    status: str = UNVERIFIABLE
    why: str | None = None
    kind: str | None = None
    stated_kind: str | None = None   # the model's own label, when it gave one
    basis: str | None = None         # record | agent-written, when verified
    checks: list[OutcomeCheck] | None = None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"text": self.text,
                               "citations": [c.to_dict() for c in self.citations],
                               "status": self.status}
        if self.checks is None:         # citations only: why (theirs) before the kind
            tail = (("why", self.why), ("kind", self.kind), ("stated_kind", self.stated_kind),
                    ("basis", self.basis))
        else:                           # checked against the record: its why after the checks
            tail = (("kind", self.kind), ("stated_kind", self.stated_kind),
                    ("checks", [{"kind": c.kind, "result": c.result, "fact": c.fact}
                                for c in self.checks]),
                    ("why", self.why), ("basis", self.basis))
        out.update((key, value) for key, value in tail if value is not None)
        return out
