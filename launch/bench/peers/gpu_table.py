#!/usr/bin/env python3
"""Joins our benchmarks' CSVs and the GPU peers' into one, with the crossover.

    python3 launch/bench/peers/gpu_table.py OURS.csv PEERS.csv --csv JOINED.csv
    python3 launch/bench/peers/gpu_table.py --train PEER.csv IMPL:DTYPE=OURS.csv ... --csv JOINED.csv
    python3 launch/bench/peers/gpu_table.py --self-test

OURS.csv is `performer-bench kernels --device cuda` (rows favor, favor_tf32,
favor_tf32_slices64, favor_tf32_tiles, favor_bf16, favor_bf16_global_w,
favor_windowed, softmax); PEERS.csv is gpu_attention.py's. The
joined CSV has one row per implementation, mode and length:
impl,precision,mode,n,batch,heads,d,m,fwd_s,bwd_s,fwd_bwd_s,tokens_per_s,peak_bytes,status
(ours are named ours_favor, ours_favor_windowed and ours_softmax, with their
tile precision). Prints a Markdown table per mode (tokens/s forward +
backward) and the crossover against sdpa_flash: the shortest measured length
from which our fastest fused FAVOR+ row is at least as fast as SDPA at that
length and at every longer one measured.

--train joins training steps: PEER.csv from gpu_train_step.py and, for each
IMPL:DTYPE=OURS.csv, a `performer-bench train` CSV of our trainer
(IMPL names the configuration, e.g. ours_favor_w256; DTYPE fp32 or bf16)
into impl,preset,dtype,n,step_s,tokens_per_s,peak_bytes,status, and prints
a table per dtype with the crossover of our FAVOR+ against pytorch_sdpa.
"""
import argparse
import csv
import sys

COLUMNS = ["impl", "precision", "mode", "n", "batch", "heads", "d", "m", "fwd_s", "bwd_s", "fwd_bwd_s",
           "tokens_per_s", "peak_bytes", "status"]
OURS = {  # performer-bench kernels' name -> (impl, precision); window<w>[_bf16] by ours_kernel()
    "favor": ("ours_favor", "fp32"),
    "favor_tf32": ("ours_favor", "tf32"),
    "favor_bf16": ("ours_favor", "bf16"),
    "favor_tf32_slices64": ("ours_favor_slices64", "tf32"),  # not the default plan at m = 256: not in "ours best"
    "favor_tf32_tiles": ("ours_favor_tiles", "tf32"),  # the state in memory, not the default: not in "ours best"
    "favor_bf16_global_w": ("ours_favor_global_w", "bf16"),  # W read from global memory, not the default: likewise
    "favor_windowed": ("ours_favor_windowed", "fp32"),
    "softmax": ("ours_softmax", "fp32"),
    "softmax_tf32": ("ours_softmax", "tf32"),
    "softmax_bf16": ("ours_softmax", "bf16"),
}


def ours_kernel(name):
    """(impl, precision) of a kernels benchmark row name, or None."""
    if name in OURS:
        return OURS[name]
    if name.startswith("window"):
        w, _, precision = name[len("window"):].partition("_")
        if w.isdigit():
            return (f"ours_window{w}", precision or "fp32")
    return None


def read(path):
    """The rows of a CSV, without the '#' lines some benchmarks add after them."""
    with open(path, newline="") as f:
        return list(csv.DictReader(line for line in f if not line.startswith("#")))


def ours_rows(rows):
    out = []
    for r in rows:
        kind = ours_kernel(r["kernel"])
        if kind is None:
            continue
        impl, precision = kind
        out.append({**{c: r.get(c, "") for c in COLUMNS}, "impl": impl, "precision": precision, "status": "ok"})
    return out


def peer_rows(rows):
    return [{**{c: r.get(c, "") for c in COLUMNS}, "impl": r["peer"]} for r in rows]


def speed(r):
    return float(r["tokens_per_s"]) if r["status"] == "ok" and r["tokens_per_s"] else None


def crossover(ours, sdpa):
    """ours, sdpa: {n: tokens/s}. The shortest n (among those both have) from
    which ours >= sdpa at every longer n too; None when ours is slower at the
    longest."""
    common = sorted(set(ours) & set(sdpa))
    found = None
    for n in reversed(common):
        if ours[n] < sdpa[n]:
            break
        found = n
    return found


