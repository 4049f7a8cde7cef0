#!/usr/bin/env python3
"""Compare gpushmem-perf's CSV with nvshmem-perf's (bench/nvshmem/perf.cu).

    python3 bench/compare.py ours.csv nvshmem.csv [--markdown]

ours.csv has the header `test,size,gpushmem,baseline,unit`, nvshmem.csv
`test,size,nvshmem,baseline,unit`. Rows are joined on (test, size) where both
files have them, plus these pairings:

- put_signal_pingpong (ours, size 8) against NVSHMEM's put_signal_pingpong and
  signal_pingpong (size 8);
- init and malloc_1gib (ours: size = number of PEs) against NVSHMEM's (size 1);
- barrier_all_block (ours: size = PEs) against NVSHMEM's (1 PE), marked so.

ratio = ours / NVSHMEM. "better" says whether ours is better: higher for GB/s
rows, lower for every other unit (latency, ms). Where a row has a baseline
(cuMemcpy for ours, cudaMemcpy for NVSHMEM), its fraction of that baseline is
shown too. For the bandwidth tests it also prints, per side, the peak GB/s and
the smallest size that reaches half of it. Python 3 standard library only.
"""

import argparse
import csv
import math
import sys


def load(path, value_col):
    rows = {}
    order = []
    with open(path, newline="") as f:
        r = csv.DictReader(f)
        if r.fieldnames is None or value_col not in r.fieldnames:
            sys.exit(f"compare.py: {path}: no '{value_col}' column (header: {r.fieldnames})")
        for i, row in enumerate(r, start=2):
            try:
                key = (row["test"].strip(), int(row["size"]))
                val = float(row[value_col])
            except (KeyError, TypeError, ValueError) as e:
                sys.exit(f"compare.py: {path}:{i}: bad row {row}: {e}")
            base = (row.get("baseline") or "").strip()
            rows[key] = {
                "value": val,
                "baseline": float(base) if base else None,
                "unit": (row.get("unit") or "").strip(),
            }
            order.append(key)
    return rows, order


def higher_is_better(unit):
    return unit.strip().lower() == "gb/s"


def human_size(n):
    for unit, shift in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if n >= 1 << shift and n % (1 << shift) == 0:
            return f"{n >> shift} {unit}"
    return f"{n} B"


def num(v, digits=3):
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "-"
    a = abs(v)
    if a >= 100:
        return f"{v:.1f}"
    if a >= 1:
        return f"{v:.{digits}f}"
    return f"{v:#.{digits + 1}g}" if a > 0 else "0"


def pairs(ours, ours_order, theirs):
    """(test label, size label, ours key, theirs key, note) for every comparison."""
    out = []
    special_theirs = {
        "put_signal_pingpong": [("put_signal_pingpong", 8), ("signal_pingpong", 8)],
        "init": [("init", 1)],
        "malloc_1gib": [("malloc_1gib", 1)],
        "barrier_all_block": [("barrier_all_block", 1)],
    }
    for key in ours_order:
        test, size = key
        if test in special_theirs:
            for tkey in special_theirs[test]:
                if tkey not in theirs:
                    continue
                if tkey == key:
                    note = ""
                elif test == "barrier_all_block":
                    note = f"ours {size} PEs, NVSHMEM 1 PE"
                elif test in ("init", "malloc_1gib"):
                    note = f"ours {size} PEs, NVSHMEM 1 PE"
                else:
                    note = f"vs NVSHMEM {tkey[0]}"
                out.append((test, size, key, tkey, note))
        elif key in theirs:
            out.append((test, size, key, key, ""))
    return out


def bw_summary(rows, test):
    pts = sorted((size, r["value"]) for (t, size), r in rows.items() if t == test)
    if not pts:
        return None
    peak_size, peak = max(pts, key=lambda p: p[1])
    half = next((size for size, v in pts if v >= peak / 2), None)
    return peak, peak_size, half


def table(headers, body, markdown):
    if markdown:
        lines = ["| " + " | ".join(headers) + " |", "|" + "|".join("---" for _ in headers) + "|"]
        lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in body]
        return "\n".join(lines)
    cols = list(zip(headers, *body)) if body else [(h,) for h in headers]
    widths = [max(len(str(c)) for c in col) for col in cols]
    fmt_row = lambda row: "  ".join(
        str(c).ljust(w) if i == 0 else str(c).rjust(w) for i, (c, w) in enumerate(zip(row, widths))
    )
    return "\n".join([fmt_row(headers), fmt_row(["-" * w for w in widths])] + [fmt_row(r) for r in body])


def main(argv=None):
    ap = argparse.ArgumentParser(description="Compare gpushmem-perf and nvshmem-perf CSV files.")
    ap.add_argument("ours", help="CSV written by gpushmem-perf --csv")
    ap.add_argument("nvshmem", help="CSV written by nvshmem-perf --csv")
    ap.add_argument("--markdown", action="store_true", help="print markdown tables")
    a = ap.parse_args(argv)

    ours, ours_order = load(a.ours, "gpushmem")
    theirs, _ = load(a.nvshmem, "nvshmem")

    ps = pairs(ours, ours_order, theirs)
    body = []
    for test, size, okey, tkey, note in ps:
        o, t = ours[okey], theirs[tkey]
        unit = o["unit"] or t["unit"]
        ratio = o["value"] / t["value"] if t["value"] else float("nan")
        if higher_is_better(unit):
            better = "yes" if o["value"] > t["value"] else "no"
        else:
            better = "yes" if o["value"] < t["value"] else "no"
        ob = o["value"] / o["baseline"] if o["baseline"] else None
        tb = t["value"] / t["baseline"] if t["baseline"] else None
        body.append(
            [
                test,
                human_size(size) if higher_is_better(unit) else str(size),
                num(o["value"]),
                num(t["value"]),
                num(ratio),
                better,
                num(o["baseline"]) if o["baseline"] else "-",
                num(ob),
                num(t["baseline"]) if t["baseline"] else "-",
                num(tb),
                unit,
                note,
            ]
        )
    headers = [
        "test",
        "size",
        "gpushmem",
        "nvshmem",
        "ratio",
        "better",
        "cuMemcpy",
        "ours/cuMemcpy",
        "cudaMemcpy",
        "nvshmem/cudaMemcpy",
        "unit",
        "note",
    ]
    if not body:
        print("compare.py: no rows in common", file=sys.stderr)
    else:
        print(table(headers, body, a.markdown))

    summary = []
    for test in ("put_bw_block", "get_bw_block"):
        for side, rows in (("gpushmem", ours), ("nvshmem", theirs)):
            s = bw_summary(rows, test)
            if s is None:
                continue
            peak, peak_size, half = s
            summary.append(
                [test, side, f"{peak:.1f}", human_size(peak_size), human_size(half) if half is not None else "-"]
            )
    if summary:
        print()
        if not a.markdown:
            print("Bandwidth: peak and the smallest size reaching half of it")
        print(table(["test", "side", "peak GB/s", "at size", "half-peak size"], summary, a.markdown))

    only_ours = sorted(k for k in ours if k not in {p[2] for p in ps})
    only_theirs = sorted(k for k in theirs if k not in {p[3] for p in ps})
    if (only_ours or only_theirs) and not a.markdown:
        print()
        if only_ours:
            print("only in gpushmem: " + ", ".join(f"{t}@{s}" for t, s in only_ours))
        if only_theirs:
            print("only in nvshmem:  " + ", ".join(f"{t}@{s}" for t, s in only_theirs))
    return 0


if __name__ == "__main__":
    sys.exit(main())
