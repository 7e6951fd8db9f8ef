"""Replaying recorded agent conversations through a middleware stack, offline.

``replay(transcript, middleware=[...])`` answers "what would this policy have done on these real
conversations": it reads OpenAI chat-completions, OpenAI Responses API and Anthropic transcripts
(`read_transcript`), runs every recorded turn through a `TurnRunner` whose model proposes exactly
the recorded calls and whose tools return the recorded results, and reports each recorded
call's stored record and verdict (`ReplayReport`), the word ``loopware run``, the audit log and
tracing use for the same call.
"""

from ._engine import policy_labels as policy_labels
from ._engine import replay as replay
from ._engine import replay_async as replay_async
from ._outcome import CallOutcome as CallOutcome
from ._outcome import ReplayReport as ReplayReport
from ._outcome import ReplayVerdict as ReplayVerdict
from ._outcome import TurnDecision as TurnDecision
from ._outcome import TurnOutcome as TurnOutcome
from ._transcript import parse_transcript as parse_transcript
from ._transcript import read_transcript as read_transcript
from ._types import RecordedCall as RecordedCall
from ._types import RecordedStep as RecordedStep
from ._types import RecordedTurn as RecordedTurn
from ._types import Transcript as Transcript
from ._types import TranscriptFormat as TranscriptFormat
from ._types import TranscriptIssue as TranscriptIssue

__all__ = [
    "CallOutcome",
    "RecordedCall",
    "RecordedStep",
    "RecordedTurn",
    "ReplayReport",
    "ReplayVerdict",
    "Transcript",
    "TranscriptFormat",
    "TranscriptIssue",
    "TurnDecision",
    "TurnOutcome",
    "parse_transcript",
    "policy_labels",
    "read_transcript",
    "replay",
    "replay_async",
]

for _public in (
    CallOutcome,
    RecordedCall,
    RecordedStep,
    RecordedTurn,
    ReplayReport,
    Transcript,
    TranscriptIssue,
    TurnDecision,
    TurnOutcome,
    parse_transcript,
    policy_labels,
    read_transcript,
    replay,
    replay_async,
):
    _public.__module__ = "middleware.transcripts"
