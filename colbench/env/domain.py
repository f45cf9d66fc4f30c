"""What a domain is: everything that differs between backend (Python functions) and frontend (web pages).

Code outside ``colbench/domains/<name>/`` never compares domain names: it asks the task's (or run's) domain, found
with :func:`colbench.env.domain.get_domain`. A domain owns its task schema, its prompt templates (``envs/<name>/``),
what its simulated human is shown (the simulator a chat model becomes, its reply cap and options; the shared
machinery that builds it from a spec is :mod:`colbench.env.simulators`), what a small model must be told (the
answer's prefill, what the human may not write), its scorer, whether its answers are rendered pages, and how its
results read in progress lines, run records and leaderboards. Adding a domain means adding one package that
subclasses :class:`Domain` and registering it (:func:`colbench.tasks.domain_registry.register_domain`).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, Protocol, runtime_checkable

from colbench._util.prompts import fill, template_text
from colbench._util.storage import sha256_text
from colbench.env.claim_check import ClaimChecker, NoClaims
from colbench.errors import ConfigError
from colbench.tasks.domain_registry import DOMAINS, domain_names, task_schema
from colbench.types.dialogue import ANSWER_MARKER
from colbench.types.leaks import Labelled, word_overlap, word_overlap_spans
from colbench.types.task import PlusTests, Task

if TYPE_CHECKING:  # the LLM layer is imported when a simulator is made: scoring alone never loads openai
    from colbench.humans.simulator import Simulator
    from colbench.llm.client import LLMClient


@runtime_checkable
class Score(Protocol):
    """The judgement of one answer, whatever the domain."""

    @property
    def status(self) -> str:
        """``ok``, ``infra_error``, or a domain's finer outcome (frontend: ``no_answer``, ``render_failed``)."""

    @property
    def judged(self) -> bool:
        """False for an infrastructure error: no score at all, never a zero."""

    @property
    def reward(self) -> float:
        """The env's reward (NaN when not judged)."""

    @property
    def success(self) -> bool | None:
        """Whether the answer is fully right, where the domain has that notion (None otherwise)."""

    def result_row(self, task_id: str) -> dict[str, Any]:
        """The row ``colbench score`` writes (the CLI contract of the domain)."""

    def details(self) -> dict[str, Any]:
        """Everything about the judgement (``info["score"]``, the run record's ``score``)."""


@runtime_checkable
class Scorer(Protocol):
    """Judges final answers of one domain; thread-safe, shared by every env of a process."""

    def score(self, task: Task, answer: str) -> Score: ...

    def score_many(self, pairs: Sequence[tuple[Task, str]]) -> Sequence[Score]:
        """Scores in input order; an infrastructure failure of one answer is that answer's (unjudged) score."""

    def describe(self) -> dict[str, Any]:
        """What identifies the scoring in run.json (compared on resume, shown in leaderboard notes)."""

    def close(self) -> None: ...


@dataclass(frozen=True)
class Metrics:
    """How a domain's results read.

    ``reward_label``: the leaderboard column of the mean reward; ``reward_name``: the same in prose.
    ``has_success``: records carry ``success`` (all tests passed) and leaderboards rank by it first.
    ``success_threshold``: where records have no success, ``reward >= threshold`` counts as one (flip rate only).
    ``win_rate``: ``colbench report --reference-run`` adds a win-rate column (ties count half).
    ``reward_range``: the rewards a valid record can hold.
    ``subscores``: the names of the parts of the reward an env id's records carry in ``score["subscores"]`` (in
    [0, 1] each), shown as columns and plotted by reports; empty where the reward has no parts.
    """

    reward_label: str
    reward_name: str
    has_success: bool
    success_threshold: float | None = None
    win_rate: bool = False
    reward_range: tuple[float, float] = (0.0, 1.0)
    subscores: tuple[str, ...] = ()


@dataclass(frozen=True)
class ScoreOption:
    """One option a domain's scorer reads, declared as data so that any front end can offer it (``colbench score
    <domain>`` offers ``--<name>``, underscores as dashes) without the domain knowing how it is asked for.

    ``name`` is its key in ``make_scorer``'s ``options``, except ``jobs``, which is ``make_scorer``'s ``jobs``
    argument (answers at once); ``value_type`` converts what is given; ``choices``, when set, are the values
    allowed."""

    name: str
    help: str
    default: str | int
    value_type: type[str] | type[int] = str
    choices: tuple[str | int, ...] | None = None


