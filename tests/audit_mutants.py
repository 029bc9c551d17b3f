"""The six mutants of the audit's measuring rules (issue 38 item 7) that tests/test_audit_rules.py must kill.

Run from the repository root: `.venv/bin/python tests/audit_mutants.py`. Each mutant is applied to the source as a
scratch edit, tests/test_audit_rules.py is run, the edit is reverted (always, in `finally`), and the tests that
failed are printed; the script exits 1 if a mutant survives. Not collected by pytest (no `test_` prefix): it
rewrites source files while it runs, so never run it beside other test runs of the same worktree.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MUTANTS = [
    ("a name inside another document's text counted as shown", "workbench/audit/measure.py",
     "any(n in t.residue for n in names)", "any(n in t.text for n in names)"),
    ("a whole-record tool result never full", "workbench/audit/units.py",
     'data.get("score"), 1, whole=bool(content))', 'data.get("score"), 1, whole=False)'),
    ("a minimum name length of 1", "workbench/audit/measure.py", "_MIN_NAME = 3", "_MIN_NAME = 1"),
    ("an answer-only earlier turn taken as dropped", "workbench/audit/audited.py",
     '        context = "answer"', '        context = "dropped"'),
    ('the <document index="n"> block form not recognised', "workbench/audit/measure.py",
     ",\n           re.compile(r'<document index=\"(\\d{1,4})\">'))", ")"),
    ("the question not removed before names are searched", "workbench/audit/measure.py",
     '                residue = residue.replace(q, "\\0")', "                pass"),
]


def main() -> int:
    survived = 0
    for name, rel, old, new in MUTANTS:
        path = ROOT / rel
        source = path.read_text(encoding="utf-8")
        if source.count(old) != 1:
            print(f"mutant {name!r}: its text is not found once in {rel}; update this script")
            return 2
        path.write_text(source.replace(old, new), encoding="utf-8")
        try:
            run = subprocess.run([sys.executable, "-m", "pytest", "-n", "0", "-q", "-p", "no:warnings",
                                  "tests/test_audit_rules.py"], cwd=ROOT, capture_output=True, text=True)
        finally:
            path.write_text(source, encoding="utf-8")
        failed = sorted({line.split("::")[1].split("[")[0] for line in run.stdout.splitlines()
                         if line.startswith("FAILED")})
        survived += not failed
        print(f"mutant {name!r}: {'SURVIVED' if not failed else 'killed by ' + ', '.join(failed)}")
    return 1 if survived else 0


if __name__ == "__main__":
    sys.exit(main())
