"""Finding a backend human's checkable claims in a reply, on the host, without running anything.

A claim is a call of the task's function with literal arguments and a value the human says it gives:

- a call followed by what it gives: ``f(2, 3) should return 5``, `` `f([])` gives `0` ``, ``f(x) -> y``,
  ``f(x) == y``, ``f(x): y``, "I'd expect f(x) to be y", "calling f(1) yields [1]";
- an answer to the agent's question about one call ("What should f([1, 2]) return?" -> "It should be 3." or a
  bare "3"), and a yes or no to a question that states a value ("Should f(2) return 4?" -> "Yes." / "No.");
- for a function of one parameter, a literal put in prose: "for [1, 2] it returns 3", "given an empty list it
  should return 0", "an empty list gives 0".

What is found here is only read, never run. A negated statement ("should not return 5") and a hedged one ("5 or 6",
"around 5 items") are not claims, or are ``unchecked`` ones: a finding here is never turned into ``false`` by
guesswork. Every scan is bounded (text, calls, nesting). The parts of a claim are read by modules of their own: the
value (``stated_values``), the call (``claim_calls``), the English around them (``claim_phrases``).
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from itertools import islice

from colbench.domains.backend.claim_calls import MAX_CANDIDATES, MAX_SCAN, CallAt, calls_in, normal_call
from colbench.domains.backend.claim_phrases import (
    AFFIRMING,
    ANSWER_CUES,
    ANSWER_LEAD,
    ANSWER_WORD,
    ANY_VERB,
    AS_INPUT,
    BEFORE_CALL,
    BEFORE_NOT_VALUE,
    CONDITIONAL,
    CONNECT,
    DENIAL,
    EMPTY_IF,
    EMPTY_SUBJECT,
    EXPECTING,
    FILLER_STOP,
    FILLER_WORD,
    GIVEN_AFTER,
    IN_OUT,
    LIST_JOINT,
    NEXT_LINE_LABEL,
    NEXT_SENTENCE,
    NO,
    NOT_GIVING,
    PROSE_ARG,
    PROSE_THEN,
    QUESTION_AFTER,
    VALUE_START,
    VALUE_VERB,
    YES,
    denied_before,
    negates,
    unsure,
)
from colbench.domains.backend.stated_values import EMPTY_VALUES, MAX_CALL, QUOTES, Stated, loose_value, read_value
from colbench.domains.backend.values import short_repr

MAX_CLAIMS = 16
"""Claims read from one reply at most."""
_TAIL = 160
"""How far after a call its stated value may start."""
MAX_FILLER = 6
"""Words a call may be followed by before a person says what they got: "when I ran f(2) on my laptop I got 4"."""


@dataclass(frozen=True)
class Found:
    """A claim found in a reply: the ``call`` (source text, normalised), whether it is literal, and what is said."""

    span: tuple[int, int]
    call: str
    literal: bool
    stated: Stated


def _after_call(text: str, end: int, start: int = -1) -> tuple[Stated, int] | None:
    """The value stated right after a call that ends at ``end`` (a few words may come between when a person then
    says what they got: "on my laptop I got 4", "with my old script and it printed 4"; or the next sentence names
    its result: "Say we call f(2). The result should be 4."); ``start``: where the call starts, when known (what
    comes before it may tell how to read what follows)."""
    found = _connected(text, end, start=start) or _generic(text, end)
    if found is not None:
        return found
    following = NEXT_SENTENCE.match(text, end, min(len(text), end + 60))
    if following is not None:
        found = _connected(text, following.end(), start=start)
        if found is not None:
            return found
    pos = end
    for _ in range(MAX_FILLER):
        word = FILLER_WORD.match(text, pos, min(len(text), pos + 60))
        if word is None or word.group("word").lower() in FILLER_STOP or word.group("word").lower().endswith("n't"):
            return None
        pos = word.end()
        found = _connected(text, pos, after_words=True)
        if found is not None:
            return found
    return None


def _connected(text: str, end: int, after_words: bool = False, start: int = -1) -> tuple[Stated, int] | None:
    window = text[end : end + _TAIL]
    connect = CONNECT.match(window)
    if connect is None or (after_words and not (connect.group("subject") or connect.group("strong"))):
        return None  # after a few words only a verb of giving names the call's value, not "is" nor ":"
    if connect.group("to") and not (start >= 0 and EXPECTING.search(text, max(0, start - 40), start)):
        return None  # "I'd expect f(x) to be 3", not "it would be wrong for f(x) to be 3"
    pos = end + connect.end()
    negated = any(connect.group(g) for g in ("neg1", "neg2", "neg3", "neg4"))
    read = read_value(text, pos)
    if read is None:
        return None
    stated, stop = read
    if negated:
        return None  # "should not return 5": says what it is not, the value it gives is in another sentence
    if _another_value(text, stop):
        return None  # "f(1) and f(2) return 3 and 4 respectively", "returns 'a', 'b'": values, not the value
    if connect.group("sym") == ":" and "\n" in text[end:pos]:
        return None  # a heading followed by a block, not f(x): y
    return stated, stop


def _generic(text: str, end: int) -> tuple[Stated, int] | None:
    """A value after a verb of no known list that closes its clause: "f(x) spews out 3.", "f(x) should emit 'a'"."""
    verb = ANY_VERB.match(text, end, min(len(text), end + 60))
    if verb is None or verb.group("verb").lower() in NOT_GIVING or verb.group("verb").lower() in FILLER_STOP:
        return None
    read = read_value(text, verb.end())
    if read is None or not re.match(r"[ \t]*(?:[.,;!)\n]|$)", text[read[1] : read[1] + 4]):
        return None
    if isinstance(read[0].value, str) and read[0].text[:1] not in "'\"`":
        return None
    return read


def _another_value(text: str, stop: int) -> bool:
    """Whether another value follows the one ending at ``stop`` in a list ("3 and 4", "'a', 'b' or 'c'", "3 and 4
    respectively")."""
    if re.match(r"[ \t]*,?[ \t]*respectively", text[stop : stop + 24], re.IGNORECASE):
        return True
    joint = re.match(r"[ \t]*(?:,[ \t]*and|,[ \t]*or|,|and|&|or)[ \t]+", text[stop : stop + 12], re.IGNORECASE)
    if joint is None:
        return False
    pos = stop + joint.end()
    return read_value(text, pos) is not None or loose_value(text, pos) is not None


def _commented(text: str, call: CallAt) -> tuple[Stated, int] | None:
    """``f(2)  # 4`` or ``print(f(2))  # -> 4``: the value in a comment after the call, alone on its line."""
    wrapped = re.search(r"(?<![\w.])print\(\s*$", text[max(0, call.start - 10) : call.start])
    after = re.match(r"(?:\s*\))?" if wrapped else "", text[call.end : call.end + 10])
    pos = call.end + (after.end() if after else 0)
    comment = re.match(
        r"[ \t]*#[ \t]*(?:(?:->|=>|→|==|=|:|(?:should\s+)?(?:returns?|gives?|outputs?|prints?|be|is)|"
        r"expected(?:\s+output)?:?|output:|result:)[ \t]*)?",
        text[pos : pos + 60],
        re.IGNORECASE,
    )
    if comment is None:
        return None
    read = read_value(text, pos + comment.end())
    if read is None or not re.match(r"[ \t]*(?:\n|$)", text[read[1] : read[1] + 40]):
        return None
    return read


def _doctest(text: str, call: CallAt) -> tuple[Stated, int] | None:
    """``>>> f(2)`` and on the next line the value alone, as a doctest or a REPL shows it; or a call and on the
    next line a labelled value ("Input: f(2)" / "Output: 4", "f(2)" / "Expected: 4")."""
    line_start = text.rfind("\n", 0, call.start) + 1
    labelled = NEXT_LINE_LABEL.match(text[call.end : call.end + 60])
    if labelled is not None and labelled.end() > labelled.group(0).rfind("\n") + 1:
        after: re.Match[str] | None = labelled
    elif re.fullmatch(r"[ \t]*(?:>>>|In\s*\[\d*\]:)[ \t]*", text[line_start : call.start]):
        after = re.match(r"[ \t]*\n(?:Out\s*\[\d*\]:)?[ \t]*", text[call.end : call.end + 40])
    else:
        return None
    if after is None:
        return None
    read = read_value(text, call.end + after.end())
    if read is None or not re.match(r"[ \t]*(?:\n|$)", text[read[1] : read[1] + 40]):
        return None
    return read


def _before_call(text: str, call: CallAt) -> tuple[Stated, int] | None:
    """A value stated before the call it is about (``BEFORE_CALL``): the value and where its statement starts."""
    joint = BEFORE_CALL.search(text, max(0, call.start - 80), call.start)
    if joint is None:
        return None
    value_end = joint.start()
    while value_end > 0 and text[value_end - 1] in " \t,":
        value_end -= 1
    clause = re.split(r"[.!?;\n]", text[call.end : call.end + 80])[0]
    if negates(clause):
        return None  # "3 is what f(x) should not return"
    window = max(0, value_end - MAX_CALL - 40)
    starts = list(VALUE_VERB.finditer(text, window, value_end))
    if joint.group("what"):  # "3 is what f(x) gives": the value may open the sentence
        starts += [m for m in VALUE_START.finditer(text, window, value_end) if m.start() >= window]
    best: tuple[Stated, int] | None = None
    for verb in starts:
        read = read_value(text, verb.end())
        if read is None or read[1] != value_end:
            continue
        before = re.split(r"[.!?;\n]", text[max(0, verb.start() - 40) : verb.start()])[-1]
        if negates(before):
            return None  # "I don't get 3 from f(x)"
        best = read[0], verb.end() if verb.re is VALUE_START else verb.start()
    return best


def _respectively(text: str, calls: Sequence[CallAt]) -> list[Found]:
    """ "f(1) and f(2) return 3 and 4 respectively": each call with its value, in order."""
    out: list[Found] = []
    i = 0
    while i < len(calls):
        group = [calls[i]]
        while i + len(group) < len(calls):
            joint = LIST_JOINT.fullmatch(text, group[-1].end, calls[i + len(group)].start)
            if joint is None:
                break
            group.append(calls[i + len(group)])
        if len(group) < 2:
            i += 1
            continue
        i += len(group)
        connect = CONNECT.match(text[group[-1].end : group[-1].end + _TAIL])
        if connect is None or any(connect.group(g) for g in ("neg1", "neg2", "neg3", "neg4")):
            continue
        pos, values = group[-1].end + connect.end(), list[Stated]()
        while len(values) < len(group):
            read = read_value(text, pos) if not values else None
            if values:
                joint = LIST_JOINT.match(text, pos)
                read = read_value(text, joint.end()) if joint else None
                if read is None and joint is not None:  # the follow-word rule does not apply inside a list
                    read = loose_value(text, joint.end())
            elif read is None:
                read = loose_value(text, pos)
            if read is None:
                break
            values.append(read[0])
            pos = read[1]
        tail = re.match(r"[ \t]*,?[ \t]*respectively", text[pos : pos + 24], re.IGNORECASE)
        if len(values) != len(group) or tail is None:
            continue
        first, stop = group[0].start, pos + tail.end()
        if (
            BEFORE_NOT_VALUE.search(text, max(0, first - 60), first)
            or denied_before(text, first)
            or QUESTION_AFTER.match(text, stop)
            or unsure(text, first, stop, [(c.start, c.end) for c in group])
        ):
            continue  # asked, doubted or taken back, as a single claim would be
        for call, value in zip(group, values, strict=True):
            out.append(Found((call.start, pos + tail.end()), normal_call(call.text), call.literal, value))
    return out


def find_claims(
    reply: str,
    names: Sequence[str],
    single_arg: int | None,
    question: str | None = None,
) -> list[Found]:
    """The claims of ``reply`` (see the module docstring), in order, at most ``MAX_CLAIMS``."""
    text = reply[:MAX_SCAN].translate(QUOTES)  # one character for one: spans still index the reply
    found: list[Found] = []
    taken: list[tuple[int, int]] = []
    skipped_until = -1  # where the last call that is not about its own value ended
    calls = list(islice(calls_in(text, names), MAX_CANDIDATES))
    paired = _respectively(text, calls)
    for item in paired:
        found.append(item)
        taken.append(item.span)
    for call in calls:
        if len(found) >= MAX_CLAIMS:
            break
        if any(a <= call.start < b for a, b in taken):
            continue
        if (
            BEFORE_NOT_VALUE.search(text, max(0, call.start - 60), call.start)
            or denied_before(text, call.start)
            or (skipped_until >= 0 and re.fullmatch(r"\s*(?:,|and|or|,\s*and)\s*", text[skipped_until : call.start]))
        ):
            skipped_until = call.end  # "the first item of f(x) is 3", "if f(x) is 3", "the sum of f(1) and f(2)"
            continue
        read = _after_call(text, call.end, call.start) or _doctest(text, call) or _commented(text, call)
        if read is not None:
            stated, stop = read
            span, value_at = (call.start, stop), (max(call.end, stop - len(stated.text) - 2), stop)
        else:
            before = _before_call(text, call)
            if before is None or any(a < call.start and b > before[1] for a, b in taken):
                continue
            stated, start = before
            span, value_at = (start, call.end), (start, call.start)
        if QUESTION_AFTER.match(text, span[1]):
            continue  # "so f(x) gives 3?", "f(x) is 3, right?": asked, not said
        if unsure(text, *span, values=[(call.start, call.end), value_at]):
            continue  # "maybe f(x) gives 3", "f(x) might return 3, not sure": not said as known
        found.append(Found(span, normal_call(call.text), call.literal, stated))
        taken.append(span)
    if single_arg == 1 and names and len(found) < MAX_CLAIMS:
        for item in _prose_claims(text, names[0], taken):
            if len(found) >= MAX_CLAIMS:
                break
            found.append(item)
            taken.append(item.span)
    if question and not found:
        answer = _answer_to(text, question[:MAX_SCAN].translate(QUOTES), names)
        if answer is not None and not _list_marker(text, answer):
            found.append(answer)
    found = [f for f in found if not CONDITIONAL.match(text, f.span[1])]
    found.sort(key=lambda f: f.span)
    return found[:MAX_CLAIMS]


def _list_marker(text: str, answer: Found) -> bool:
    """A reply opening "1. The list ..." numbers its points: the 1 answers nothing."""
    start, stop = answer.span
    return (
        start == 0
        and answer.stated.value == 1
        and not isinstance(answer.stated.value, bool)
        and re.match(r"[.)][ \t]+[A-Z]", text[stop : stop + 3]) is not None
    )


# -- prose: "for [1, 2] it returns 3" ---------------------------------------------------------------------------
def _prose_claims(text: str, name: str, taken: list[tuple[int, int]]) -> Iterator[Found]:
    def free(span: tuple[int, int]) -> bool:
        return all(span[1] <= a or span[0] >= b for a, b in taken)

    # the argument: a value, or a number followed by the words that say what it gives ("given 250 the function
    # gives 3": what follows the number is the sentence's, not a unit's)
    starts = [
        (m, read_value(text, m.end()) or loose_value(text, m.end()))
        for m in islice(PROSE_ARG.finditer(text, 0, MAX_SCAN), MAX_CANDIDATES)
    ]
    for m in islice(VALUE_START.finditer(text, 0, MAX_SCAN), MAX_CANDIDATES):  # "[1, 2] as input gives 3"
        arg = read_value(text, m.end()) or loose_value(text, m.end())
        tail = AS_INPUT.match(text, arg[1]) if arg else None
        if arg is not None and tail is not None:
            starts.append((m, (arg[0], tail.end())))
        joint = IN_OUT.match(text, arg[1]) if arg else None
        out = read_value(text, joint.end()) or loose_value(text, joint.end()) if joint else None
        if arg is not None and out is not None and re.match(r"[ \t]+out(?![\w])", text[out[1] : out[1] + 8]):
            span = (m.end(), out[1] + 4)
            if free(span) and not arg[0].approx and not unsure(text, *span, [(m.end(), out[1])]):
                yield Found(span, f"{name}({short_repr(arg[0].value, MAX_CALL)})", True, out[0])
    for match, arg in starts:
        if arg is None or arg[0].approx or arg[0].percent:
            continue
        then = PROSE_THEN.match(text, arg[1])
        if then is None or then.end() == arg[1]:
            continue
        stated = read_value(text, then.end())
        if stated is None:
            continue
        span = (match.start(), stated[1])
        if not free(span) or negates(text[arg[1] : then.end()]) or QUESTION_AFTER.match(text, stated[1]):
            continue
        if unsure(text, *span, values=[(arg[1] - len(arg[0].text) - 1, arg[1]), (then.end(), stated[1])]):
            continue
        yield Found(span, f"{name}({short_repr(arg[0].value, MAX_CALL)})", True, stated[0])
    for verb in islice(VALUE_VERB.finditer(text, 0, MAX_SCAN), MAX_CANDIDATES):  # "it should return 3 given [1, 2]"
        stated = read_value(text, verb.end())
        given = GIVEN_AFTER.match(text, stated[1]) if stated else None
        arg = read_value(text, given.end()) if given else None
        if stated is None or arg is None or arg[0].approx or arg[0].percent:
            continue
        if not re.match(r"[ \t]*(?:[.,;!\n]|and\b|$)", text[arg[1] : arg[1] + 8]):
            continue
        span = (verb.start(), arg[1])
        clause = re.split(r"[.!?;:,\n]|\bbut\b", text[max(0, verb.start() - 60) : verb.start()])[-1]
        if not free(span) or negates(clause) or DENIAL.search(clause) or QUESTION_AFTER.match(text, arg[1]):
            continue
        if unsure(text, *span, values=[(verb.end(), stated[1]), (given.end() if given else 0, arg[1])]):
            continue
        yield Found(span, f"{name}({short_repr(arg[0].value, MAX_CALL)})", True, stated[0])
    empties = [*islice(EMPTY_SUBJECT.finditer(text, 0, MAX_SCAN), MAX_CANDIDATES)]
    for match in [*empties, *islice(EMPTY_IF.finditer(text, 0, MAX_SCAN), MAX_CANDIDATES)]:
        pos = match.end()
        if match.re is EMPTY_IF:
            then = PROSE_THEN.match(text, pos)
            if then is None or then.end() == pos or negates(text[pos : then.end()]):
                continue
            pos = then.end()
        stated = read_value(text, pos)
        if stated is None:
            continue
        span = (match.start(), stated[1])
        said = not QUESTION_AFTER.match(text, stated[1]) and not unsure(text, *span, [(match.end(), stated[1])])
        if free(span) and said:
            value = EMPTY_VALUES[match.group(1).lower()]
            yield Found(span, f"{name}({value!r})", True, stated[0])


# -- an answer to a question about one call ---------------------------------------------------------------------
def proposals(text: str, names: Sequence[str]) -> dict[str, Stated]:
    """What a turn says its literal calls give, in a question too ("Should f(2) return 4?", "f(2) gives 4, right?"
    propose 4): the value a yes confirms, and the agent's values a grounded human is told the truth about. The
    first value said of each call, in order."""
    text = re.sub(  # "should f(x) return 5 or something else?" proposes 5
        r"(?<=\S)([ \t]+or[ \t]+(?:something|anything)[ \t]+else|[ \t]+or[ \t]+not|[ \t]+or[ \t]+what|,?[ \t]+right)"
        r"(?=[ \t]*\?)",
        lambda m: " " * len(m.group(0)),
        text[:MAX_SCAN].translate(QUOTES),
        flags=re.IGNORECASE,
    )
    out: dict[str, Stated] = {}
    for c in islice(calls_in(text, names), MAX_CANDIDATES):
        read = _after_call(text, c.end, c.start) if c.literal else None
        if read is not None and not read[0].negated:
            out.setdefault(normal_call(c.text), read[0])
    return out


def _answer_to(text: str, question: str, names: Sequence[str]) -> Found | None:
    """The value ``text`` gives in answer to a question about one literal call (or a yes or no to a question that
    states the call's value)."""
    asked = list(
        dict.fromkeys(normal_call(c.text) for c in islice(calls_in(question, names), MAX_CANDIDATES) if c.literal)
    )
    if len(asked) != 1:
        return None
    call = asked[0]
    proposed = next(iter(proposals(question, names).values()), None)
    head = ANSWER_LEAD.match(text)
    pos = head.end() if head else 0
    read = read_value(text, pos)
    if unsure(text, 0, read[1] if read else pos, [(pos, read[1])] if read else []):
        return None  # "no idea", "not sure, maybe 3", "let me check": nothing is said
    if read is not None and not negates(text[:pos]):
        stated, stop = read
        if _answer_like(text, pos, stop):
            return Found((pos, stop), call, True, stated)
    if read is None:
        short = _short_answer(text)
        if short is not None:
            return Found(short[0], call, True, short[1])
    if proposed is not None:
        yes, no = YES.match(text), NO.match(text)
        if yes and not negates(text[: yes.end() + 12].lower().replace("not quite", "")):
            return Found((yes.start(), yes.end()), call, True, proposed)
        if no and read is None:
            negated = Stated(proposed.value, proposed.text, proposed.approx, proposed.percent, negated=True)
            return Found((no.start(), no.end()), call, True, negated)
    return None


def _answer_like(text: str, start: int, stop: int) -> bool:
    """A value read at the start of a reply answers the question when what follows it ends the statement (not
    "3 of them are...", which ``read_value`` already refuses, nor "2 things: ...", nor a numbered list's "1)" or
    "1." before the next item)."""
    rest = text[stop : stop + 3]
    if re.fullmatch(r"\d{1,2}", text[start:stop].strip()) and (
        rest[:1] == ")" or (rest[:1] == "." and re.search(r"(?:^|\n)[ \t]*\d{1,2}[.)][ \t]", text[stop:]))
    ):
        return False
    if start > 120 or QUESTION_AFTER.match(text, stop) or (rest and rest[0] not in " .,;!)\n`'\""):
        return False
    words = re.match(r"[ \t]+([A-Za-z][\w']*(?:\s+[A-Za-z][\w']*){0,2})", text[stop : stop + 40])
    return words is None or bool(AFFIRMING.match(words.group(1)))


def _short_answer(text: str) -> tuple[tuple[int, int], Stated] | None:
    """A short first sentence whose last word is the value: "I'd go with 3.", "Evaluates to 3." (a literal, not a
    word; no denial, no doubt before it)."""
    pos = 0
    for _ in range(6):
        word = ANSWER_WORD.match(text, pos, min(len(text), pos + 40))
        if word is None or word.group(1).lower() in FILLER_STOP or DENIAL.fullmatch(word.group(1)):
            return None
        pos = word.end()
        value = read_value(text, pos)
        if value is None:
            continue
        if word.group(1).lower() not in ANSWER_CUES:
            return None  # "see line 12", "it takes 3": a number of something else
        if not re.match(r"[ \t]*(?:[.!]|$|\n)", text[value[1] : value[1] + 4]):
            return None
        if isinstance(value[0].value, str) and value[0].text[:1] not in "'\"`":
            return None
        return (pos, value[1]), value[0]
    return None
