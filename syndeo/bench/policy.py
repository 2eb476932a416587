"""A fully connected policy evaluated in NumPy on a whole batch of observations.

The paper's actors each ran "a fully connected neural network"; the weights are
random (no learning happens in a throughput benchmark) but the arithmetic is the
real cost of inference: one matmul chain per vector step, not per env.
"""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np
from gymnasium import spaces
from numpy.typing import NDArray


class MLPPolicy:
    """obs -> hidden ReLU layers -> action (argmax for Discrete, tanh-scaled for Box)."""

    def __init__(
        self,
        obs_space: spaces.Space[Any],
        act_space: spaces.Space[Any],
        hidden: tuple[int, ...],
        seed: int,
    ) -> None:
        rng = np.random.default_rng(seed)
        obs_dim = int(np.prod(obs_space.shape or ()))
        if isinstance(act_space, spaces.Discrete):
            self.discrete = True
            out_dim = int(act_space.n)
        elif isinstance(act_space, spaces.Box):
            self.discrete = False
            out_dim = int(np.prod(act_space.shape))
            low = act_space.low.astype(np.float32)
            high = act_space.high.astype(np.float32)
            self._mid = (high + low) / 2
            self._half = (high - low) / 2
        else:  # none of the 14 envs has another action space
            raise TypeError(f"unsupported action space {act_space}")
        sizes = [obs_dim, *hidden, out_dim]
        # He-style init keeps activations O(1) so tanh does not saturate to the bounds.
        self.weights = [
            (rng.standard_normal((a, b)) * np.sqrt(2.0 / a)).astype(np.float32)
            for a, b in itertools.pairwise(sizes)
        ]
        self.biases = [np.zeros(b, np.float32) for b in sizes[1:]]

    def __call__(self, obs: NDArray[np.float32]) -> NDArray[np.generic]:
        h = obs
        last = len(self.weights) - 1
        for i, (w, b) in enumerate(zip(self.weights, self.biases, strict=True)):
            h = h @ w + b
            if i < last:
                np.maximum(h, 0, out=h)
        if self.discrete:
            return np.asarray(np.argmax(h, axis=1))
        return np.asarray(np.tanh(h) * self._half + self._mid)
