#!/usr/bin/env python3
"""Figures for docs/performance.md, from bench/compare.py's output and a pathological-input sweep.

Usage (from the repository root, ctok importable):
    python bench/plots.py                          # run bench/compare.py, then the sweep, then plot
    python bench/plots.py --compare FILE           # plot a saved compare.py output instead of running it
    python bench/plots.py --no-sweep               # only the MB/s figures

Writes into --out (default docs/performance/):
    compare.txt            compare.py's output, as measured (with date and commit on top)
    mbps_first.png         MB/s per corpus file and family, first pass over the text, ctok vs peers
    mbps_warm.png          the same, best warm pass
    pathological.json      seconds per (family, input, length, library): first pass and a warm pass
    pathological.png       time vs input length on a long letter run and long space runs (log-log)

Timings depend on the machine and its load; ratios between libraries measured back to back much less.
"""
import argparse
import json
import os
import re
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
LIB_COLORS = {"ctok": "#1f77b4", "tiktoken": "#ff7f0e", "hf": "#2ca02c", "fastokens": "#d62728"}

ROW = re.compile(r"(\w+)\s+([\d.]+)/\s*([\d.]+)")


def parse_compare(lines):
    """compare.py output -> {family: {corpus: {lib: (first MB/s, warm MB/s)}}}."""
    out, family = {}, None
    for line in lines:
        if line.startswith("## "):
            family = line[3:].split()[0]
            out[family] = {}
        elif family and line.strip() and not line.startswith(" "):
            name, rest = line.split(None, 1)
            out[family][name] = {m.group(1): (float(m.group(2)), float(m.group(3))) for m in ROW.finditer(rest)}
    return out


def run_compare(path, extra=()):
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    head = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True,
                            text=True).stdout.strip()
    res = subprocess.run([sys.executable, os.path.join(HERE, "compare.py"), *extra], cwd=ROOT, env=env,
                         capture_output=True, text=True, check=True)
    with open(path, "w", encoding="utf-8") as f:
        f.write(f"{head}\n{commit}\n{res.stdout}")
    sys.stderr.write(res.stderr)


def plot_mbps(data, which, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    families = list(data)
    ncol = 2
    nrow = (len(families) + ncol - 1) // ncol
    fig, axes = plt.subplots(nrow, ncol, figsize=(13, 3.2 * nrow), squeeze=False)
    for ax, fam in zip(axes.flat, families):
        rows = data[fam]
        corpora = sorted(rows)
        libs = [lib for lib in LIB_COLORS if any(lib in rows[c] for c in corpora)]
        h = 0.8 / max(1, len(libs))
        for k, lib in enumerate(libs):
            ys = [i + k * h for i in range(len(corpora))]
            xs = [rows[c].get(lib, (0, 0))[which] for c in corpora]
            ax.barh(ys, xs, height=h, color=LIB_COLORS[lib], label=lib)
        ax.set_yticks([i + 0.4 - h / 2 for i in range(len(corpora))])
        ax.set_yticklabels([c.replace(".txt", "") for c in corpora], fontsize=7)
        ax.invert_yaxis()
        ax.set_title(fam, fontsize=10)
        ax.set_xlabel("MB/s (higher is faster)", fontsize=8)
        ax.tick_params(axis="x", labelsize=7)
        ax.legend(fontsize=7, loc="lower right")
    for ax in list(axes.flat)[len(families):]:
        ax.axis("off")
    fig.suptitle("encode_ordinary, one thread, whole corpus file: " + ("first pass" if which == 0 else "best warm pass"))
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)


