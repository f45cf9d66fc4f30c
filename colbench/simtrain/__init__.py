"""Training a better simulated human (issue 41): best-of-N supervised fine-tuning with execution and leak vetoes.

The tested library under ``examples/simulator_sft/``: ``prefixes`` (dialogue prefixes where the human must reply,
from run directories or played, split by reference), ``candidates`` (K replies per prefix, asked exactly as the env
asks its human), ``selection`` (each reply judged by the leak detector, the claims checker, over-release and an
empty/off-topic check; the best kept, every drop explained) and ``evaluation`` (static figures per prefix and
paired differences with bootstrap intervals).
"""
