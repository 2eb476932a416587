"""Text from result files as literal Markdown.

Results come from a bucket or a shared directory that every node of a cluster can
write, so a field such as an env id or a CPU model must not become a link, an image,
raw HTML or an extra table cell in a report built from it.
"""

from __future__ import annotations

import re

# Characters that open a Markdown construct inline (links, images, emphasis, code, HTML,
# entities, table cells; # ends a heading).  A backslash makes each literal (CommonMark).
_MD_SPECIAL = re.compile(r"([\\`*_\[\]<>|!~&#])")


def md_text(value: object) -> str:
    """``value`` as literal Markdown, safe in a table cell, heading or list item."""
    one_line = " ".join(str(value).split())  # a newline would end the table row
    return _MD_SPECIAL.sub(r"\\\1", one_line)
