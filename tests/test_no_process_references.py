"""Nothing the package ships cites the project's own process: an "issue 21" in a printed
message, a catalog's Source column (shown by `plan --explain` and `prices`), a recipe's
header (`recipes show`) or a docstring is a reference no user can follow. Every file under
finetune/ is read, code and data alike: text names the real source, a comment its reason."""

from __future__ import annotations

import re
from pathlib import Path

import finetune

PACKAGE = Path(finetune.__file__).parent
CITATION = re.compile(r"\bissues?\s*#?\s*\d+|\bthe issue(?:'s)?\b", re.IGNORECASE)


def test_no_file_in_the_package_cites_an_issue():
    found = []
    for path in sorted(PACKAGE.rglob("*")):
        if not path.is_file() or "__pycache__" in path.parts:
            continue
        try:
            text = path.read_text()
        except UnicodeDecodeError:  # a binary file (none is shipped today)
            continue
        for number, line in enumerate(text.splitlines(), 1):
            if CITATION.search(line):
                found.append(f"{path.relative_to(PACKAGE.parent)}:{number}: {line.strip()[:100]}")
    assert not found, "cite the real source or the reason instead:\n" + "\n".join(found)
