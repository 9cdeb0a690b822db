"""Claims about a run's outcome, typed and checked against what the runtime recorded.

A citation proves that a quote exists, not that a claim is true: an agent that writes "GRPO only,
+97 points, held-out data clean" into its workspace can be cited word for word. So every claim of
a case study or a review has a kind, and a claim about an outcome is checked against the facts
the runtime owns, whatever it cites (report.json, built from the verified record):

  score          the baseline, each submission's score, the best and the final score, and the
                 improvement (the journal, the results, run.json): every score or gain the text
                 states must be one of them, and "beat the baseline" must have happened;
  route          the training methods the route analysis found in the code of each submission
                 (report.route): each method named must be there, "X only" must be all of it;
  compliance     the route's compliance verdict under the run's mode (report.route.compliance);
  data_use,      the contamination check (report.contamination): "held-out data clean" is false
  contamination  when it flagged the run, "the agent used held-out data" true;
  other          anything else: verified by its citations, as before.

The kind comes from the model (`kind`) and from the text itself (`classify`: numbers in a score's
context, method names, held-out/contamination words, compliance words), so a claim labelled
`other` that states a score is checked as one. Each check is `true`, `false` (contradicted: the
record's fact is shown) or `unverifiable` (the record cannot decide); the claim's `status` is
`false` when any check is, `verified` (true against the record) when all are, else
`unverifiable`. Citations of agent-written text (analysis/citations.py, `author: agent`) are
labelled as such and never make an outcome claim verified.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from .checked_claims import (
    FALSE,
    UNVERIFIABLE,
    VERIFIED,
    CheckedClaim,
    OutcomeCheck,
    StatedClaim,
)
from .citations import Evidence
from .claims_text import (
    compliance_stance,
    data_stance,
    direction,
    mentions_heldout,
    methods_named,
    mode_named,
    reported,
    score_numbers,
)
from .report_doc import Contamination, Report

KINDS = ("score", "route", "data_use", "compliance", "contamination", "other")
OUTCOME = KINDS[:-1]
ALIASES = {"improvement": "score", "scores": "score", "result": "score", "outcome": "score",
           "training_method": "route", "method": "route", "methods": "route",
           "training": "route", "data": "data_use", "heldout": "data_use",
           "held_out": "data_use", "mode": "compliance", "rules": "compliance"}
# the kind a review rule's verdict is about, whatever its text says
RULE_KINDS = {"heldout_data": ("data_use",), "mode_break": ("compliance",)}
AGENT_ONLY = "its evidence is agent-written: it shows only that the agent wrote this"


def stated_kind(value: Any) -> str | None:
    """The model's label for a claim, as one of KINDS (None when it gave none that fits)."""
    if not isinstance(value, str):
        return None
    key = re.sub(r"[\s/-]+", "_", value.strip().lower())
    key = ALIASES.get(key, key)
    return key if key in KINDS else None


def classify(text: str) -> list[str]:
    """The outcome kinds a claim's text is about, whatever the model labelled it."""
    text = reported(text)
    out = []
    if score_numbers(text) or direction(text) is not None:
        out.append("score")
    if methods_named(text)[0] or methods_named(text)[1]:
        out.append("route")
    heldout, contamination = mentions_heldout(text)
    if heldout:
        out.append("data_use")
    if contamination:
        out.append("contamination")
    if mode_named(text) or compliance_stance(text):
        out.append("compliance")
    return out


def _num(v: Any) -> float | None:
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None


def _fmt(v: float | None) -> str:
    return "none" if v is None else f"{v:g}"


def _close(claimed: float, values: list[float]) -> bool:
    for v in values:
        for scaled in (v, v * 100, v / 100):
            if abs(claimed - scaled) <= max(0.051, 0.005 * abs(scaled)):
                return True
    return False


@dataclass(frozen=True)
class ContaminationFact:
    """What the report's contamination section says, as a claim is checked against it."""

    available: bool
    flagged: bool
    n_items: Any
    counted: Any                 # the run's counted matches (older reports: all matches)
    first_place: str | None      # where the first match was found

    @classmethod
    def of(cls, section: Contamination) -> ContaminationFact:
        where = [w for m in section.run.matched for w in m.where][:1]
        return cls(available=bool(section.available), flagged=bool(section.flagged),
                   n_items=section.n_items, counted=section.run.counted_items,
                   first_place=(where[0].get("path") or where[0].get("kind")) if where
                   else None)


