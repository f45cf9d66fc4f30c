"""Training a better simulated human (issue 41): best-of-N supervised fine-tuning with execution and leak vetoes.

The tested library under ``examples/simulator_sft/``: ``prefixes`` (dialogue prefixes where the human must reply,
from run directories or played, split by reference), ``sampling`` (the interface's candidates: K replies per
prefix, asked exactly as the env asks its human), ``selection`` (each reply judged by the leak detector, the
claims checker, over-release and an empty/off-topic check; the best kept, every drop explained) and
``evaluation`` (static figures per prefix and paired differences with bootstrap intervals).
"""

from colbench.simtrain.evaluation import compare, draw_metrics, paired_difference, prefix_groups
from colbench.simtrain.prefixes import (
    Prefix,
    prefixes_by_playing,
    prefixes_from_runs,
    read_prefixes,
    split_by_reference,
    write_prefixes,
)
from colbench.simtrain.sampling import Candidate, human_chat, human_request, sample_candidates
from colbench.simtrain.selection import Judge, Judged, select, sft_rows

__all__ = [
    "Candidate",
    "Judge",
    "Judged",
    "Prefix",
    "compare",
    "draw_metrics",
    "human_chat",
    "human_request",
    "paired_difference",
    "prefix_groups",
    "prefixes_by_playing",
    "prefixes_from_runs",
    "read_prefixes",
    "sample_candidates",
    "select",
    "sft_rows",
    "split_by_reference",
    "write_prefixes",
]
