#!/usr/bin/env python3
"""Rebuild the committed seed corpus fuzz/corpus/<target> after a long run.

Usage, from the repository root, after `RUSTC_BOOTSTRAP=1 cargo fuzz build`:

    python3 fuzz/seed.py TARGET [--max-files 64]

libFuzzer merges fuzz/corpus/<target> and fuzz/work/<target> by edge
coverage (`-merge=1 -use_counters=0`, the `cargo fuzz cmin` step). From
that result the script keeps a greedy set cover of the edges: first the
file that adds the most edges, then the next, up to --max-files files.
It replaces fuzz/corpus/<target> with those files, named by their SHA-1
as libFuzzer names them, and prints how many edges they keep.
"""

import argparse
import hashlib
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

FUZZ = Path(__file__).resolve().parent
BINARIES = FUZZ / "target" / "x86_64-unknown-linux-gnu" / "release"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("target")
    parser.add_argument("--max-files", type=int, default=64)
    args = parser.parse_args()
    binary = BINARIES / args.target
    corpus = FUZZ / "corpus" / args.target
    sources = [d for d in (corpus, FUZZ / "work" / args.target) if d.is_dir()]
    if not binary.is_file():
        sys.exit(f"{binary} missing: run `RUSTC_BOOTSTRAP=1 cargo fuzz build` first")
    with tempfile.TemporaryDirectory() as tmp:
        merged, control = Path(tmp) / "merged", Path(tmp) / "control"
        merged.mkdir()
        subprocess.run(
            [binary, "-merge=1", "-use_counters=0", f"-merge_control_file={control}",
             merged, *sources],
            check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )
        lines = control.read_text().splitlines()
        files = lines[2 : 2 + int(lines[0])]
        edges = {}
        for line in lines[2 + len(files) :]:
            if line.startswith("COV "):
                index, *pcs = line.split()[1:]
                edges[int(index)] = set(pcs)
        total = set().union(*edges.values()) if edges else set()
        kept, covered = [], set()
        while len(kept) < args.max_files and edges:
            best = max(edges, key=lambda i: len(edges[i] - covered))
            if not edges[best] - covered:
                break
            covered |= edges.pop(best)
            kept.append(Path(files[best]).read_bytes())
    shutil.rmtree(corpus, ignore_errors=True)
    corpus.mkdir(parents=True)
    for data in kept:
        (corpus / hashlib.sha1(data).hexdigest()).write_bytes(data)
    size = sum(len(d) for d in kept)
    print(f"{args.target}: {len(kept)} files, {size} bytes, "
          f"{len(covered)} of {len(total)} edges")
    return 0


if __name__ == "__main__":
    sys.exit(main())