class Facts:
    """The runtime-owned facts of one run, from its report (built from the verified record)."""

    def __init__(self, report: Report):
        scores = report.scores
        self.baseline = _num(scores.baseline)
        self.best = _num(scores.best)
        self.final = _num(scores.final)
        self.improvement = _num(scores.improvement)
        self.best_id = scores.best_submission
        subs = sorted(report.submissions, key=lambda s: s.index or 0)
        self.scores = {str(s.id): _num(s.score) for s in subs
                       if s.valid and _num(s.score) is not None}
        self.route_methods = list(report.route.methods)
        compliance = report.route.compliance
        self.compliance = compliance.get("verdict")
        self.compliance_detail = compliance.get("detail", "")
        self.mode = report.run.mode
        self.contamination = ContaminationFact.of(report.contamination)

    # ------------------------------------------------------------------ score
    def score_fact(self) -> str:
        best = f"best {_fmt(self.best)}" + (f" (submission {self.best_id})" if self.best_id else "")
        valid = ", ".join(_fmt(v) for v in self.scores.values()) or "none"
        return (f"report.scores, from the journal and results: baseline {_fmt(self.baseline)}, "
                f"{best}, improvement {_fmt(self.improvement)}; valid scores {valid}")

    def check_score(self, text: str) -> tuple[str, str]:
        seq = [v for v in [self.baseline, *self.scores.values()] if v is not None]
        values = seq + [v for v in (self.best, self.final) if v is not None]
        gains = [b - a for i, a in enumerate(seq) for b in seq[i + 1:]]
        over_base = [v - self.baseline for v in self.scores.values()] \
            if self.baseline is not None else []
        named = {"best": self.best, "final": self.final, "baseline": self.baseline}
        checked = 0
        for n in score_numbers(text):
            checked += 1
            if n.gain:
                pool = over_base if n.about_baseline else gains
                ok = _close(n.value, pool)
            elif n.names in named:
                ok = named[n.names] is not None and _close(n.value, [named[n.names]])
            elif n.names in self.scores:
                ok = _close(n.value, [self.scores[n.names]])
            else:
                ok = _close(n.value, values)
            if not ok:
                what = "gain" if n.gain else "score"
                return "false", (f"{n.shown} is no {what} the record holds "
                                 f"({self.score_fact()})")
        beat = direction(text)
        if beat is not None:
            checked += 1
            if self.baseline is None:
                return "unverifiable", "the record has no baseline score"
            gained = self.improvement is not None and self.improvement > 0
            if beat != gained:
                said = "beat the baseline" if beat else "did not beat the baseline"
                return "false", f"it says the run {said} ({self.score_fact()})"
        if not checked:
            return "unverifiable", f"it states no score or gain to check ({self.score_fact()})"
        return "true", self.score_fact()

    # ------------------------------------------------------------------ route
    def methods(self) -> set[str]:
        out = set()
        for m in self.route_methods:
            out.add("GRPO" if m.startswith("GRPO") else m)
        return out

    def route_fact(self) -> str:
        found = ", ".join(sorted(self.methods())) or "no training method"
        return f"the route analysis (report.route, the code of each submission) found {found}"

    def check_route(self, text: str) -> tuple[str, str]:
        named, denied, only = methods_named(text)
        record = self.methods()
        if not record:
            return "unverifiable", self.route_fact()
        rl = any(m in ("GRPO", "PPO", "RLOO", "Online DPO", "DPO", "KTO", "ORPO", "CPO",
                       "Policy gradient (custom)") for m in record)
        for m in named:
            if not (rl if m == "RL" else m in record):
                return "false", f"{m} is not in it: {self.route_fact()}"
        for m in denied:
            if (rl if m == "RL" else m in record):
                return "false", f"it says no {m}, but {self.route_fact()}"
        extra = sorted(record - set(named) - {"Reward model"})
        if only and extra and not (extra == ["Policy gradient (custom)"] and "RL" in named):
            return "false", f"it says only {', '.join(named)}, but {self.route_fact()}"
        return "true", self.route_fact()

    # ------------------------------------------------------------------ compliance
    def compliance_fact(self) -> str:
        verdict = "nothing" if self.compliance is None else self.compliance
        return (f"the run's mode is {self.mode} (run.json) and its compliance check says "
                f"{verdict}: {self.compliance_detail}").rstrip(": ")

    def check_compliance(self, text: str, stance: str | None) -> tuple[str, str]:
        said = mode_named(text)
        if said and self.mode and said != self.mode:
            return "false", f"it names the mode {said}: {self.compliance_fact()}"
        verdict = self.compliance
        stance = stance or compliance_stance(text)
        if stance is None:
            return ("true" if said else "unverifiable"), self.compliance_fact()
        if verdict == "n/a":               # the mode allows any route
            return ("true" if stance == "complies" else "false"), self.compliance_fact()
        if verdict not in ("complies", "violates"):
            return "unverifiable", self.compliance_fact()
        return ("true" if stance == verdict else "false"), self.compliance_fact()

    # ------------------------------------------------------------------ data use
    def data_fact(self) -> str:
        c = self.contamination
        if not c.available:
            return "the contamination check could not run (the record holds no held-out items)"
        at = f", e.g. in {c.first_place}" if c.first_place else ""
        if c.flagged:
            return (f"the contamination check (report.contamination) flagged the run: "
                    f"{c.counted} of {c.n_items} held-out items found in what the agent "
                    f"wrote{at}")
        return (f"the contamination check (report.contamination) did not flag the run "
                f"({c.n_items} held-out items checked)")

    def check_data(self, text: str, stance: str | None) -> tuple[str, str]:
        c = self.contamination
        stance = stance or data_stance(text)
        if stance not in ("clean", "used"):
            return "unverifiable", f"it says neither way; {self.data_fact()}"
        if not c.available:
            return "unverifiable", self.data_fact()
        if c.flagged:
            return ("true" if stance == "used" else "false"), self.data_fact()
        if stance == "clean":
            return "true", self.data_fact()
        return "unverifiable", f"the record does not show it: {self.data_fact()}"