def best_favor(rows, mode):
    best = {}
    for r in rows:
        if r["impl"] == "ours_favor" and r["mode"] == mode and speed(r):
            n = int(r["n"])
            best[n] = max(best.get(n, 0.0), speed(r))
    return best


def of(rows, impl, **match):
    """{n: tokens/s} of impl's ok rows whose columns hold the values of match (None: any)."""
    return {int(r["n"]): speed(r) for r in rows
            if r["impl"] == impl and speed(r) and all(v is None or r[k] == v for k, v in match.items())}


def markdown(title, head, series, ratios):
    """A table of tokens/s per length: series {column: {n: tokens/s}}, then
    ratios [(column, {n: a}, {n: b})] as a / b."""
    sizes = sorted({n for s in series.values() for n in s})
    lines = [f"\n{title}\n", "| " + " | ".join(["n"] + head + [r[0] for r in ratios]) + " |",
             "|" + "---|" * (1 + len(head) + len(ratios))]
    for n in sizes:
        cells = [f"{n:,}"] + [f"{s[n]:,.0f}" if n in s else "-" for s in series.values()]
        cells += [f"{a[n] / b[n]:.2f}" if n in a and n in b else "-" for _, a, b in ratios]
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def crossover_line(what, ours, ours_name, peer, peer_name):
    """The crossover of ours against peer ({n: tokens/s} each) in a sentence."""
    x = crossover(ours, peer)
    if not ours or not peer:
        return f"\n{what}: no {ours_name} or {peer_name} rows, no crossover"
    if x is None:
        return f"\n{what}: {ours_name} slower than {peer_name} at the longest length measured ({max(peer):,})"
    return f"\n{what}: {ours_name} at least as fast as {peer_name} from n = {x:,} on (of those measured)"


def table(rows):
    lines = []
    cols = [("ours_favor", "fp32"), ("ours_favor", "tf32"), ("ours_favor", "bf16"), ("ours_softmax", "bf16"),
            ("ours_window256", "bf16"), ("sdpa_flash", None), ("fla_chunk", None), ("performer_pytorch", None)]
    for mode in ("causal", "bidirectional"):
        series = {c: of(rows, c[0], mode=mode, precision=c[1]) for c in cols}
        if not any(series.values()):
            continue
        best, sdpa = best_favor(rows, mode), series[("sdpa_flash", None)]
        lines += markdown(f"{mode}, tokens/s (forward + backward):", [f"{i} {p}" if p else i for i, p in cols],
                          series, [("best favor / sdpa", best, sdpa),
                                   ("softmax bf16 / sdpa", series[("ours_softmax", "bf16")], sdpa)])
        lines.append(crossover_line(mode, best, "FAVOR+", sdpa, "sdpa_flash"))
    return "\n".join(lines)


TRAIN_COLUMNS = ["impl", "preset", "dtype", "n", "step_s", "tokens_per_s", "peak_bytes", "status"]


