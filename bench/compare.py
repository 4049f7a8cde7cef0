#!/usr/bin/env python3
"""Compare gpushmem-perf's CSV with nvshmem-perf's (bench/nvshmem/perf.cu).

    python3 bench/compare.py ours.csv nvshmem.csv [--markdown]
    python3 bench/compare.py native.csv engine.csv nvshmem.csv [--markdown]

ours.csv has the header `test,size,gpushmem,baseline,unit`, nvshmem.csv
`test,size,nvshmem,baseline,unit`. gpushmem-perf also writes a first line
`# gpushmem-perf engine=native|nvshmem nvshmem=VERSION one_pe=yes|no max_grid=N
reps=N warmup=N`; it is printed with the comparison (files written before it
existed have none: engine native assumed). Rows are joined on (test, size)
where both files have them, plus these pairings:

- put_signal_pingpong_like_nvshmem (ours, size 8: the same work per hop as
  NVSHMEM's kernel) against NVSHMEM's put_signal_pingpong, marked "like for
  like"; put_signal_pingpong_src_once and put_signal_pingpong_echo_1elem (our
  variants: source written once / the one-u64 path) and put_signal_pingpong
  (files before 2026-12-07: the src-once row) against it too, marked as not like
  for like; signal_relaxed_pingpong (ours: signal_op_relaxed, translated per call,
  NVSHMEM's signal_op semantics) against NVSHMEM's signal_pingpong, like for
  like; signal_relaxed_peer_pingpong (a PeerSignal, translated once: our extra)
  against it, marked so;
- init, malloc_1gib and malloc_1gib_first (ours: size = number of PEs) against
  NVSHMEM's (size 1). NVSHMEM files before 2026-12-07 have one cold
  malloc_1gib sample only: pair them with malloc_1gib_first, not malloc_1gib;
- barrier_all_block (ours: size = PEs) against NVSHMEM's (1 PE), marked so.

ratio = ours / NVSHMEM. "better" says whether ours is better: higher for GB/s
rows, lower for every other unit (latency, ms). Where a row has a baseline
(cuMemcpy for ours, cudaMemcpy for NVSHMEM), its fraction of that baseline is
shown too. For the bandwidth tests it also prints, per side, the peak GB/s and
the smallest size that reaches half of it.

Three files: the side-by-side of the engines (scripts/device-verify.sh part
engine-perf). native.csv is gpushmem-perf on the native engine, engine.csv
gpushmem-perf on the NVSHMEM engine (gpushmem-perf-nvshmem; both with
--one-pe, the shape of nvshmem-perf), nvshmem.csv NVSHMEM's own program. The
engine lines must say native and nvshmem, in that order (else it stops: the
files were mixed up); differing one_pe or max_grid are reported. Per row: the
three figures, engine/native, native/NVSHMEM and engine/NVSHMEM, and for
bandwidth rows each side's fraction of its memcpy. Rows are shown where at
least two sides have them. Python 3 standard library only.
"""

import argparse
import csv
import math
import sys


def load(path, value_col):
    """(rows by (test, size), keys in file order, meta dict from `# gpushmem-perf` lines)."""
    rows = {}
    order = []
    meta = {}
    with open(path, newline="") as f:
        lines = f.readlines()
    # `#` lines before the header: gpushmem-perf's `# gpushmem-perf key=value ...`.
    head = 0
    while head < len(lines) and lines[head].startswith("#"):
        words = lines[head][1:].split()
        if words and words[0] == "gpushmem-perf":
            meta.update(w.split("=", 1) for w in words[1:] if "=" in w)
        head += 1
    r = csv.DictReader(lines[head:])
    if r.fieldnames is None or value_col not in r.fieldnames:
        sys.exit(f"compare.py: {path}: no '{value_col}' column (header: {r.fieldnames})")
    for i, row in enumerate(r, start=head + 2):
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
    return rows, order, meta