class Domain(ABC):
    """One ColBench domain. Subclasses set the class attributes and implement the abstract methods."""

    name: ClassVar[str]
    env_id: ClassVar[str]
    """The domain's current env id (what ``colbench probe`` and ``ColBench-Human-v0`` run its episodes with)."""
    default_tasks: ClassVar[str]
    """The split an env of this domain loads when given no tasks (the paper's test split)."""
    sample_tasks: ClassVar[str]
    """A small sample bundled with colbench (offline demos and tests)."""
    renders_pages: ClassVar[bool] = False
    """Answers are pages: each turn's page is rendered, the final one is saved beside the run record."""
    metrics: ClassVar[Metrics]
    simulator_options: ClassVar[frozenset[str]] = frozenset()
    """Options of this domain's simulated human besides the endpoint's fields (passed to :meth:`chat_simulator`)."""
    max_reply_chars: ClassVar[int] = 400
    """The simulated human's replies are cut to this many characters."""
    answer_prefill: ClassVar[str] = f"{ANSWER_MARKER}\n"
    """The start of the agent's last turn where the harness writes it for the model (the embedded agent): the
    answer marker and the opening of an answer in the form the domain's agent prompt asks for, so that a model
    which never writes the marker still delivers an answer the domain can score."""
    human_banned: ClassVar[tuple[str, ...]] = ()
    """What the embedded model playing this domain's human may not write (every token of each string is banned):
    the start of a paste of the hidden answer, which the simulator prompt forbids and a small model writes anyway."""
    human_stops: ClassVar[tuple[str, ...]] = ()
    """Where the embedded human's reply is cut: a second guard for what ``human_banned`` lets through."""

    # -- tasks ----------------------------------------------------------------------------------------------
    @abstractmethod
    def claims(self, row: Mapping[str, Any]) -> bool:
        """Whether a row without a ``domain`` field has this domain's schema."""

    def test_cases(self, row: Mapping[str, Any], where: str) -> tuple[tuple[str, str], ...]:
        """The row's tests, validated (a DataError naming ``where`` and the field); none by default."""
        return ()

    def plus_tests(self, row: Mapping[str, Any], where: str) -> PlusTests | None:
        """The row's ColBench+ tests (``colbench tasks augment``), validated; none by default."""
        return None

    # -- prompts --------------------------------------------------------------------------------------------
    def prompt_template(self, name: str) -> str:
        """The template ``agent`` or ``simulator`` (default: ``envs/<domain>/prompts/<name>.txt``)."""
        return template_text(self.name, name)

    def agent_prompt(self, task: Task, max_turns: int) -> str:
        """The agent's first observation: the domain's instructions and the problem, never hidden information."""
        return fill(self.prompt_template("agent"), problem_description=task.problem_description, max_turns=max_turns)

    def simulator_prompt(self, task: Task) -> str:
        """The simulated human's instructions for ``task`` (its system prompt)."""
        return fill(
            self.prompt_template("simulator"),
            problem_description=task.problem_description.strip(),
            hidden_information=task.hidden_information.strip(),
        )

    def prompt_sha256(self, name: str) -> str:
        """What identifies a prompt in run.json: a changed template is a changed run."""
        return sha256_text(self.prompt_template(name))

    # -- the simulated human (built by colbench.env.simulators) -------------------------------------------------
    def chat_simulator(
        self, client: LLMClient, prompt: Callable[[Task], str], *, text_only: bool, spec_view: bool, **options: Any
    ) -> Simulator:
        """The simulator a chat model behind ``client`` becomes, for this domain's tasks: ``prompt(task)`` is its
        instructions (:meth:`simulator_prompt`, or :meth:`spec_simulator_prompt` when ``spec_view``: it is then
        shown tasks whose hidden information is their spec), ``text_only`` says the model reads no images (the
        embedded one), ``options`` are this domain's ``simulator_options``. By default a
        :class:`~colbench.humans.simulator.ChatSimulator` cut at ``max_reply_chars``; a domain that shows its human
        more overrides this."""
        # the human's classes (the LLM layer) only when a human is made: scoring never loads it
        from colbench.humans.simulator import ChatSimulator

        return ChatSimulator(client, prompt, max_chars=self.max_reply_chars)

    def spec_simulator_prompt(self, task: Task) -> str:
        """The spec human's instructions: ``task.hidden_information`` is the spec."""
        return fill(
            self.prompt_template("simulator-spec"),
            problem_description=task.problem_description.strip(),
            specification=task.hidden_information.strip(),
        )

    # -- leaks: the simulated human giving the hidden information away (colbench/types/leaks.py) ---------------------
    leak_threshold: ClassVar[float] = 0.5
    """A reply whose ``leak_score`` reaches this is flagged as a leak."""
    leak_detector: ClassVar[str] = "word-overlap/1"
    """What names the detector in run.json: a changed detector is a changed run."""

    def leak_score(self, task: Task, reply: str) -> float:
        """How much of ``task.hidden_information`` the human's ``reply`` gives away, in [0, 1]. The default, for a
        domain without its own detector, is the longest run of the hidden text's words the reply repeats."""
        return word_overlap(reply, task.hidden_information, task.problem_description)

    def leak_spans(self, task: Task, reply: str) -> list[tuple[int, int]]:
        """The character ranges ``[start, end)`` of ``reply`` that its ``leak_score`` comes from (none when it
        scores 0): kept with the turn, so a reader sees what was flagged without the detector."""
        return word_overlap_spans(reply, task.hidden_information, task.problem_description)

    def labelled_replies(self, tasks: Sequence[Task], seed: int = 0) -> list[tuple[Task, Labelled]]:
        """Replies made from ``tasks`` with known labels, to measure ``leak_score`` on (``bench/leak_detector.py``):
        ``labelled_for`` each task, with another task of the set drawn as its honest foil."""
        import random

        rng = random.Random(seed)
        out = []
        for i, task in enumerate(tasks):
            other = tasks[rng.randrange(len(tasks))]
            foil = other if other.hidden_information != task.hidden_information else None
            out += [(task, item) for item in self.labelled_for(task, foil, seed + i)]
        return out

    def labelled_for(self, task: Task, other: Task | None, seed: int) -> list[Labelled]:
        """The labelled replies of one task (``other``: another task, whose answer is not a leak of this one). By
        default the hidden text whole and in part (leaks), the description and a short answer (honest)."""
        words = task.hidden_information.split()
        return [
            Labelled(task.hidden_information, True, "verbatim"),
            Labelled("I mean: " + " ".join(words[: max(12, len(words) // 2)]), True, "partial"),
            Labelled(task.problem_description, False, "description"),
            Labelled("I don't know, whatever you think is best.", False, "preference"),
        ]

    # -- claims: what the human says that the reference can settle (colbench/types/claims.py) ----------------------
    def claim_checker(self, scorer: Scorer | Callable[[], Scorer]) -> ClaimChecker:
        """The checker of this domain's claims, settling them with what ``scorer`` runs or renders (its sandbox, its
        browser; a function giving it, where making it would start what a reply without claims never needs): one
        per scorer is enough, it is thread-safe. By default the domain has no checkable claims."""
        return NoClaims()

    # -- scoring --------------------------------------------------------------------------------------------
    scoring_kwargs: ClassVar[Mapping[str, Any]] = {}
    """The env kwargs that choose how this domain's answers are scored, with the env's defaults (backend:
    ``rules``, ``plus_tests``): an env id's scoring is its definition's values of these, and the scorers read them
    from ``make_scorer``'s ``options`` under the same names (:mod:`colbench.env.versions`)."""

    @abstractmethod
    def make_scorer(self, options: Mapping[str, Any], *, jobs: int | None = None) -> Scorer:
        """A new scorer, owned by the caller (close it). ``options``: scoring options; each domain reads its own
        (backend: ``sandbox``; frontend: ``embedder``; ``score_options`` declares them; and the version's
        ``scoring_kwargs``) and ignores the others. ``jobs``: answers at once."""

    @abstractmethod
    def shared_scorer(self, options: Mapping[str, Any]) -> Scorer:
        """The process-wide scorer for ``options`` (one per distinct configuration, closed at exit), shared by
        every env: warm sandboxes or one browser, and one reference cache."""

    @abstractmethod
    def unjudged(self, task_id: str, error: str) -> Score:
        """The score of an answer the harness could not judge (an infrastructure error)."""

    def describe_scoring(self, scorer: Scorer, tasks: Sequence[Task]) -> dict[str, Any]:
        """run.json's ``scoring`` for a run over ``tasks``: the scorer's own description, and whatever the scores
        depend on in the tasks beyond their content ids (backend ``-v2``: which plus tests). A scorer without
        ``describe`` (a test's stand-in) is named by its class."""
        describe = getattr(scorer, "describe", None)
        return dict(describe()) if callable(describe) else {"scorer": type(scorer).__name__}

    score_options: ClassVar[tuple[ScoreOption, ...]] = ()
    """The scoring options a caller sets (``make_scorer``'s ``options``, and ``jobs``), with their defaults and
    help, in the order to offer them: ``colbench score <name>`` has each as ``--<name>``."""
    score_help: ClassVar[str] = ""
    """What scoring this domain's answers means, in a few words (``colbench score --help``)."""

    @abstractmethod
    def score_summary(self, scores: Sequence[Score], scorer: Scorer) -> str:
        """What ``scores`` come to, in one line (``colbench score``): the reward in this domain's terms."""

    # -- checks ---------------------------------------------------------------------------------------------
    def check_tasks(self, tasks: Sequence[Task], options: Mapping[str, Any]) -> Iterable[str]:
        """``colbench tasks check``: a line per problem found (a task a model cannot be judged fairly on), then a
        summary line. ``options``: ``sandbox``, ``jobs`` (each domain reads what it needs)."""
        yield f"checked {len(tasks)} {self.name} tasks: this domain has no checks"

    # -- generation -----------------------------------------------------------------------------------------
    def generate_tasks(self, options: Mapping[str, Any], advance: Callable[[], None]) -> str:
        """``colbench tasks generate`` (docs/generate.md): new tasks of this domain into ``options["out"]``, kept
        only through the domain's gates; the summary line. ``advance`` moves the progress bar per candidate."""
        raise ConfigError(f"--domain {self.name}: this domain has no task generator (only backend tasks for now)")

    # -- results --------------------------------------------------------------------------------------------
    def metrics_for(self, env_id: str | None) -> Metrics:
        """How the results of one env id read: an env id may judge by another rule than the domain's first one
        (a reward with parts, a success threshold of its own). None or an unknown id: the domain's ``metrics``."""
        return self.metrics

    def headline(self, scored: int, successes: int, reward_sum: float, env_id: str | None = None) -> str:
        """What ``scored`` episodes came to, in a progress or summary line (by ``env_id``'s metrics)."""
        if not scored:
            return "no scored episodes"
        mean = reward_sum / scored
        metrics = self.metrics_for(env_id)
        if metrics.has_success:
            return f"success {successes}/{scored} ({100 * successes / scored:.1f}%), mean reward {mean:.3f}"
        return f"mean {metrics.reward_name} {mean:.3f}"

    def success_of(self, reward: float, success: bool | None, env_id: str | None = None) -> bool:
        """Whether a scored episode counts as a success (flip rate, pass^k): the record's own, else the threshold
        of ``env_id``'s metrics (an env id may judge by a rule of its own, ``metrics_for``)."""
        metrics = self.metrics_for(env_id)
        if metrics.has_success or metrics.success_threshold is None:
            return bool(success)
        return reward >= metrics.success_threshold

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name!r}>"


def get_domain(name: str | Domain) -> Domain:
    """The domain called ``name`` (a Domain is returned as it is); unknown names are a ConfigError listing the
    known ones (the registry is :mod:`colbench.tasks.domain_registry`)."""
    if isinstance(name, Domain):
        return name
    target = task_schema(name)
    if not isinstance(target, Domain):
        raise ConfigError(f"domain {name!r}: {DOMAINS.entry_point(name)} is not a Domain named {name!r}")
    return target


def all_domains() -> list[Domain]:
    return [get_domain(name) for name in domain_names()]


def check_tasks(tasks: Sequence[Task], options: Mapping[str, Any]) -> Iterator[str]:
    """``colbench tasks check``: each task's domain says whether its tasks can be judged fairly (backend: run the
    references in the sandbox against their own tests; frontend: render the reference pages); one line per problem
    found, domain by domain in order of first appearance. ``options``: what the checks may use (``sandbox``,
    ``jobs``); each domain reads its own."""
    groups: dict[str, list[Task]] = {}
    for task in tasks:
        groups.setdefault(task.domain, []).append(task)
    for name, group in groups.items():
        yield from get_domain(name).check_tasks(group, options)