PATHOLOGICAL = {
    "letters": lambda n: "a" * n,                 # one pre-token of n bytes: BPE merge cost dominates
    "spaces": lambda n: " " * n,                  # one whitespace run
    "spaces+words": lambda n: ("x" + " " * 99) * (n // 100),   # many 99-space runs between letters
}
LENGTHS = [1_000, 3_000, 10_000, 30_000, 100_000, 300_000, 1_000_000]
SWEEP_FAMILIES = ["o200k_base", "llama3-hf"]
BUDGET = 3.0      # a library whose time at one length exceeds this (seconds) is not run at longer lengths


def sweep():
    sys.path.insert(0, HERE)
    sys.path.insert(0, ROOT)
    import compare
    results = []
    for fam in SWEEP_FAMILIES:
        encs = compare.encoders(fam)
        for kind, make in PATHOLOGICAL.items():
            for lib, fn in encs.items():
                for n in LENGTHS:
                    text = make(n)
                    try:
                        first = compare.timed(fn, text)[0]      # text this library has not seen: caches cold
                        warm = compare.timed(fn, text)[0]
                    except KeyboardInterrupt:
                        raise
                    except BaseException as e:  # noqa: BLE001 - e.g. a peer's Rust panic (pyo3 PanicException)
                        msg = f"{e.__class__.__name__}: {str(e)[:120]}"
                        results.append({"family": fam, "input": kind, "length": len(text), "lib": lib,
                                        "seconds": None, "error": msg})
                        print(f"{fam:12s} {kind:13s} {lib:10s} {len(text):>8d} FAILED {msg}", file=sys.stderr)
                        break
                    results.append({"family": fam, "input": kind, "length": len(text), "lib": lib, "seconds": first,
                                    "warm_seconds": warm})
                    print(f"{fam:12s} {kind:13s} {lib:10s} {len(text):>8d} {first * 1e3:10.2f} ms first"
                          f" {warm * 1e3:10.2f} ms warm", file=sys.stderr)
                    if first > BUDGET:
                        break
    return results


def plot_sweep(results, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fams = list(dict.fromkeys(r["family"] for r in results))
    kinds = list(dict.fromkeys(r["input"] for r in results))
    fig, axes = plt.subplots(len(fams), len(kinds), figsize=(4.2 * len(kinds), 3.4 * len(fams)), squeeze=False)
    for i, fam in enumerate(fams):
        for j, kind in enumerate(kinds):
            ax = axes[i][j]
            for lib, color in LIB_COLORS.items():
                pts = [(r["length"], r["seconds"]) for r in results
                       if r["family"] == fam and r["input"] == kind and r["lib"] == lib and r["seconds"]]
                if pts:
                    ax.loglog([p[0] for p in pts], [p[1] for p in pts], "o-", color=color, label=lib, ms=3)
            ax.set_title(f"{fam}: {kind}", fontsize=9)
            ax.set_xlabel("input length (characters)", fontsize=8)
            ax.set_ylabel("seconds", fontsize=8)
            ax.grid(True, which="both", alpha=0.3)
            ax.legend(fontsize=7)
    fig.suptitle("encode_ordinary time vs input length on pathological input, first pass (log-log; slope 1 = linear)")
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--compare", help="a saved bench/compare.py output (default: run it)")
    ap.add_argument("--compare-args", default="--repeat 1", help="arguments for compare.py (default: %(default)s)")
    ap.add_argument("--out", default=os.path.join(ROOT, "docs", "pages", "performance"))
    ap.add_argument("--no-sweep", action="store_true", help="skip the pathological-input sweep")
    ap.add_argument("--sweep-json", help="plot a saved pathological.json instead of measuring")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    cmp_path = args.compare or os.path.join(args.out, "compare.txt")
    if not args.compare:
        run_compare(cmp_path, args.compare_args.split())
    with open(cmp_path, encoding="utf-8") as f:
        data = parse_compare(f.read().splitlines())
    plot_mbps(data, 0, os.path.join(args.out, "mbps_first.png"))
    plot_mbps(data, 1, os.path.join(args.out, "mbps_warm.png"))
    if args.sweep_json:
        with open(args.sweep_json, encoding="utf-8") as f:
            results = json.load(f)["results"]
    elif not args.no_sweep:
        results = sweep()
        with open(os.path.join(args.out, "pathological.json"), "w", encoding="utf-8") as f:
            json.dump({"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "results": results}, f, indent=1)
    else:
        return
    plot_sweep(results, os.path.join(args.out, "pathological.png"))


if __name__ == "__main__":
    main()
