#!/usr/bin/env python3
"""Check every argument a Terraform module uses against a provider's own documentation.

For providers that cannot be downloaded (so `terraform validate` cannot run), this is
the offline evidence that each resource/data argument and nested block exists in the
pinned versions:

    git clone https://github.com/hashicorp/terraform-provider-google
    .venv/bin/python scripts/check-provider-docs.py terraform-provider-google google_ \
        terraform/gcp v6.0.0 v7.45.0

For each git tag it reads website/docs/{r,d}/<type>.html.markdown and requires each
argument to be listed (``* `name` ``) in the section of its enclosing block when the
page has one, else anywhere on the page.  Exit 1 if anything is missing.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import hcl2

META = {"count", "for_each", "depends_on", "lifecycle", "provider"}


def _uq(s: str) -> str:
    return s.strip('"')


def _walk(body: dict[str, Any], path: tuple[str, ...], out: set[tuple[str, ...]]) -> None:
    for key, value in body.items():
        k = _uq(key)
        if k in META or k.startswith("__"):
            continue
        if k == "dynamic":
            for dyn in value if isinstance(value, list) else [value]:
                for name, spec in dyn.items():
                    out.add((*path, _uq(name)))
                    for content in spec.get("content", []):
                        _walk(content, (*path, _uq(name)), out)
            continue
        out.add((*path, k))
        if (
            isinstance(value, list)
            and value
            and isinstance(value[0], dict)
            and value[0].get("__is_block__")
        ):
            for block in value:
                _walk(block, (*path, k), out)


def _uses(module: Path) -> dict[tuple[str, str], set[tuple[str, ...]]]:
    uses: dict[tuple[str, str], set[tuple[str, ...]]] = {}
    for f in sorted(module.glob("*.tf")):
        with f.open() as fh:
            doc = hcl2.load(fh)
        for kind in ("resource", "data"):
            for block in doc.get(kind, []):
                for rtype, named in block.items():
                    for body in named.values():
                        _walk(body, (), uses.setdefault((kind, _uq(rtype)), set()))
    return uses


def _page(repo: str, tag: str, kind: str, rtype: str, prefix: str) -> str | None:
    short = rtype[len(prefix) :]
    sub = "r" if kind == "resource" else "d"
    for name in (short, rtype, re.sub(r"_iam_(member|binding|policy)$", "_iam", short)):
        out = subprocess.run(
            ["git", "-C", repo, "show", f"{tag}:website/docs/{sub}/{name}.html.markdown"],
            capture_output=True,
            text=True,
        )
        if out.returncode == 0:
            return out.stdout
    return None


def _section(text: str, block: str) -> str | None:
    """The part of the page that documents ``block`` (google's and azurerm's layouts)."""
    b = re.escape(block)
    google = rf'<a name="nested_\w*"></a>The `{b}` block supports:(.*?)(?=<a name=|\Z)'
    azurerm = (
        rf"(?:An?|The) `{b}` block supports the following:"
        r"(.*?)(?=\n---|\n(?:An?|The) `\w+` block supports|\Z)"
    )
    m = re.search(google, text, re.S) or re.search(azurerm, text, re.S)
    return m.group(1) if m else None


def _listed(scope: str, arg: str) -> bool:
    a = re.escape(arg)
    return bool(re.search(rf"^\*\s+`{a}`|^\*\s+`{a}/\w+`|^\*\s+`\w+/{a}`", scope, re.M))


def main(argv: list[str]) -> int:
    if len(argv) < 4:
        print(__doc__, file=sys.stderr)
        return 2
    repo, prefix, module, tags = argv[0], argv[1], Path(argv[2]), argv[3:]
    uses = {k: v for k, v in _uses(module).items() if k[1].startswith(prefix)}
    bad = 0
    for tag in tags:
        names = 0
        for (kind, rtype), args in sorted(uses.items()):
            text = _page(repo, tag, kind, rtype, prefix)
            if text is None:
                print(f"{tag}: no documentation page for {kind} {rtype}")
                bad += 1
                continue
            for arg in sorted(args):
                names += 1
                scope = (_section(text, arg[-2]) if len(arg) > 1 else None) or text
                if not _listed(scope, arg[-1]):
                    print(f"{tag}: {rtype}: {'.'.join(arg)} is not documented")
                    bad += 1
        print(f"{tag}: {names} arguments of {len(uses)} resource/data types checked")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
