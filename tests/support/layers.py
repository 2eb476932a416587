"""The package's import contract, read from the source (every import, lazy ones too).

Layers, bottom to top; each may import only the layers its entry names (and itself):

    core            the contract both sides share: node settings, groups, GPUs,
                    timeline, secure files, errors
    rendezvous      where nodes and launchers meet
    node            the node runtime: runs on every node
    image.manifest  what a launcher checks about an image
    image.build     building an image
    bench           the benchmark workload
    compare         cost/throughput comparison of results
    launcher        spec, config, state, UI, the per-node command
    targets         how machines appear (launcher/targets)
    verbs           autoscale, deploy, grow, preflight, recovery, status, watch (launcher)
    api             the Python API (syndeo.up, deploy, Cluster, Job)
    cli             the command line's verbs, built on the API, and their declarations

Nothing in the package imports a test bed, a benchmark of the project itself or a test.
"""

from __future__ import annotations

import ast
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

ALLOWED: dict[str, set[str]] = {
    "core": set(),
    "rendezvous": {"core"},
    "node": {"core", "rendezvous"},
    "image.manifest": {"core"},
    "image.build": {"core", "image.manifest"},
    "bench": {"core"},
    "compare": {"core", "bench"},
    "launcher": {"core", "rendezvous", "image.manifest", "bench", "compare"},
    "targets": {"core", "rendezvous", "image.manifest", "bench", "compare", "launcher"},
    "verbs": {"core", "rendezvous", "image.manifest", "bench", "compare", "launcher", "targets"},
    "api": {"core", "rendezvous", "image.manifest", "bench", "compare", "launcher", "targets"}
    | {"verbs"},
    "cli": {"core", "rendezvous", "node", "image.manifest", "image.build", "bench"}
    | {"compare", "launcher", "targets", "verbs", "api"},
}
OUTSIDE = ("testbeds", "benchmarks", "tests")


def layer_of(module: str) -> str | None:
    """The layer of ``syndeo.x.y`` (None: the package root: the version, the API's names)."""
    parts = module.split(".")
    if parts[0] != "syndeo" or len(parts) == 1 or parts[1] in ("__main__",):
        return "cli" if parts[1:2] == ["__main__"] else None
    top = parts[1]
    if top == "image":
        return "image.manifest" if parts[2:3] == ["manifest"] else "image.build"
    if top == "launcher":
        if parts[2:3] == ["targets"]:
            return "targets"
        verbs = ("autoscale", "deploy", "grow", "preflight", "recovery", "status", "watch")
        if parts[2:3] and parts[2] in verbs:
            return "verbs"
        return "launcher"
    return top if top in ALLOWED else f"unknown:{top}"


def module_name(root: Path, path: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports_of(root: Path, path: Path) -> set[str]:
    """Every module ``path`` imports, absolute, wherever the import statement is."""
    me = module_name(root, path)
    package = me if path.name == "__init__.py" else me.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                mod = ".".join([*base, node.module] if node.module else base)
            else:
                mod = node.module or ""
            for alias in node.names:
                candidate = f"{mod}.{alias.name}"
                as_file = root / Path(*candidate.split("."))
                is_module = as_file.with_suffix(".py").exists() or as_file.is_dir()
                found.add(candidate if is_module else mod)
    return found


@dataclass
class Report:
    violations: list[str]
    file_cycles: list[list[str]]
    layer_cycles: list[list[str]]


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one member (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            scc = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                scc.append(w)
                if w == v:
                    break
            if len(scc) > 1:
                out.append(sorted(scc))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def check(root: Path) -> Report:
    """``root`` holds the ``syndeo`` package (a checkout, or a copy with a planted import)."""
    files = sorted(p for p in (root / "syndeo").rglob("*.py") if "__pycache__" not in p.parts)
    modules = {module_name(root, p): p for p in files}
    violations: list[str] = []
    graph: dict[str, set[str]] = defaultdict(set)
    layers: dict[str, set[str]] = defaultdict(set)
    for name, path in modules.items():
        mine = layer_of(name)
        if mine is not None and mine.startswith("unknown:"):
            violations.append(f"{name}: in no layer ({mine[8:]}): name its layer in ALLOWED")
        for target in sorted(imports_of(root, path)):
            head = target.split(".")[0]
            if head in OUTSIDE:
                violations.append(f"{name} imports {target} (outside the package)")
                continue
            if head != "syndeo":
                continue
            # importing a package means its __init__ (a name in it is resolved above)
            dep = target if target in modules else target.rpartition(".")[0]
            while dep and dep not in modules:
                dep = dep.rpartition(".")[0]
            # The package root's imports are its API's names, re-exported on first use
            # (PEP 562 __getattr__): the modules that read the root's version do not
            # import the API through it, so those are no cycle.
            if dep and dep != name and name != "syndeo":
                graph[name].add(dep)
            theirs = layer_of(target)
            if mine is None or theirs is None or theirs == mine:
                continue
            layers[mine].add(theirs)
            if theirs not in ALLOWED.get(mine, set()):
                violations.append(f"{name} ({mine}) imports {target} ({theirs})")
    return Report(violations, _cycles(graph), _cycles(layers))
