"""Hostile input, class by class, with the bound that now holds (issue 17). Prints medians.

    .venv/bin/python benchmarks/hostile.py [--repeats 3] [--only NAME,…]

Every case runs as a fresh process (what a user or the app pays), measured from outside: wall time
and the process's peak resident memory (`wait4` rusage). Each case also checks its outcome — a bomb
refused with a message, an answer printed, a query stopped — so a figure is never the time of a
failure it should not have. Figures and the command are in benchmarks/README.md.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import random
import shutil
import statistics
import struct
import subprocess
import sys
import tempfile
import textwrap
import time
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
WORDS = "flux widget calibrate panel press button light reset alpha beta gamma delta".split()


def run(args: list[str], env: dict | None = None) -> tuple[float, float, int, str, str]:
    """(seconds, peak MB, exit code, stdout, stderr) of `python ARGS` as a fresh process; the peak is that
    process's own maximum resident set size, from `wait4`."""
    full_env = {**os.environ, "OMP_WAIT_POLICY": "PASSIVE", **(env or {})}
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        t0 = time.perf_counter()
        p = subprocess.Popen([sys.executable, *args], cwd=ROOT, env=full_env, stdin=subprocess.DEVNULL,
                             stdout=out, stderr=err, text=True)
        _, status, usage = os.wait4(p.pid, 0)
        seconds = time.perf_counter() - t0
        p.returncode = os.waitstatus_to_exitcode(status)  # reaped here; Popen must not wait again
        out.seek(0)
        err.seek(0)
        return seconds, usage.ru_maxrss / 1024, p.returncode, out.read(), err.read()


def python(code: str, env: dict | None = None):
    return run(["-c", textwrap.dedent(code)], env=env)


# --- inputs ----------------------------------------------------------------------------------------


def yaml_bomb(shape: str, depth: int = 12, width: int = 10) -> str:
    if shape == "sequence":
        lines = ["a0: &a0 [" + ", ".join(["lol"] * width) + "]"]
        lines += [f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * width) + "]" for i in range(1, depth)]
        lines.append(f"derived_from: *a{depth - 1}")
    else:
        lines = ["b0: &b0 {" + ", ".join(f"k{j}: lol" for j in range(width)) + "}"]
        lines += [f"b{i}: &b{i} {{" + ", ".join(f"k{j}: *b{i - 1}" for j in range(width)) + "}" for i in range(1, depth)]
        lines.append(f"derived_from: [*b{depth - 1}]")
    return "---\nid: bomb\ntitle: Bomb\n" + "\n".join(lines) + "\n---\nBody.\n"


def lying_zip() -> bytes:
    """A member declared as 100 bytes that inflates to 50 MB."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("kb/a.md", b"---\nid: z\n---\n" + b"\0" * 50_000_000)
    out = bytearray(buf.getvalue())
    for sig, at in ((b"PK\x03\x04", 22), (b"PK\x01\x02", 24)):
        i = out.find(sig)
        out[i + at:i + at + 4] = struct.pack("<I", 100)
    return bytes(out)


def honest_zip_bomb() -> bytes:
    """1 GB of zeros, honestly declared, in a ~1 MB zip."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
        with zf.open("kb/a.md", "w", force_zip64=True) as f:
            block = b"\0" * (1 << 24)
            for _ in range(64):
                f.write(block)
    return buf.getvalue()


def one_line(n_words: int, seed: int = 1) -> str:
    rnd = random.Random(seed)
    return " ".join(rnd.choice(WORDS) for _ in range(n_words))


# --- cases ---------------------------------------------------------------------------------------


