"""The paper's 14 environments and how their ids map between Gymnasium versions.

The paper used the ``-v4`` MuJoCo ids; Gymnasium's current ones are ``-v5``.
Classic-control envs have one id in both.  Results record the id actually run.
"""

from __future__ import annotations

from typing import Literal

from syndeo.bench.errors import BenchError

EnvVersion = Literal["v5", "v4"]

# name -> (id with the current MuJoCo version, True if MuJoCo-based)
_ENVS: dict[str, tuple[str, bool]] = {
    "Acrobot": ("Acrobot-v1", False),
    "Ant": ("Ant-v5", True),
    "CartPole": ("CartPole-v1", False),
    "HalfCheetah": ("HalfCheetah-v5", True),
    "Hopper": ("Hopper-v5", True),
    "Humanoid": ("Humanoid-v5", True),
    "HumanoidStandup": ("HumanoidStandup-v5", True),
    "InvertedDoublePendulum": ("InvertedDoublePendulum-v5", True),
    "InvertedPendulum": ("InvertedPendulum-v5", True),
    "Pendulum": ("Pendulum-v1", False),
    "Pusher": ("Pusher-v5", True),
    "Reacher": ("Reacher-v5", True),
    "Swimmer": ("Swimmer-v5", True),
    "Walker2d": ("Walker2d-v5", True),
}

ENV_NAMES: tuple[str, ...] = tuple(_ENVS)


def env_id(name: str, version: EnvVersion = "v5") -> str:
    """Gymnasium id of one of the paper's envs for the requested MuJoCo version."""
    current, mujoco = _ENVS[name]
    return current[:-2] + version if mujoco else current


def env_name(gym_id: str) -> str:
    """The paper's name for a Gymnasium id (``Ant-v4`` -> ``Ant``)."""
    return gym_id.rsplit("-", 1)[0]


def resolve(requested: list[str], version: EnvVersion) -> list[str]:
    """Expand ``all`` and names, validate ids; raises BenchError on an unknown one.

    Accepted: ``all``, a paper name (``Ant``, case-insensitive) or a full id of one
    of the 14 envs (``Ant-v4``).  Anything else is refused before Ray starts.
    """
    by_lower = {n.lower(): n for n in ENV_NAMES}
    known_ids = {env_id(n, v) for n in ENV_NAMES for v in ("v4", "v5")}
    out: list[str] = []
    for item in requested or ["all"]:
        if item.lower() == "all":
            out.extend(env_id(n, version) for n in ENV_NAMES)
        elif item.lower() in by_lower:
            out.append(env_id(by_lower[item.lower()], version))
        elif item in known_ids:
            out.append(item)
        else:
            raise BenchError(
                f"unknown environment {item!r}: use 'all', one of {', '.join(ENV_NAMES)}, "
                "or an id such as Ant-v5 / Ant-v4"
            )
    return list(dict.fromkeys(out))


def check_registered(ids: list[str], required: bool = False) -> None:
    """BenchError if Gymnasium does not register one of ``ids`` (MuJoCo is not imported).

    ``required``: a missing Gymnasium is an error (on a node about to run the ids);
    otherwise (on a launcher, which need not have the bench extra) the check is skipped.
    """
    try:
        import gymnasium
    except ModuleNotFoundError:
        if required:
            raise
        return
    missing = [i for i in ids if i not in gymnasium.envs.registry]
    if missing:
        raise BenchError(
            f"Gymnasium {gymnasium.__version__} does not register {', '.join(missing)}: "
            "pick another id (-v5 / -v4) or another Gymnasium version"
        )
