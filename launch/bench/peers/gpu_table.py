#!/usr/bin/env python3
"""Joins our kernels' CSV and the GPU peers' CSV into one, with the crossover.

    python3 launch/bench/peers/gpu_table.py OURS.csv PEERS.csv --csv JOINED.csv
    python3 launch/bench/peers/gpu_table.py --self-test

OURS.csv is `performer-bench kernels --device cuda` (rows favor, favor_tf32,
favor_bf16, favor_windowed, softmax); PEERS.csv is gpu_attention.py's. The
joined CSV has one row per implementation, mode and length:
impl,precision,mode,n,batch,heads,d,m,fwd_s,bwd_s,fwd_bwd_s,tokens_per_s,peak_bytes,status
(ours are named ours_favor, ours_favor_windowed and ours_softmax, with their
tile precision). Prints a Markdown table per mode (tokens/s forward +
backward) and the crossover against sdpa_flash: the shortest measured length
from which our fastest fused FAVOR+ row is at least as fast as SDPA at that
length and at every longer one measured.
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
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


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


def of(rows, impl, mode, precision=None):
    return {int(r["n"]): speed(r) for r in rows
            if r["impl"] == impl and r["mode"] == mode and speed(r) and (precision is None or r["precision"] == precision)}


def table(rows):
    lines = []
    cols = [("ours_favor", "fp32"), ("ours_favor", "tf32"), ("ours_favor", "bf16"), ("ours_softmax", "bf16"),
            ("ours_window256", "bf16"), ("sdpa_flash", None), ("fla_chunk", None), ("performer_pytorch", None)]
    for mode in ("causal", "bidirectional"):
        series = {c: of(rows, c[0], mode, c[1]) for c in cols}
        sizes = sorted({n for s in series.values() for n in s})
        if not sizes:
            continue
        lines.append(f"\n{mode}, tokens/s (forward + backward):\n")
        head = ["n"] + [f"{i} {p}" if p else i for i, p in cols] + ["best favor / sdpa", "softmax bf16 / sdpa"]
        lines.append("| " + " | ".join(head) + " |")
        lines.append("|" + "---|" * len(head))
        best, sdpa = best_favor(rows, mode), series[("sdpa_flash", None)]
        for n in sizes:
            cells = [f"{n:,}"] + [f"{series[c][n]:,.0f}" if n in series[c] else "-" for c in cols]
            cells.append(f"{best[n] / sdpa[n]:.2f}" if n in best and n in sdpa else "-")
            soft = series[("ours_softmax", "bf16")]
            cells.append(f"{soft[n] / sdpa[n]:.2f}" if n in soft and n in sdpa else "-")
            lines.append("| " + " | ".join(cells) + " |")
        x = crossover(best, sdpa)
        if not sdpa:
            lines.append(f"\n{mode}: no sdpa_flash rows, no crossover")
        elif x is None:
            lines.append(f"\n{mode}: FAVOR+ slower than sdpa_flash at the longest length measured ({max(sdpa):,})")
        else:
            lines.append(f"\n{mode}: FAVOR+ at least as fast as sdpa_flash from n = {x:,} on (of those measured)")
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
    assert of(peers, "sdpa_flash", "causal") == {8: 20.0}
    assert "from n = 8 on" in table(ours + peers)
    print("gpu_table.py: self-test passed")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("ours", nargs="?")
    ap.add_argument("peers", nargs="?")
    ap.add_argument("--csv", help="write the joined CSV here")
    ap.add_argument("--self-test", action="store_true")
    a = ap.parse_args()
    if a.self_test:
        self_test()
        return 0
    if not a.ours or not a.peers:
        ap.error("OURS.csv and PEERS.csv are required")
    rows = ours_rows(read(a.ours)) + peer_rows(read(a.peers))
    if a.csv:
        with open(a.csv, "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=COLUMNS, lineterminator="\n")
            w.writeheader()
            w.writerows(rows)
    print(table(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
