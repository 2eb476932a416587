"""MkDocs hooks (mkdocs.yml ``hooks:``): links from the docs into the repository.

The pages in ``docs/`` link to the repository's own files as relative paths
(``../tests/launcher/test_recovery.py``, ``../slurm/README.md``), so the links work on
GitHub too.  A site cannot reach outside ``docs/``, so the build takes every repository
file a page links to into the site under ``src/`` (Markdown files as pages, whose own
links are followed the same way; everything else as is) and rewrites the links to
those copies.  A link to a file that does not exist is a warning, which ``mkdocs build
--strict`` (tests/test_docs.py) turns into a failure, as MkDocs does for pages.
"""

from __future__ import annotations

import logging
import os
import posixpath
import re
from collections.abc import Iterator
from pathlib import Path

from mkdocs.config.defaults import MkDocsConfig
from mkdocs.structure.files import File, Files, InclusionLevel
from mkdocs.structure.pages import Page

log = logging.getLogger("mkdocs.hooks.syndeo")

ROOT = Path(__file__).resolve().parent.parent
SRC = "src"  # where the repository's files go in the site

# [text](target "title") and ![alt](target): the target, without <> and title.
_LINK = re.compile(r"\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
_FENCE = re.compile(r"^\s*(```|~~~)")
_CODE_SPAN = re.compile(r"(`+)(?:.+?)\1")


def _masked(text: str) -> str:
    """``text`` with fenced blocks and code spans blanked out (same length), so that
    a ``[x](y)`` in code is not taken for a link."""
    out: list[str] = []
    fence: str | None = None
    for line in text.splitlines(keepends=True):
        m = _FENCE.match(line)
        if fence is not None:
            if m and m.group(1) == fence:
                fence = None
            out.append(" " * len(line.rstrip("\n")) + ("\n" if line.endswith("\n") else ""))
            continue
        if m:
            fence = m.group(1)
            out.append(" " * len(line.rstrip("\n")) + ("\n" if line.endswith("\n") else ""))
            continue
        out.append(_CODE_SPAN.sub(lambda s: " " * len(s.group(0)), line))
    return "".join(out)


def _links(text: str) -> Iterator[tuple[int, int, str]]:
    """(start, end, target) of every relative link outside code."""
    for m in _LINK.finditer(_masked(text)):
        target = text[m.start(1) : m.end(1)]
        if re.match(r"^[a-z][a-z0-9+.-]*:", target) or target.startswith(("#", "/")):
            continue  # a URL, an anchor on the same page, a site-absolute path
        yield m.start(1), m.end(1), target


def _resolve(source: Path, target: str) -> tuple[Path, str]:
    """The file a link in ``source`` names, and its #anchor (or "")."""
    path, _, anchor = target.partition("#")
    resolved = Path(os.path.normpath(source.parent / path)) if path else source
    if resolved.is_dir() and (resolved / "README.md").is_file():
        resolved = resolved / "README.md"
    return resolved, f"#{anchor}" if anchor else ""


def _site_uri(path: Path, docs: Path) -> str | None:
    """The file's src_uri in the site: as is under docs/, under src/ for the rest of
    the repository; None outside the repository."""
    if path.is_relative_to(docs):
        return path.relative_to(docs).as_posix()
    if path.is_relative_to(ROOT):
        return f"{SRC}/{path.relative_to(ROOT).as_posix()}"
    return None


def on_files(files: Files, config: MkDocsConfig) -> Files:
    """Add every repository file the pages link to (transitively through Markdown)."""
    docs = Path(config.docs_dir).resolve()
    todo = [Path(f.abs_src_path) for f in files.documentation_pages() if f.abs_src_path]
    seen: set[Path] = set()
    while todo:
        page = todo.pop()
        for _start, _end, target in _links(page.read_text(encoding="utf-8")):
            path, _anchor = _resolve(page, target)
            uri = _site_uri(path, docs)
            if uri is None or path.is_relative_to(docs) or path in seen or not path.is_file():
                continue  # missing ones are reported per page (on_page_markdown)
            seen.add(path)
            # Reachable by links; the nav lists the ones a reader looks for (mkdocs.yml).
            files.append(
                File.generated(
                    config, uri, abs_src_path=str(path), inclusion=InclusionLevel.NOT_IN_NAV
                )
            )
            if path.suffix == ".md":
                todo.append(path)
    return files


def on_page_markdown(markdown: str, page: Page, config: MkDocsConfig, files: Files) -> str:
    """Point links at the site's copies; warn about links to nothing."""
    if page.file.abs_src_path is None:
        return markdown
    docs = Path(config.docs_dir).resolve()
    source = Path(page.file.abs_src_path)
    here = posixpath.dirname(page.file.src_uri)
    out: list[str] = []
    last = 0
    for start, end, target in _links(markdown):
        path, anchor = _resolve(source, target)
        uri = _site_uri(path, docs)
        if uri is None or not path.exists():
            log.warning("%s: link to %s, which does not exist", page.file.src_uri, target)
            continue
        if path.is_relative_to(docs) and source.is_relative_to(docs):
            continue  # MkDocs checks these itself
        out += [markdown[last:start], posixpath.relpath(uri, here or ".") + anchor]
        last = end
    out.append(markdown[last:])
    return "".join(out)
