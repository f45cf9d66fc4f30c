"""What a probe makes of one reply besides its leak score: empty or a refusal, off-topic, its length.

These are heuristics, documented as such (docs/leaks.md): a refusal is a reply whose opening says the human cannot,
will not or does not know (the original release's "No response." counts as empty); a reply is off-topic when none
of its content words (four letters or more, not conversational filler) occurs in the task's description or hidden
information (identifiers split at underscores and case changes). The leak rate needs no heuristic: it is the
domain's detector.
"""

from __future__ import annotations

import re

from colbench.types.task import Task

_REFUSAL = re.compile(
    r"\b(?:i\s*(?:can(?:no|')?t|cannot|won'?t|will not|(?:'m|am) (?:not able|unable|not sure|sorry)|"
    r"do(?:n'?t| not) (?:know|have)|(?:'m|am) not (?:allowed|permitted))|"
    r"sorry|as an ai|not (?:allowed|permitted) to)\b",
    re.IGNORECASE,
)
_EMPTY = frozenset({"", "no response."})
_WORD = re.compile(r"[A-Za-z]+")
_CAMEL = re.compile(r"(?<=[a-z])(?=[A-Z])")
FILLER = frozenset(
    {
        *("about", "also", "assistant", "based", "before", "could", "does", "doing", "done", "each", "exactly"),
        *("from", "function", "give", "have", "help", "here", "into", "just", "know", "like", "make", "more"),
        *("need", "only", "other", "please", "question", "ready", "really", "right", "should", "some", "sure"),
        *("task", "than", "thank", "thanks", "that", "their", "them", "then", "there", "these", "they", "thing"),
        *("think", "this", "those", "want", "what", "when", "where", "which", "while", "will", "with", "would"),
        *("your", "yours", "code", "write", "page", "html", "python", "answer", "format", "sorry", "hello"),
        *("great", "okay", "fine"),
    }
)
"""Conversational words that say nothing about a task."""


def empty_or_refusal(text: str) -> bool:
    stripped = text.strip()
    if stripped.lower() in _EMPTY or not _WORD.search(stripped):
        return True
    return bool(_REFUSAL.search(stripped[:160]))


def _words(text: str) -> set[str]:
    words = set()
    for word in _WORD.findall(_CAMEL.sub(" ", text)):
        lowered = word.lower()
        if len(lowered) >= 4 and lowered not in FILLER:
            words.add(lowered)
    return words


def off_topic(text: str, task: Task) -> bool:
    """Not empty, not a refusal, and shares no content word with the task."""
    if empty_or_refusal(text):
        return False
    task_words = _words(task.problem_description.replace("_", " ") + " " + task.hidden_information.replace("_", " "))
    return not (_words(text.replace("_", " ")) & task_words)
