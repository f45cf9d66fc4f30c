"""The English around a backend human's claims: what joins a call to the value it gives ("should return", "->",
"I got"), what makes a statement no claim (a question, a negation, a doubt, a condition, a retraction), a yes or a
no to a question, and a literal put in prose ("for [1, 2] it returns 3"). Regular patterns only: the finders that
read them are in ``claim_finder``.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from colbench.domains.backend.stated_values import MAX_CALL

# -- what joins a call to the value it gives ---------------------------------------------------------------
_STRONG_VERB = (
    r"(?:returns?|returned|gives?|gave|yields?|outputs?|produces?|"
    r"prints?|printed|shows?|showed|displays?|displayed|evaluates?\s+to|evaluated\s+to|equals?|"
    r"is\s+equal\s+to|be\s+equal\s+to|results?\s+in|resulted\s+in|comes?\s+(?:out|back)\s+(?:as|to|with)|comes?\s+to|"
    r"came\s+(?:out|back)\s+(?:as|to|with)|comes?\s+out|came\s+out|spits?\s+(?:out|back)|spat\s+(?:out|back)|becomes?|"
    r"ends?\s+up\s+(?:as|with|being)|ended\s+up\s+(?:as|with|being)|hands?\s+back|sends?\s+back|works?\s+out\s+to|"
    r"amounts?\s+to|adds?\s+up\s+to)"
)
_MODAL = (
    r"(?:should|would|will|must|shall|could|can|might|may|ought\s+to|(?:is\s+|are\s+|'s\s+)?(?:going|supposed|expected|meant)"
    r"\s+to|(?:is\s+|'s\s+)?gonna|(?:has\s+|'s\s+)?gotta|has\s+to|needs\s+to|has\s+got\s+to|'d|'ll)"
)
_NEGATION = (
    r"(?:does\s*n[o']t|do\s*n[o']t|did\s*n[o']t|is\s*n[o']t|should\s*n[o']t|would\s*n[o']t|wo\s*n[o']t|won't|"
    r"can\s*n[o']t|must\s*n[o']t|never|shouldn't|wouldn't|doesn't|didn't|isn't|won’t|doesn’t|shouldn’t|isn’t)"
)
_ADVERB = (
    r"(?:also|just|only|simply|still|really|actually|definitely|always|correctly|then|now|probably|basically|obviously|"
    r"clearly|surely|certainly|indeed|literally|apparently|supposedly|usually|normally)"
)
_RESULT_NOUN = r"(?:result|output|return\s+value|return|value|answer|outcome|response)"
CONNECT = re.compile(
    r"(?:[`\"'”’]|\*{1,2}|_{1,2})?[ \t]*(?:,|\.\.\.+|…|[—–]|[ \t]-(?=[ \t]))?\s*(?:"
    r"(?P<sym>==>|-->|--|==|=>|->|→|⇒|⟶|=|:|\||[—–])(?:\s*(?:(?:should|would|will|must)\s+)?(?:returns?|gives?|be|yields?|"
    r"outputs?|produces?)(?![\w]))?"
    # the call's result named: "f(x)'s result is", "f(x), the result is"
    r"|(?P<possessive>(?:'s|’s|,?\s*(?:its|the))\s+(?:expected\s+|correct\s+)?" + _RESULT_NOUN + r"\s+"
    r"(?:is|should\s+be|would\s+be|will\s+be|must\s+be|=|:))"
    # a person getting the value: "you should get", "I got", "we'd see", "it printed", "I'm expecting"
    r"|(?P<subject>(?:and|then|so)\s+(?:just\s+)?(?:got|get|gets|saw|see|received|ended\s+up\s+with)"
    r"|(?:(?:and|so|then)\s+)?(?:then\s+)?(?:"
    r"(?:i'm|i\s+am|we're|we\s+are|i\s+was|we\s+were|you're|you\s+are|you'll\s+be|you'd\s+be)\s+"
    r"(?:expecting|getting|seeing|receiving)"
    r"|(?:you|we|i|one|it|they)\s*"
    r"(?:" + _MODAL + r"\s+(?P<neg3>not\s+|never\s+)?|(?P<neg4>" + _NEGATION + r")\s+)?(?:" + _ADVERB + r"\s+)?"
    r"(?:get|gets|got|getting|see|sees|saw|receive|receives|received|expect|expected|want|wanted|need|"
    r"print|prints|printed|show|shows|showed|return|returns|returned|give|gives|gave|output|outputs|"
    r"spits?\s+out|spat\s+out|end\s+up\s+with|ended\s+up\s+with)"
    r"(?:\s+(?:it|that|this|the\s+result|the\s+output))?(?:\s+to\s+(?:get|see|be|return|give|equal|output))?))"
    r"|(?:(?:it|this|that|which|then|that\s+one|this\s+one|the\s+" + _RESULT_NOUN + r")(?:\s+|(?='s|’s)))?"
    r"(?:" + _MODAL + r"\s+(?P<neg1>not\s+|never\s+)?(?:" + _ADVERB + r"\s+)?)?"
    r"(?P<neg2>" + _NEGATION + r"\s+)?"
    r"(?:" + _ADVERB + r"\s+)?(?:(?P<strong>" + _STRONG_VERB + r")|be|is|are|was|'s|’s)"
    r"|\s+should\s+(?:be|return|give|yield|equal|output|produce|evaluate\s+to|come\s+out\s+as)"
    r"|(?P<to>\s+to\s+(?:(?:also|just|only|always)\s+)?(?:be|return|give|yield|equal|output|produce|evaluate\s+to|"
    r"come\s+out\s+(?:as|to)|come\s+back\s+(?:as|with)|end\s+up\s+(?:as|with)))"
    r")(?(sym)|(?![\w]))(?:\s+(?:you|me|us|back|out|exactly|just))?\s*",
    re.IGNORECASE,
)
FILLER_WORD = re.compile(r"[ \t]*,?[ \t]*(?P<word>[A-Za-z][\w']*)")
FILLER_STOP = frozenset(
    re.findall(
        r"\S+",
        "not never no nor n't don't doesn't didn't isn't wasn't won't shouldn't wouldn't can't cannot but or if "
        "unless whether than of twice times plus minus squared doubled halved half double triple each per both all "
        "sum total average mean length size count first last second third item items element elements key keys "
        "without except instead rather whose which where while and",
    )
)
# what may stand right before a call whose value is stated after it without making it another claim
BEFORE_NOT_VALUE = re.compile(
    r"(?:(?<![\w])(?:if|whether|unless|suppose|supposing|assuming|assume|in\s+case|once|until|not|twice|half|double|"
    r"triple|thrice)"
    r"|(?:^|[.!?:;\n(]|(?<![\w])(?:so|and|but|also|then|ok|okay|hmm|wait|and\s+so|why|how|how\s+come|when|where|what|"
    r"which),?)\s*(?:does|do|did|should|would|will|is|can|could|shall|must|might|may|was|were|are|doesn't|don't|"
    r"didn't|shouldn't|wouldn't|won't|isn't|can't|couldn't|aren't|wasn't|does\s+not|should\s+not|would\s+not)"
    r"|(?<![\w])(?:the\s+)?(?:(?:first|second|third|last|final|next|\w+(?:st|nd|rd|th))\s+)?"
    r"(?:items?|elements?|entry|entries|keys?|part|parts|length|len|size|sum|type|count|number|digits?|characters?|"
    r"letters?|words?|lines?|index|indices|sign|square|root|log|half|rest|max|min|maximum|minimum|average|mean|"
    r"total|values|first|last|second|third|middle|end|start|beginning|tail|head|one)\s+(?:of|in|from|inside)"
    r"(?:\s+(?:the\s+)?(?:result|output|value|list|dict|tuple|string)\s+(?:of|from))?"
    r"|[\d)\]}][ \t]*[-+*/%]|\w[-+*/%])"
    r"(?:\s+(?:calling|running|running\s+a\s+call\s+to))?[\s`\"']*$",
    re.IGNORECASE,
)

NEXT_SENTENCE = re.compile(
    r"[`\"')]*[ \t]*(?:[.;][ \t]+(?=(?:(?:and|so|then)\s+)?(?:the\s+(?:expected\s+|correct\s+)?"
    + _RESULT_NOUN
    + r"|it)\s)"
    r"|\?[ \t]+(?=(?:(?:well|hmm|oh|ok|so)[,.!]?\s+)?(?:the\s+(?:expected\s+|correct\s+)?" + _RESULT_NOUN + r"|it|that)"
    r"(?:\s|'s|’s|'d|'ll)))",
    re.IGNORECASE,
)

EXPECTING = re.compile(
    r"(?<![\w])(?:expect|expects|expected|expecting|want|wants|wanted|need|needs|like|wish|prefer|believe|assume|"
    r"consider|require|requires|think|know|knew|get|make|have|find|found|see|saw|saw|mean|meant|intend|intended|"
    r"asked|ask|tell|told|designed)\s+(?:that\s+)?[`\"']?$",
    re.IGNORECASE,
)

# a verb of no known list between a call and a value that closes the clause ("f(x) spews out 3."); the verbs that
# say something else about a call ("f(x) takes 3", "f(x) has 2") are not read
ANY_VERB = re.compile(
    r"[ \t]+(?:(?:should|would|will|must|'d|'ll|can)\s+)?(?:(?:just|also|then|always|still|really|basically)\s+)?"
    r"(?P<verb>[a-z]{3,}(?:s|ed)|(?<=should\s)[a-z]{3,}|(?<=would\s)[a-z]{3,}|(?<=will\s)[a-z]{3,}|(?<=must\s)[a-z]{3,})"
    r"(?:\s+(?:back|out|up|over|to|as|into|in|with))?[ \t]+",
)
NOT_GIVING = frozenset(
    re.findall(
        r"\S+",
        "has have had takes take took needs need needed uses use used calls call called runs run ran accepts accept "
        "accepted requires require required contains contain contained includes include included handles handle "
        "handled raises raise raised throws throw threw fails fail failed crashes crash crashed works work worked "
        "breaks break broke loops loop looped iterates iterate checks check checked compares compare compared sorts "
        "sort sorted counts count counted lasts last lasted costs cost seems seem seemed looks look looked sounds "
        "sound feels feel appears appear appeared starts start started begins begin ends end ended finishes finish "
        "finished waits wait waited sleeps sleep slept times time timed skips skip skipped ignores ignore ignored "
        "misses miss missed lacks lack lacked adds add added subtracts subtract multiplies multiply divides divide "
        "rounds round rounded exceeds exceed exceeded beats beat matches match matched hits hit passes pass passed "
        "means mean meant does did goes go went gets get got is was are were be been being has",
    )
)

NEXT_LINE_LABEL = re.compile(
    r"[ \t]*\n[ \t]*(?:[-*•][ \t]*)?(?:(?:expected|correct|actual)?[ \t]*(?:output|result|value|return(?:\s+value)?|"
    r"answer|returns|gives|expected)|out|->|=>|→|==|=)[ \t]*(?:[:=]|->|=>|→|is)?[ \t]*",
    re.IGNORECASE,
)

# the value named before the call: "you should get 3 from f(x)", "it returns None for f([])", "3 == f(1)",
# "3 is what f(1) returns"
_CALL_VERBS = (
    r"(?:call|called|run|ran|try|tried|pass|passed|do|did|use|used|execute|executed|evaluate|evaluated|type|typed)"
)
BEFORE_CALL = re.compile(
    r"(?:(?<![\w])(?:for|from|with|on|by\s+calling|when\s+calling|when\s+running|after\s+calling|on\s+calling|"
    r"(?:when|if|once|after|whenever)\s+(?:i|you|we|one)\s+" + _CALL_VERBS + r"|"
    r"(?:when|if)\s+(?:i|you|we)\s+(?:give|feed)\s+it)"
    r"(?:\s+(?:it\s+)?(?:the\s+)?(?:args?|arguments|inputs?|parameters|values)\s+(?:of|from|in))?"
    r"|(?P<what>(?<![\w])(?:is|'s|was|would\s+be|will\s+be|should\s+be)\s+(?:exactly\s+)?(?:what|the\s+(?:expected\s+|correct\s+|right\s+)?"
    r"(?:result|output|answer|return\s+value|value)\s+(?:of|for|from))(?:\s+(?:i|you|we)\s+(?:get|got|see|saw|expect)"
    r"(?:\s+(?:from|for|when\s+calling|when\s+running|if\s+you\s+call))?)?"
    r"|(?<![\w])(?:is|gets|was|should\s+be|would\s+be|will\s+be)\s+(?:returned|given|produced|output|printed)\s+"
    r"(?:by|for|from)|(?:comes|came|should\s+come|will\s+come)\s+(?:back\s+|out\s+)?(?:from|of))"
    r"(?:\s+(?:calling|running|it\s+as))?"
    r"|==)[\s`]*$",
    re.IGNORECASE,
)
VALUE_VERB = re.compile(
    r"(?:(?<![\w])(?:returns?|returned|gives?|gave|get|gets|got|yields?|outputs?|produces?|prints?|printed|"
    r"expect(?:ed|ing)?|see|saw|equals?|receive|received|end\s+up\s+with|ended\s+up\s+with|"
    r"(?:it|that|the\s+(?:result|output|answer|return\s+value))\s*"
    r"(?:is|'s|should\s+be|would\s+be|will\s+be|must\s+be))|assert)(?![\w])[ \t]*",
    re.IGNORECASE,
)
VALUE_START = re.compile(
    r"(?:^|(?<=[.!?:;]\s))[ \t]*(?:(?:so|well|ok|okay|yes|yeah|hmm|oh|and|but|also|then)[,!]?[ \t]+)?",
    re.IGNORECASE | re.MULTILINE,
)

LIST_JOINT = re.compile(r"[ \t]*(?:,[ \t]*and|,[ \t]*or|,|and|&)[ \t]*", re.IGNORECASE)


# -- what makes a statement no claim: a question, a condition, a denial, a doubt, a retraction ----------------
QUESTION_AFTER = re.compile(
    r"[ \t]*(?:,[ \t]*(?:right|correct|yes|no|isn't\s+it|doesn't\s+it|is\s+that\s+right|or\s+not|maybe|perhaps)[ \t]*)?"
    r"[\"'`]?\?",
    re.IGNORECASE,
)

# a value said to hold only under a condition ("returns True if the list is empty", "gives 0 when x < 0") is a rule,
# not what the call gives; a condition on the speaker ("if I remember right") is a hedge and keeps the claim
CONDITIONAL = re.compile(
    r"[ \t]*,?[ \t]*(?:only[ \t]+)?(?:if|when|whenever|unless|provided|as[ \t]+long[ \t]+as|in[ \t]+case|assuming)\b"
    r"(?![ \t]+(?:i|i'm|i[ \t]+am|i've|i[ \t]+recall|i[ \t]+remember|i'm[ \t]+not|my[ \t]+memory|memory)\b)",
    re.IGNORECASE,
)

_STRING = re.compile(r"(?<![\w])'[^'\n]*'(?![\w])|\"[^\"\n]*\"|`[^`\n]*`")
DENIAL = re.compile(
    r"(?<![\w])(?:not|never|no|n't|doubt|doubtful|unlikely|wrong|bug|buggy|incorrect|mistake|mistaken|instead\s+of|"
    r"rather\s+than|avoid|hardcod\w*|hard-cod\w*|pretend|fake|false\s+that|untrue\s+that|impossible)(?![\w])|n't(?![\w])",
    re.IGNORECASE,
)


def denied_before(text: str, start: int) -> bool:
    """Whether the clause before a call denies or doubts what follows ("I doubt f(x) gives 3", "don't hardcode
    f(x) = 3"): a statement about the call that is not what the person says it gives."""
    before = _STRING.sub(lambda m: " " * len(m.group(0)), text[max(0, start - MAX_CALL - 80) : start])
    clause = re.split(r"[.!?;:,\n]|\bbut\b", before[-80:])[-1]
    return bool(DENIAL.search(clause))


def negates(text: str) -> bool:
    return bool(re.search(r"\b(?:not|never|n't)\b|n't\b|n’t\b", text, re.IGNORECASE))


# the person says they do not know, or only might
_UNSURE = re.compile(
    r"(?<![\w])(?:not\s+(?:sure|certain|100%)|unsure|no\s+idea|no\s+clue|(?:do\s*n[o']t|do\s+not|can't|cannot|can\s+not)"
    r"\s+(?:know|remember|recall|tell|say)|not\s+(?:know|remember)|maybe|perhaps|possibly|might|may\s+be|could\s+be|"
    r"let\s+me\s+(?:check|look|see|think|verify)|i'll\s+(?:check|look|have\s+to)|(?:look|check)\s+(?:it\s+)?(?:up|later)|"
    r"have\s+to\s+check|need\s+to\s+check|depends|guessing|wild\s+guess|i\s+doubt|doubt\s+it|doubtful|"
    r"(?:could|may)\s+(?:return|give|yield|output))"
    r"(?![\w])",
    re.IGNORECASE,
)

# what, right after a claim, takes it back: "... no wait", "but that was a bug", "I might be wrong"
_RETRACTION = re.compile(
    r"[^.!?\n]{0,80}?(?:[.!?…]+|\s+-+|\s*[—–])?[ \t]*(?:(?:no\s*,?\s*wait|wait\s*,?\s*no|actually\s*,?\s*no|"
    r"scratch\s+that|"
    r"never\s*mind|or\s+not|correction|sorry\s*,?\s*(?:no|i\s+mean)|i\s+mean)(?![\w])|"
    r"[^.!?\n]{0,60}?(?:that\s+(?:was|is|'s)\s+(?:a\s+bug|wrong|incorrect|a\s+mistake|not\s+right)|"
    r"which\s+(?:was|is)\s+(?:a\s+bug|wrong|incorrect|a\s+mistake)|(?:i\s+)?(?:might|could|may)\s+be\s+wrong|"
    r"don't\s+quote\s+me|not\s+sure\s+though|if\s+i'm\s+not\s+mistaken))",
    re.IGNORECASE,
)


def unsure(text: str, start: int, stop: int, values: Sequence[tuple[int, int]] = ()) -> bool:
    """Whether the sentence around ``text[start:stop]`` (bounded) says the person does not know (``_UNSURE``); the
    ``values`` spans (the call's arguments, the value stated) are not read: "maybe" in a string is no hedge."""
    lo = max(
        text.rfind(". ", max(0, start - 200), start),
        text.rfind("\n", max(0, start - 200), start),
        text.rfind("!", max(0, start - 200), start),
        text.rfind("?", max(0, start - 200), start),
        start - 200,
        -1,
    )
    ends = [text.find(mark, stop, stop + 200) for mark in (". ", "\n", "!", "?")]
    hi = min((i for i in ends if i >= 0), default=min(len(text), stop + 200))
    chars = list(text[lo + 1 : hi])
    for a, b in values:
        for i in range(max(a, lo + 1), min(b, hi)):
            chars[i - lo - 1] = " "
    if _UNSURE.search(_STRING.sub(lambda m: " " * len(m.group(0)), "".join(chars))):
        return True
    return bool(_RETRACTION.match(_STRING.sub(lambda m: " " * len(m.group(0)), text[stop : stop + 160])))


# -- prose: "for [1, 2] it returns 3" ---------------------------------------------------------------------------
PROSE_ARG = re.compile(
    r"(?:(?<![\w])(?:for|with|given|on|passing|feeding|supplying|providing|giving\s+it|input(?:ting)?|"
    r"an?\s+(?:input|argument|arg|parameter)\s+of|take|taking|consider|using|"
    r"by\s+(?:passing|giving|feeding)(?:\s+it)?|"
    r"(?:if|when|once|whenever)\s+(?:you\s+|we\s+|i\s+|someone\s+|somebody\s+|anyone\s+|a\s+user\s+|the\s+user\s+|"
    r"they\s+)?(?:pass|passes|passed|give|gives|gave|input|inputs|call\s+it\s+with|calls\s+it\s+with|run\s+it\s+(?:on|with)|"
    r"feed|feeds|plug\s+in|plugs\s+in|put\s+in|puts\s+in|pass\s+in|passes\s+in|use|uses|enter|enters|provide|provides)"
    r"(?:\s+it)?(?:\s+in)?|"
    r"(?:feed|give|pass|hand)\s+it|plug\s+in|pass\s+in|put\s+in|(?:^|(?<=[.!?:;]\s))(?:pass|feed|give|try|use)(?:\s+it)?|"
    r"(?:you|we|i|they|someone)\s+(?:pass|passes|passed|feed|feeds|give|gives|input|inputs|enter|enters)(?:\s+(?:it|in))?|"
    r"(?:(?:if|when|say|suppose|let's\s+say|imagine|assume|assuming|and|so)\s+)?(?:the|my|an?|your)\s+"
    r"(?:input|argument|arg|parameter)\s+(?:is|was|=|:))"
    r"(?:[ \t]*[:=])?\s+(?:it\s+|in\s+|the\s+input\s+|an?\s+input\s+of\s+|an?\s+input\s+|input\s+)?)",
    re.IGNORECASE,
)
_SUBJECT = (
    r"(?:it|the\s+function|that|this|you|we|i|one|the\s+result|the\s+output|the\s+answer|the\s+return\s+value|"
    r"the\s+value|the\s+function\s+call)"
)
_PROSE_VERB = (
    r"(?:returns?|gives?|yields?|outputs?|produces?|prints?|be|is|get|gets|got|see|expect(?:\s+to\s+(?:get|see))?|"
    r"(?:like|love|want|hope|expect)\s+to\s+(?:see|get)|want|map\s+to|maps\s+to|turns?\s+into|goes\s+to|go\s+to|"
    r"get\s+back|spits?\s+out|hands?\s+back|gives?\s+back|returns?\s+back|results?\s+in|leads?\s+to|"
    r"equals?|comes?\s+out\s+(?:as|to)|evaluates?\s+to|ends?\s+up\s+(?:as|with)|spits?\s+out)"
)
PROSE_THEN = re.compile(
    r"(?:\s+as\s+(?:the\s+|an\s+|its\s+)?(?:input|argument|arg|parameter))?"
    r"\s*(?:,?\s*(?:for\s+example|for\s+instance|as\s+an\s+example|e\.g\.|say))?"
    r"\s*(?:(?:->|=>|→|⇒|-->|==>)\s*(?:(?:output|result|returns?|gives?|expected)(?:\s*[:=])?\s*)?|"
    r"(?:[,;:—–]|\s-)?\s*(?:(?:and|so)\s+)?(?:then\s+)?(?:"
    r"" + _SUBJECT + r"(?:'s|’s)"  # "it's 3"
    r"|(?:" + _SUBJECT + r"\s*(?:'d|'ll|’d|’ll)?\s*)?"
    r"(?:(?:should|would|will|must|ought\s+to|is\s+supposed\s+to|needs\s+to|is\s+expected\s+to|has\s+to)\s+)?"
    r"(?:(?:also|just|simply|only|always|then)\s+)?" + _PROSE_VERB + r""
    r")(?![\w])(?:\s+(?:back|out))?)\s*",
    re.IGNORECASE,
)
EMPTY_SUBJECT = re.compile(
    r"(?<![\w])(?:an?\s+|the\s+)?empty\s+(list|array|string|str|dict|dictionary|set|tuple)(?:\s+input)?\s+"
    r"(?:should\s+|would\s+|will\s+)?(?:returns?|gives?|yields?|produces?|outputs?|results?\s+in)(?![\w])\s*",
    re.IGNORECASE,
)
EMPTY_IF = re.compile(
    r"(?<![\w])(?:if|when|whenever|once)\s+(?:the\s+|an?\s+|your\s+|my\s+)?(?:input\s+)?"
    r"(list|array|string|str|dict|dictionary|set|tuple)(?:\s+(?:passed\s+in|given|input))?\s+(?:is|was|'s)\s+empty",
    re.IGNORECASE,
)

AS_INPUT = re.compile(
    r"[ \t]+(?:as\s+(?:the\s+|an\s+|its\s+)?(?:input|argument|arg|parameter)(?![\w])|"
    r"(?=(?:should|would|will|must)\s+(?:map|turn|go)\s+(?:to|into)(?![\w]))|(?=(?:maps|turns|goes)\s+(?:to|into)(?![\w])))",
    re.IGNORECASE,
)
IN_OUT = re.compile(r"[ \t]+in[ \t]*(?:[,;:—–→]|->|=>)[ \t]*", re.IGNORECASE)
# "it should return 3 given [1, 2]": the value, then the argument
GIVEN_AFTER = re.compile(
    r"[ \t]+(?:given|for|with|when\s+given|if\s+given|on|from|when\s+(?:the\s+)?input\s+is|if\s+(?:the\s+)?input\s+is|"
    r"when\s+(?:you\s+)?(?:pass|give|feed)(?:\s+it)?|if\s+(?:you\s+)?(?:pass|give|feed)(?:\s+it)?)[ \t]+"
    r"(?:(?:an?|the)\s+input\s+(?:of\s+)?|input\s+)?",
    re.IGNORECASE,
)


# -- an answer to a question about one call ---------------------------------------------------------------------
_INTERJECTION = r"(?:(?:oh+|ah+|hmm+|h?mm+|uh+|um+|well|so|ok(?:ay)?|alright|actually|honestly|ha(?:ha)*)[,.!…]*\s+)?"
_AFTER_WORD = r"(?=\s*(?:[,.!;:—–-]|$)|\s+(?:it|that|this|exactly|correct|right|indeed|precisely|the)\b)"
YES = re.compile(
    r"\s*" + _INTERJECTION + r"(?:"
    r"(?:yes|yeah|yep|yup|ya|correct|exactly|that's\s+right|that\s+is\s+right|that's\s+correct|that\s+is\s+correct|"
    r"that's\s+it|that's\s+the\s+one|affirmative|mm-?hmm|uh-?huh|you\s+got\s+it|spot\s+on|bingo|precisely|"
    r"confirmed|i\s+(?:can\s+)?confirm(?:\s+that)?|(?:you're|you\s+are)\s+(?:(?:totally|absolutely|quite)\s+)?(?:right|correct)|"
    r"(?:it|that)\s+(?:does|is|will|should|would)(?=\s*(?:[.!]|$)))"
    + _AFTER_WORD
    # words that also open other sentences ("Right, so what I need is..."): a yes only alone or echoing the question
    + r"|(?:right|sure|indeed|absolutely|definitely|of\s+course|true)"
    r"(?=\s*(?:[.!]|$)|\s*,?\s*(?:it|that)(?:'s|\s+(?:is|does|will|should|would|returns|gives))\b)"
    r")",
    re.IGNORECASE,
)
NO = re.compile(
    r"\s*" + _INTERJECTION + r"(?:no|nope|nah|not\s+quite|not\s+really|incorrect|wrong|that's\s+wrong|"
    r"that's\s+not\s+right|that's\s+not\s+it|that's\s+incorrect|that\s+is\s+not\s+right|that's\s+not\s+correct|negative|"
    r"(?:you're|you\s+are)\s+(?:(?:totally|absolutely|quite)\s+)?(?:wrong|mistaken|incorrect)|"
    r"(?:it|that)\s+(?:doesn't|does\s+not|isn't|is\s+not|won't|will\s+not|shouldn't|should\s+not|wouldn't)"
    r"(?=\s*(?:[.!,;]|$)))" + _AFTER_WORD,
    re.IGNORECASE,
)
_ANSWER_VERB = (
    r"(?:'s|’s|'d\s+be|'ll\s+be|is|was|are|equals|returns|gives|yields|outputs|prints|evaluates\s+to|"
    r"(?:comes|came)\s+(?:out|back)\s+(?:as|to|with)|works\s+out\s+to|amounts\s+to|adds\s+up\s+to|"
    r"(?:" + _MODAL + r"\s+)?(?:(?:also|just|only|probably|definitely|always|basically|then)\s+)?"
    r"(?:be|return|give|yield|output|produce|print|equal|evaluate\s+to|come\s+(?:out|back)\s+(?:as|to|with)|"
    r"work\s+out\s+to|amount\s+to|add\s+up\s+to|be\s+equal\s+to))"
)
ANSWER_LEAD = re.compile(
    r"\s*(?:(?:yes|yeah|yep|no|nope|well|so|hmm+|h?mm+|oh+|ah+|uh+|um+|ok(?:ay)?|alright|sure|right|actually|honestly|"
    r"basically|good\s+question|great\s+question|easy|simple|easy\s+one|that's\s+(?:an\s+)?easy(?:\s+one)?|"
    r"that's\s+simple|let\s+me\s+see|let's\s+see|i\s+see|of\s+course|quick\s+answer|short\s+answer|"
    r"off\s+the\s+top\s+of\s+my\s+head|from\s+my\s+notes|in\s+my\s+notes|in\s+(?:that|this|which)\s+case|"
    r"for\s+(?:that|this)(?:\s+one|\s+call|\s+input|\s+example)?|there|then|here|with\s+(?:those|these)\s+"
    r"(?:inputs|arguments|args|values))\s*[,.!:…—–-]*\s+)*"
    r"(?:(?:i\s+think|i\s+believe|i'd\s+say|i\s+would\s+say|i\s+guess|(?:i'm|i\s+am)\s+(?:(?:pretty|fairly|quite|very|"
    r"absolutely|completely|100%)\s+)?(?:sure|certain|confident|positive)|pretty\s+sure|probably|definitely|if\s+i\s+remember(?:\s+(?:right|correctly))?|as\s+far\s+as\s+i\s+know|"
    r"from\s+memory|i\s+know\s+that|i'm\s+confident)(?:\s+that)?\s*,?\s*)?"
    r"(?:(?:(?:it|that|this|that\s+one|this\s+one|that\s+call|this\s+call|the\s+function|the\s+call|"
    r"(?:the\s+)?(?:expected\s+|correct\s+|right\s+|actual\s+)?" + _RESULT_NOUN + r"(?:\s+(?:there|here))?)"
    r"\s*" + _ANSWER_VERB + r""
    r"|(?:you|we|i|one)(?:'d|'ll|\s+" + _MODAL + r")?\s+(?:(?:also|just|only|probably|then)\s+)?"
    r"(?:get|got|see|saw|receive|want|expect|end\s+up\s+with)(?:\s+to\s+(?:get|see))?"
    r"|i(?:'d|\s+would)?\s+expect(?:\s+to\s+(?:get|see))?|i'm\s+expecting|we're\s+expecting"
    r"|(?:" + _MODAL + r"\s+)(?:(?:also|just|only|probably|definitely)\s+)?(?:be|return|give|yield|output|"
    r"come\s+(?:out|back)\s+(?:as|to|with)|evaluate\s+to|equal)"
    r"|returns?|gives?|expected(?:\s+(?:output|result|value|answer))?|answer|result|output)(?![\w]))?"
    r"\s*(?:[:=]|->|→)?\s*",
    re.IGNORECASE,
)

# what may follow a value that answers a question ("3 is the answer", "3 for sure"; not "3 is the number of items")
AFFIRMING = re.compile(
    r"(?:is\s+(?:the\s+(?:answer|result|output|value|one)|what|right|correct|it)|was\s+(?:the\s+answer|what)|"
    r"should\s+be|would\s+be|comes?\s+(?:out|back)|i\s+(?:think|believe|guess|reckon|expect|got|get)|for\s+sure|"
    r"definitely|probably|exactly|precisely|if|since|because|as|from|there|here|in\s+that|then|too|though|right|"
    r"again|back|every|each|always|when|i'm|i'd|that's|it's|you|we|and|but|so)(?![\w'])",
    re.IGNORECASE,
)
ANSWER_CUES = frozenset(
    re.findall(
        r"\S+",
        "to with as be is was are it's that's get got gets say says expect expecting return returns returned give "
        "gives gave yield yields output outputs produce produces print prints equal equals probably definitely guess "
        "think bet pick choose answer result output value expected surely certainly obviously clearly just exactly "
        "simply maybe",
    )
)
ANSWER_WORD = re.compile(r"[ \t]*([A-Za-z][\w']*)[ \t,:]+")