def cases(tmp: Path) -> dict:
    """name -> (bound, callable returning (seconds, peak MB, ok?, note))."""
    out = {}
    for shape in ("sequence", "mapping"):
        d = tmp / f"bomb-{shape}"
        d.mkdir()
        (d / "bomb.md").write_text(yaml_bomb(shape))

        def bomb(d=d):
            s, mb, code, _, err = run(["-m", "workbench", "ask", "--no-trace", "--corpus", str(d), "hello"])
            return s, mb, code == 2 and "alias" in err, err.strip()[:80]
        out[f"YAML alias bomb ({shape}, 10^12 leaves), CLI"] = ("refused: no aliases in front matter", bomb)

    big = tmp / "big-front-matter"
    big.mkdir()
    (big / "big.md").write_text("---\nid: big\ntitle: " + "x" * 1_000_000 + "\n---\nBody.\n")

    def front_matter():
        s, mb, code, _, err = run(["-m", "workbench", "ask", "--no-trace", "--corpus", str(big), "hello"])
        return s, mb, code == 2 and "larger than 64 KB" in err, err.strip()[:80]
    out["1 MB of front matter, CLI"] = ("refused above 64 KB", front_matter)

    for name, data, needle in (("zip member lying about its size (50 MB as 100 bytes)", lying_zip(), "damaged"),
                               ("honest zip bomb (1 GB of zeros in ~1 MB)", honest_zip_bomb(), "expands to more")):
        f = tmp / f"{abs(hash(name))}.zip"
        f.write_bytes(data)

        def upload(f=f, needle=needle):
            s, mb, code, outp, err = python(f"""
                from pathlib import Path
                from workbench.errors import CorpusError
                from workbench.ui.uploads import save_upload
                try:
                    save_upload("kb.zip", Path({str(f)!r}).read_bytes(), Path({str(tmp / 'uploads')!r}))
                except CorpusError as exc:
                    print("refused:", exc)
            """)
            return s, mb, "refused:" in outp and needle in outp, outp.strip()[:80]
        out[f"{name}, app upload"] = ("refused; at most 50 MB inflated, CRC and sizes checked", upload)

    pdf_dir = tmp / "pdf-bomb"
    pdf_dir.mkdir()
    sys.path.insert(0, str(ROOT / "tests"))
    from test_hostile_corpus import content_bomb_pdf  # the same forged PDF the tests use

    (pdf_dir / "bomb.pdf").write_bytes(content_bomb_pdf(pages=1, ops=3_000_000))

    def pdf_bomb():
        s, mb, code, _, err = run(["-m", "workbench", "ask", "--no-trace", "--corpus", str(pdf_dir), "hello"])
        return s, mb, code == 2 and "16 MB of page content" in err, err.strip()[:80]
    out["30 KB PDF whose page inflates to 21 MB of operators, CLI"] = ("refused before parsing (16 MB a file)",
                                                                        pdf_bomb)

    many = tmp / "many.jsonl"
    many.write_text("".join(json.dumps({"id": str(i), "text": "t"}) + "\n" for i in range(200_000)))

    def documents():
        s, mb, code, outp, err = python(f"""
            from workbench.errors import CorpusError
            from workbench.ui.caches import load_app_corpus
            try:
                load_app_corpus({str(many)!r})
            except CorpusError as exc:
                print("refused:", exc)
        """)
        return s, mb, "more than 20,000 documents" in outp, outp.strip()[:80]
    out["200,000-document JSONL, app corpus"] = ("refused above 20,000 documents", documents)

    anchor_home = tmp / "home-anchor"

    def anchor():
        s, mb, code, outp, err = run(["-m", "workbench", "ask", "--db", str(anchor_home / "t.duckdb"),
                                      "How do I configure SSO?"], env={"WORKBENCH_HOME": str(anchor_home)})
        return s, mb, code == 0 and "Sources:" in outp, "the same command on the 55-document demo corpus"
    anchor()  # build its index once: the anchor is the cached-index cost of any ask on this machine now
    out["anchor: ask on the demo corpus, index cached"] = ("(machine anchor, same run)", anchor)

    for kind, text in (("random words, no sentence end", one_line(170_000)),
                       ("help-center prose on one line", _prose_line())):
        f = tmp / f"{kind[:6]}.jsonl"
        f.write_text(json.dumps({"id": "long", "title": "Long", "text": text[:1_000_000]}) + "\n")
        home = tmp / f"home-{kind[:6]}"

        def ask(f=f, home=home, cold=True):
            if cold:
                shutil.rmtree(home, ignore_errors=True)
            s, mb, code, outp, err = run(["-m", "workbench", "ask", "--corpus", str(f), "--db", str(home / "t.duckdb"),
                                          "How do I calibrate the flux widget panel?"], env={"WORKBENCH_HOME": str(home)})
            return s, mb, code == 0 and "Sources:" in outp, f"answer {len(outp)} chars"
        out[f"1 MB one-line document ({kind}), ask, cold (index built)"] = ("≤ 5 s (issue target)", ask)
        out[f"1 MB one-line document ({kind}), ask, index cached"] = ("≤ 5 s (issue target)",
                                                                      lambda ask=ask: ask(cold=False))

    claim = one_line(9000)
    jf = tmp / "judge.jsonl"
    jf.write_text(json.dumps({"id": "big", "claim": claim, "evidence": [one_line(20_000, 2), claim[: len(claim) // 2]]})
                  + "\n")

    def judge():
        s, mb, code, outp, err = run(["-m", "workbench", "judge", str(jf), "--json"])
        return s, mb, code == 0 and '"score"' in outp, outp.strip()[:80]
    out["judge: 9,000-word claim vs 29,000 words of evidence"] = ("linear tiling (was > 2 min)", judge)

    def text_functions():
        s, mb, code, outp, err = python("""
            import time
            from workbench import text
            from workbench.render.escaping import escape_markdown
            from workbench.faithfulness.claims import split_claims
            from workbench.faithfulness.judges import parse_verdict
            from workbench.provenance import sources_payload
            from workbench.types import ResultItem, ToolCall, TurnRecord
            t0 = time.perf_counter()
            for unit in ["[", "![", "[a](", "[1", "{", "[x](u) ", "](", "<", "```x", "\\n", "www.", "a@b."]:
                s = unit * (1_000_000 // len(unit))
                text.plain(s); text.sentences(s); parse_verdict(s)
                rec = TurnRecord("q", s, tool_calls=(ToolCall("fetch_document", "full", {}, (ResultItem("d", "D"),)),))
                p = sources_payload(rec); split_claims(s, p.citations); escape_markdown(s)
            print(f"{time.perf_counter() - t0:.2f}")
        """)
        return s, mb, code == 0, f"12 families x 1 MB: {outp.strip()} s inside the process"
    out["hostile 1 MB strings through every text function"] = ("linear regexes (`[`*50k was 60 s)", text_functions)

    for where, line in (("corpus", f'{{"id": {"1" * 5000}, "text": "x"}}'),):
        f = tmp / "bigint.jsonl"
        f.write_text(line + "\n")

        def bigint(f=f):
            s, mb, code, _, err = run(["-m", "workbench", "ask", "--no-trace", "--corpus", str(f), "q"])
            return s, mb, code == 2 and "4,300 digits" in err, err.strip()[:80]
        out["5,000-digit integer in a corpus line"] = ("error: file:line, exit 2", bigint)

    db = tmp / "slow.duckdb"

    def slow_query():
        if not db.exists():
            run(["-m", "workbench", "ask", "--db", str(db), "How do I configure SSO?"])
        s, mb, code, _, err = run(["-m", "workbench", "sql", "--db", str(db), "--timeout", "2",
                                   "SELECT sum(hash(a.range * b.range)) FROM range(100000000) a, range(1000) b"])
        return s, mb, code == 2 and "stopped after 2 s" in err, err.strip()[:80]
    out["a 10^11-row user query holding the trace file"] = ("stopped after --timeout 2 s", slow_query)

    good = tmp / "good.duckdb"

    def damaged():
        if not good.exists():
            run(["-m", "workbench", "eval", str(ROOT / "data" / "demo_gold.jsonl"), "--db", str(good), "--no-progress"])
        bad = tmp / "damaged.duckdb"
        shutil.copy(good, bad)
        with open(bad, "r+b") as f:
            f.seek(bad.stat().st_size - 262144)
            f.write(b"\xab" * 262144)
        s, mb, code, outp, err = run(["-m", "workbench", "ask", "--db", str(bad), "How do I configure SSO?"])
        return s, mb, code == 1 and "Sources:" in outp and "not traced" in err, err.strip()[:80]
    out["ask on a trace database with its tail overwritten"] = ("answer + warning, exit 1", damaged)
    return out


def _prose_line() -> str:
    text = " ".join(" ".join(p.read_text(encoding="utf-8").split()) for p in sorted((ROOT / "data" / "demo").rglob("*.md")))
    return (text + " ") * (1_000_000 // len(text) + 1)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--only", help="comma-separated substrings of case names")
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="hostile-"))
    os.environ.setdefault("WORKBENCH_HOME", str(tmp / "home"))
    try:
        print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores at the start")
        print(f"| case | bound | median s | peak MB | outcome |\n|---|---|---|---|---|")
        for name, (bound, fn) in cases(tmp).items():
            if args.only and not any(w in name for w in args.only.split(",")):
                continue
            runs = [fn() for _ in range(args.repeats)]
            ok = all(r[2] for r in runs)
            print(f"| {name} | {bound} | {statistics.median(r[0] for r in runs):.2f} | "
                  f"{max(r[1] for r in runs):.0f} | {'ok' if ok else 'FAILED'}: {runs[-1][3]} |", flush=True)
        print(f"load average {os.getloadavg()[0]:.1f} at the end")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
