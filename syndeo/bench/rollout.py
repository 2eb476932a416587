"""Stepping K environments with one batched policy call per step: the unit of work.

Both the Ray actor and the "local limit" plain processes run exactly this code, so
the only difference between them is what carries the work (Ray or bare processes).

We keep our own list of K envs instead of a Gymnasium vector env so that a chunk
can end on any sample count: the last step of a chunk steps only the first ``r``
envs.  That is what makes "requested samples == counted samples" exact.
"""

from __future__ import annotations

import os
import resource
from dataclasses import dataclass
from typing import Any

import gymnasium as gym
import numpy as np
from numpy.typing import NDArray

from syndeo.bench.policy import MLPPolicy


@dataclass
class Trajectories:
    """The samples of one chunk, row i = one state-action interaction."""

    obs: NDArray[np.float32]
    actions: NDArray[Any]
    rewards: NDArray[np.float32]
    terminated: NDArray[np.bool_]
    truncated: NDArray[np.bool_]

    def __len__(self) -> int:
        return len(self.rewards)


def peak_rss_bytes() -> int:
    """Peak resident memory of this process so far (Linux reports ru_maxrss in KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


class Sampler:
    """K envs of one id + an MLP; ``run(n)`` performs exactly n env steps."""

    def __init__(self, env_id: str, num_envs: int, hidden: tuple[int, ...], seed: int) -> None:
        # The passive env checker only validates the first calls; skipping it changes no
        # dynamics and keeps one wrapper layer out of every step.
        self.envs = [gym.make(env_id, disable_env_checker=True) for _ in range(num_envs)]
        space = self.envs[0].observation_space
        self.policy = MLPPolicy(space, self.envs[0].action_space, hidden, seed)
        self.obs = np.zeros((num_envs, int(np.prod(space.shape or ()))), np.float32)
        for i, env in enumerate(self.envs):
            self.obs[i] = env.reset(seed=seed * 10_007 + i)[0]
        self.episodes = 0
        self.pid = os.getpid()

    def run(self, n: int, collect: bool) -> int | Trajectories:
        """Step n times in total (round-robin over envs); a count, or the trajectories."""
        envs, obs, k = self.envs, self.obs, len(self.envs)
        traj = self._alloc(n) if collect else None
        done = 0
        discrete = self.policy.discrete
        while done < n:
            active = min(k, n - done)
            actions = self.policy(obs[:active])
            if traj is not None:
                traj.obs[done : done + active] = obs[:active]
                traj.actions[done : done + active] = actions
            # Python ints take Discrete.contains' fast path; a numpy scalar costs ~30 % of
            # a CartPole step in its dtype checks.
            step_actions = actions.tolist() if discrete else actions
            for i in range(active):
                o, r, term, trunc, _ = envs[i].step(step_actions[i])
                if traj is not None:
                    j = done + i
                    traj.rewards[j] = r
                    traj.terminated[j] = term
                    traj.truncated[j] = trunc
                if term or trunc:
                    # Same-step autoreset: the next policy call sees the new episode.
                    o, _ = envs[i].reset()
                    self.episodes += 1
                obs[i] = o
            done += active
        return traj if traj is not None else done

    def _alloc(self, n: int) -> Trajectories:
        space = self.envs[0].action_space
        act_shape = (n,) if self.policy.discrete else (n, *(space.shape or ()))
        act_dtype = np.int64 if self.policy.discrete else np.float32
        return Trajectories(
            obs=np.empty((n, self.obs.shape[1]), np.float32),
            actions=np.empty(act_shape, act_dtype),
            rewards=np.empty(n, np.float32),
            terminated=np.empty(n, np.bool_),
            truncated=np.empty(n, np.bool_),
        )

    def close(self) -> None:
        for env in self.envs:
            env.close()