def meta_text(meta):
    """One line of a file's `# gpushmem-perf` words, or a note that it has none."""
    if not meta:
        return "no engine line (written before gpushmem-perf wrote one: native engine)"
    return " ".join(f"{k}={v}" for k, v in meta.items())


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
        "put_signal_pingpong_like_nvshmem": [("put_signal_pingpong", 8)],
        "put_signal_pingpong_src_once": [("put_signal_pingpong", 8)],
        "put_signal_pingpong_echo_1elem": [("put_signal_pingpong", 8)],
        "put_signal_pingpong": [("put_signal_pingpong", 8), ("signal_pingpong", 8)],
        "signal_relaxed_pingpong": [("signal_pingpong", 8)],
        "signal_relaxed_peer_pingpong": [("signal_pingpong", 8)],
        "init": [("init", 1)],
        "malloc_1gib": [("malloc_1gib", 1)],
        "malloc_1gib_first": [("malloc_1gib_first", 1)],
        "barrier_all_block": [("barrier_all_block", 1)],
    }
    # What each pairing is: the same work on both sides, or one of ours beside NVSHMEM's.
    kind = {
        "put_signal_pingpong_like_nvshmem": "like for like",
        "put_signal_pingpong_src_once": "not like for like: ours writes its source once, one-u64 path",
        "put_signal_pingpong_echo_1elem": "not like for like: ours takes the one-u64 path",
        "put_signal_pingpong": "not like for like (old row): ours wrote its source once, one-u64 path",
        "signal_relaxed_pingpong": "like for like",
        "signal_relaxed_peer_pingpong": "our extra: PeerSignal, translated once",
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
                elif test in ("init", "malloc_1gib", "malloc_1gib_first"):
                    note = f"ours {size} PEs, NVSHMEM 1 PE"
                else:
                    note = f"vs NVSHMEM {tkey[0]}"
                # (the old put_signal row beside NVSHMEM's signal_pingpong is neither)
                if test in kind and not (test == "put_signal_pingpong" and tkey[0] == "signal_pingpong"):
                    note = f"{note}; {kind[test]}" if note else kind[test]
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


def brief_keeps(rows, test, size):
    """--brief: a bandwidth row is kept at every 16th power of two (16 B, 256 B, 4 KiB, …) and at
    the test's largest size; other rows always."""
    sizes = [s for (t, s) in rows if t == test]
    return size & (size - 1) != 0 or (size.bit_length() - 1) % 4 == 0 or size == max(sizes, default=size)


def ratio_of(a, b):
    """a / b, or None where either is missing or b is 0."""
    if a is None or b is None or not b:
        return None
    return a / b


def three_way(native_path, engine_path, nvshmem_path, markdown, brief=False):
    """The side-by-side of native, NVSHMEM-engine and NVSHMEM C++ figures."""
    nat, nat_order, nat_meta = load(native_path, "gpushmem")
    eng, eng_order, eng_meta = load(engine_path, "gpushmem")
    ref, ref_order, _ = load(nvshmem_path, "nvshmem")
    if nat_meta.get("engine", "native") != "native":
        sys.exit(
            f"compare.py: {native_path} says engine={nat_meta.get('engine')}: the first file must be gpushmem-perf "
            "on the native engine (order: native.csv engine.csv nvshmem.csv)"
        )
    if eng_meta.get("engine") != "nvshmem":
        sys.exit(
            f"compare.py: {engine_path} says {meta_text(eng_meta)}: the second file must be gpushmem-perf on the "
            "NVSHMEM engine (gpushmem-perf-nvshmem; order: native.csv engine.csv nvshmem.csv)"
        )
    labels = ["native", "nvshmem-engine", "NVSHMEM C++"]
    print(f"native:          {native_path}: {meta_text(nat_meta)}")
    print(f"nvshmem-engine:  {engine_path}: {meta_text(eng_meta)}")
    print(f"NVSHMEM C++:     {nvshmem_path}")
    for k in ("one_pe", "max_grid", "reps", "warmup"):
        if nat_meta.get(k) != eng_meta.get(k):
            print(f"warning: {k} differs: native {nat_meta.get(k)}, nvshmem-engine {eng_meta.get(k)}")
    if eng_meta.get("one_pe") == "yes" and nat_meta.get("one_pe") != "yes":
        print("warning: the native file is not the one-PE form (--one-pe): its rows are two PEs / 2-8 PEs")
    print()

    # Row identity: (test, ours size, NVSHMEM key or None) -> [native key, engine key], note.
    idents, keys, notes = [], {}, {}
    for i, (ours, order) in enumerate(((nat, nat_order), (eng, eng_order))):
        paired = set()
        for test, size, okey, tkey, note in pairs(ours, order, ref):
            ident = (test, size, tkey)
            if ident not in keys:
                idents.append(ident)
                keys[ident] = [None, None]
            keys[ident][i] = okey
            if note:
                notes[ident] = note
            paired.add(okey)
        for key in order:
            if key in paired:
                continue
            ident = (key[0], key[1], None)
            if ident not in keys:
                idents.append(ident)
                keys[ident] = [None, None]
            keys[ident][i] = key

    body, shown = [], [set(), set(), set()]  # keys shown, per side
    for ident in idents:
        test, size, tkey = ident
        got = [nat.get(keys[ident][0]) if keys[ident][0] else None, eng.get(keys[ident][1]) if keys[ident][1] else None]
        got.append(ref.get(tkey) if tkey else None)
        if sum(g is not None for g in got) < 2:
            continue
        for i, k in enumerate(keys[ident] + [tkey]):
            if k:
                shown[i].add(k)
        unit = next(g["unit"] for g in got if g is not None)
        if brief and higher_is_better(unit) and not brief_keeps(nat if keys[ident][0] else eng, test, size):
            continue
        v = [g["value"] if g else None for g in got]
        frac = [ratio_of(g["value"], g["baseline"]) if g else None for g in got]
        bw = higher_is_better(unit)
        body.append(
            [test, human_size(size) if bw else str(size)]
            + [num(x) for x in v]
            + [num(ratio_of(v[1], v[0])), num(ratio_of(v[0], v[2])), num(ratio_of(v[1], v[2]))]
            + ([num(x) for x in frac] if bw else ["-", "-", "-"])
            + [unit, notes.get(ident, "")]
        )
    headers = (
        ["test", "size"]
        + labels
        + ["engine/native", "native/C++", "engine/C++", "native/memcpy", "engine/memcpy", "C++/memcpy", "unit", "note"]
    )
    if not body:
        print("compare.py: no rows in common", file=sys.stderr)
    else:
        print(table(headers, body, markdown))
        print()
        print(
            "ratios: first/second; GB/s rows: higher is better, other units (us, ms): lower is better; "
            "memcpy = cuMemcpy (gpushmem) / cudaMemcpy (NVSHMEM C++) of the same bytes"
        )

    summary = []
    for test in ("put_bw_block", "get_bw_block"):
        for side, rows in zip(labels, (nat, eng, ref)):
            s = bw_summary(rows, test)
            if s is None:
                continue
            peak, peak_size, half = s
            summary.append(
                [test, side, f"{peak:.1f}", human_size(peak_size), human_size(half) if half is not None else "-"]
            )
    if summary:
        print()
        if not markdown:
            print("Bandwidth: peak and the smallest size reaching half of it")
        print(table(["test", "side", "peak GB/s", "at size", "half-peak size"], summary, markdown))

    if not markdown:
        for label, order, seen in zip(labels, (nat_order, eng_order, ref_order), shown):
            only = [k for k in order if k not in seen]
            if only:
                print(f"not compared, {label}: " + ", ".join(f"{t}@{s}" for t, s in only))
    return 0


def main(argv=None):
    ap = argparse.ArgumentParser(
        description="Compare gpushmem-perf and nvshmem-perf CSV files: ours.csv nvshmem.csv, or "
        "native.csv engine.csv nvshmem.csv (gpushmem-perf on the native engine, on the NVSHMEM engine, "
        "and NVSHMEM's own program)."
    )
    ap.add_argument("files", nargs="+", metavar="CSV", help="ours.csv nvshmem.csv, or native.csv engine.csv nvshmem.csv")
    ap.add_argument("--markdown", action="store_true", help="print markdown tables")
    ap.add_argument(
        "--brief",
        action="store_true",
        help="bandwidth rows only at 16 B, 256 B, 4 KiB, … (every 16th power of two) and the largest size",
    )
    a = ap.parse_args(argv)
    if len(a.files) == 3:
        return three_way(*a.files, a.markdown, a.brief)
    if len(a.files) != 2:
        ap.error("give two files (ours.csv nvshmem.csv) or three (native.csv engine.csv nvshmem.csv)")
    a.ours, a.nvshmem = a.files

    ours, ours_order, ours_meta = load(a.ours, "gpushmem")
    theirs, _, _ = load(a.nvshmem, "nvshmem")
    if ours_meta:
        print(f"gpushmem: {a.ours}: {meta_text(ours_meta)}")
        print()

    ps = pairs(ours, ours_order, theirs)
    body = []
    for test, size, okey, tkey, note in ps:
        o, t = ours[okey], theirs[tkey]
        unit = o["unit"] or t["unit"]
        if a.brief and higher_is_better(unit) and not brief_keeps(ours, test, size):
            continue
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
