"""A complete RL rollout loop on ColBench: a vector env, a policy, rewards, and token ids with the agent mask.

    python examples/rollouts/rollout_loop.py [--num-envs 8] [--episodes 32] [--tokenizer DIR] [--env ID]

The policy here is a stand-in (it asks one question, then answers with a stub function) so that the loop runs
anywhere in seconds; put your model's generate call in ``policy``. The simulated human is scripted by default
(``--simulator openai:MODEL --base-url URL`` for a real one). The tokenizer defaults to the embedded model's
(``colbench model export-hf``, converted once). Prints what a trainer would receive.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence

import gymnasium as gym
import numpy as np

import colbench  # noqa: F401 (registers the ids)
from colbench.env.tokens import tokenize_transcript
from colbench.llm.export import export_hf


def policy(observations: Sequence[str], turns: np.ndarray) -> list[str]:
    """Your model goes here: one action per sub-env, from its observation."""
    return [
        "What should the function return for an empty input?"
        if turn == 0
        else "I WANT TO ANSWER:\ndef f(*args):\n    return None"
        for turn in turns
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--env", default="ColBench-Backend-v1")
    parser.add_argument("--tasks", default="backend-sample")
    parser.add_argument("--num-envs", type=int, default=8)
    parser.add_argument("--episodes", type=int, default=32)
    parser.add_argument("--simulator", default="scripted")
    parser.add_argument("--base-url")
    parser.add_argument("--tokenizer", help="a transformers model directory (default: the exported embedded model)")
    args = parser.parse_args()

    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(args.tokenizer or export_hf())
    options = {"base_url": args.base_url} if args.base_url else None
    vec = gym.make_vec(
        args.env, num_envs=args.num_envs, tasks=args.tasks, simulator=args.simulator, simulator_options=options
    )
    observations, infos = vec.reset(seed=0)
    turns = np.zeros(args.num_envs, dtype=int)
    batch = []  # (input_ids, agent_mask, reward) per scored episode
    dropped = 0
    while len(batch) + dropped < args.episodes:
        observations, rewards, terminated, truncated, infos = vec.step(policy(observations, turns))
        turns = np.where(infos["_turn"], infos["turn"], 0)
        for i in np.flatnonzero(terminated | truncated):
            if truncated[i]:  # an infrastructure failure, never a model failure: not trained on
                dropped += 1
                continue
            episode = tokenize_transcript(tokenizer, vec.finished(int(i)))
            batch.append((episode.input_ids, episode.agent_mask, float(rewards[i])))
    vec.close()

    rewards = [r for _, _, r in batch]
    trained = sum(sum(m) for _, m, _ in batch)
    total = sum(len(ids) for ids, _, _ in batch)
    print(f"{len(batch)} scored episodes ({dropped} dropped), mean reward {np.mean(rewards):.3f}")
    print(f"{total} tokens, {trained} of them the agent's ({trained / total:.1%}): the loss sees only those")
    ids, mask, _ = batch[0]
    print(
        "first episode, agent tokens decoded:", repr(tokenizer.decode([t for t, m in zip(ids, mask, strict=True) if m]))
    )


if __name__ == "__main__":
    main()