class ClaimChecker:
    """Checks claims: citations against the record (Evidence), outcomes against its facts."""

    def __init__(self, ev: Evidence, report: Report):
        self.ev = ev
        self.facts = Facts(report)

    def _check(self, kind: str, text: str, stance: str | None) -> tuple[str, str]:
        f = self.facts
        if kind == "score":
            return f.check_score(text)
        if kind == "route":
            return f.check_route(text)
        if kind == "compliance":
            if stance in ("clean", "violation"):
                stance = "complies" if stance == "clean" else "violates"
            if stance == "unclear":
                return "unverifiable", f"an unclear verdict asserts neither; {f.compliance_fact()}"
            return f.check_compliance(text, stance)
        if stance in ("clean", "violation"):
            stance = "clean" if stance == "clean" else "used"
        if stance == "unclear":
            return "unverifiable", f"an unclear verdict asserts neither; {f.data_fact()}"
        return f.check_data(text, stance)

    def check(self, claim: Any, rule: str | None = None, stance: str | None = None
              ) -> CheckedClaim:
        """The claim with its citations checked, its kind, each outcome check and its status.
        `rule`: a review rule (its kind applies whatever the text says); `stance`: the verdict
        (clean | violation | unclear) the rule's check takes instead of the text's wording."""
        out = self.ev.check_claim(claim)
        given = StatedClaim.of(claim).kind
        stated = stated_kind(given)
        implied = RULE_KINDS.get(rule or "", ())
        kinds = list(dict.fromkeys([*implied, *([stated] if stated else []),
                                    *classify(out.text)]))
        outcome = [k for k in kinds if k in OUTCOME]
        out.kind = (outcome or [stated or "other"])[0]
        if isinstance(given, str):
            out.stated_kind = given[:40]
        resolved = [c for c in out.citations if c.verified]
        agent_only = bool(resolved) and all(c.author == "agent" for c in resolved)
        if not outcome:
            if out.status == VERIFIED:
                out.basis = "agent-written" if agent_only else "record"
            return out
        checks, seen = [], set()
        for kind in outcome:
            group = "data_use" if kind == "contamination" else kind
            if group in seen:
                continue
            seen.add(group)
            result, fact = self._check(kind, reported(out.text),
                                       stance if kind in implied else None)
            checks.append(OutcomeCheck(kind, result, fact))
        out.checks = checks
        cite_why, out.why = out.why, None
        false = [c for c in checks if c.result == "false"]
        if false:
            out.status = FALSE
            out.why = "contradicted by the record: " + "; ".join(c.fact for c in false)
        elif all(c.result == "true" for c in checks):
            out.status, out.basis = VERIFIED, "record"
        else:
            out.status = UNVERIFIABLE
            why = [f"the record cannot decide it: {c.fact}" for c in checks
                   if c.result != "true"]
            if agent_only:
                why.append(AGENT_ONLY)
            if cite_why and cite_why != "cites no evidence":
                why.append(cite_why)
            out.why = "; ".join(why)
        return out