def train_rows(peer_path, ours):
    """ours: [(impl, dtype, path)]; every step row of each of our CSVs is kept, the median taken per length."""
    rows = [{c: r.get(c, "") for c in TRAIN_COLUMNS} for r in read(peer_path)]
    for impl, dtype, path in ours:
        by_n = {}
        for r in read(path):
            by_n.setdefault((r["preset"], int(r["local_length"]) * int(r.get("sp") or 1)), []).append(r)
        for (preset, n), rs in sorted(by_n.items(), key=lambda x: x[0][1]):
            rs = sorted(rs, key=lambda r: float(r["seconds"]))
            mid = rs[len(rs) // 2]
            rows.append({"impl": impl, "preset": preset, "dtype": dtype, "n": str(n), "step_s": mid["seconds"],
                         "tokens_per_s": mid["tokens_per_s"], "peak_bytes": mid["peak_bytes"], "status": "ok"})
    return rows


def train_table(rows):
    lines = []
    for dtype in ("fp32", "bf16"):
        impls = sorted({r["impl"] for r in rows if r["dtype"] == dtype})
        if not impls:
            continue
        series = {i: of(rows, i, dtype=dtype) for i in impls}
        favor, peer = series.get("ours_favor", {}), series.get("pytorch_sdpa", {})
        lines += markdown(f"{dtype} training step, tokens/s:", impls, series, [("favor / pytorch_sdpa", favor, peer)])
        lines.append(crossover_line(dtype, favor, "ours_favor", peer, "pytorch_sdpa"))
    return "\n".join(lines)


def self_test():
    assert crossover({1: 1, 2: 3, 4: 5}, {1: 2, 2: 2, 4: 2}) == 2
    assert crossover({1: 3, 2: 1, 4: 5}, {1: 2, 2: 2, 4: 2}) == 4  # faster at 1, slower at 2: from 4 on
    assert crossover({1: 1, 2: 1}, {1: 2, 2: 2}) is None
    assert crossover({1: 3, 2: 3}, {1: 2, 2: 2}) == 1
    assert crossover({1: 3, 8: 3}, {2: 2, 8: 2}) == 8  # only the lengths both have
    ours = ours_rows([{"kernel": "favor_bf16", "mode": "causal", "n": "8", "tokens_per_s": "10"},
                      {"kernel": "favor", "mode": "causal", "n": "8", "tokens_per_s": "30"},
                      {"kernel": "nope", "mode": "causal", "n": "8", "tokens_per_s": "99"}])
    assert [r["precision"] for r in ours] == ["bf16", "fp32"]
    assert ours_kernel("window256_bf16") == ("ours_window256", "bf16")
    assert ours_kernel("window64") == ("ours_window64", "fp32")
    assert ours_kernel("windowed") is None
    assert best_favor(ours, "causal") == {8: 30.0}
    peers = peer_rows([{"peer": "sdpa_flash", "mode": "causal", "n": "8", "tokens_per_s": "20", "status": "ok"},
                       {"peer": "sdpa_flash", "mode": "causal", "n": "16", "tokens_per_s": "", "status": "oom"}])
    assert of(peers, "sdpa_flash", mode="causal") == {8: 20.0}
    assert "from n = 8 on" in table(ours + peers)
    import os
    import tempfile
    with tempfile.TemporaryDirectory() as d:
        peer, mine = os.path.join(d, "p.csv"), os.path.join(d, "o.csv")
        with open(peer, "w") as f:
            f.write("impl,preset,dtype,n,step_s,tokens_per_s,peak_bytes,status\n"
                    "pytorch_sdpa,paper,bf16,4,1,4,9,ok\npytorch_sdpa,paper,bf16,8,4,2,9,ok\n")
        with open(mine, "w") as f:
            f.write("preset,attention,ranks,dp,sp,batch,local_length,step,seconds,tokens_per_s,peak_bytes\n"
                    "paper,favor,1,1,1,1,4,1,2,2,5\npaper,favor,1,1,1,1,4,2,3,1.3,5\npaper,favor,1,1,1,1,4,3,1,4,5\n"
                    "paper,favor,1,1,1,1,8,1,2,4,5\n# rank,planned_bytes\n# rank,0,5\n")
        rows = train_rows(peer, [("ours_favor", "bf16", mine)])
        assert [(r["impl"], r["n"], r["tokens_per_s"]) for r in rows[2:]] == [("ours_favor", "4", "2"),
                                                                             ("ours_favor", "8", "4")]
        assert "from n = 8 on" in train_table(rows), train_table(rows)
    print("gpu_table.py: self-test passed")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("ours", nargs="?")
    ap.add_argument("peers", nargs="?")
    ap.add_argument("--csv", help="write the joined CSV here")
    ap.add_argument("--train", nargs="+", metavar="CSV", help="PEER.csv IMPL:DTYPE=OURS.csv ...: training steps")
    ap.add_argument("--self-test", action="store_true")
    a = ap.parse_args()
    if a.self_test:
        self_test()
        return 0
    if a.train:
        ours = []
        for spec in a.train[1:]:
            label, _, path = spec.partition("=")
            impl, _, dtype = label.partition(":")
            if not path or not dtype:
                ap.error(f"--train: '{spec}' is not IMPL:DTYPE=OURS.csv")
            ours.append((impl, dtype, path))
        rows = train_rows(a.train[0], ours)
        write(a.csv, TRAIN_COLUMNS, rows)
        print(train_table(rows))
        return 0
    if not a.ours or not a.peers:
        ap.error("OURS.csv and PEERS.csv are required")
    rows = ours_rows(read(a.ours)) + peer_rows(read(a.peers))
    write(a.csv, COLUMNS, rows)
    print(table(rows))
    return 0


def write(path, columns, rows):
    """The joined rows as a CSV at path (nothing when path is None)."""
    if path:
        with open(path, "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=columns, lineterminator="\n")
            w.writeheader()
            w.writerows(rows)


if __name__ == "__main__":
    sys.exit(main())
