#!/usr/bin/env python3
"""Performance model of sequence-parallel Performer training: projects step
time, the scan's share of it and parallel efficiency to 8..1024 GPUs, and
checks the same model against the CPU measurements of scaling.sh.

    python3 launch/studies/perf_model.py DIR     (DIR holds scaling.sh's CSVs)

Writes DIR/perf_model.md (tables), DIR/projection.csv, DIR/model_check.csv and
DIR/projection_{scan_share,efficiency,winner}.png. docs/performance-model.md
explains every formula and figure used here.

Step time on each rank (one layer = one forward scan, overlapped with the
local forward chunks, and one reverse scan in the backward, not overlapped;
then the gradient allreduce over all ranks):
    T = C(n) + layers * (max(0, scan_fwd - overlap) + scan_rev) + allreduce(params)
    C(n) = flops_per_token * n / (achieved fraction * peak)        (GPU)
Scan costs (runtime/scan.h), n bytes per rank, a latency, b s/byte, g combine s/byte:
    chain              sum over the P-1 hops of (a_h + s b_h) + (P-2) s g + (k - 1) max_h(...),
                       k = ceil(n / S) segments of s = n / k bytes (one message at P = 2)
    allgather          (P - 1)(a + n b) (ring) + (P - 2) n g
    recursive doubling ceil(log2 P) (a + n b + 2 n g)
Ranks of one sequence are consecutive, 8 GPUs per node: hop v-1 -> v is NVLink
unless it crosses a node; a round of recursive doubling or of the ring is as
slow as its slowest pair, so once P > 8 every round pays the InfiniBand link.
"""
import csv
import math
import os
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

KIB, MIB, GIB = 2**10, 2**20, 2**30
ALGS = ("chain", "allgather", "recursive_doubling")
SEGMENT = MIB  # ScanOptions::chain_segment_bytes default
GPUS_PER_NODE = 8

# --- Configurations ---------------------------------------------------------
PRESETS = {  # launch/bench/train.cc presets; vocab 29, chunk 128 (model/config.h)
    "small": dict(layers=2, width=128, heads=4, ffn=512, m=64),
    "medium": dict(layers=4, width=256, heads=8, ffn=1024, m=128),
    "paper": dict(layers=6, width=512, heads=8, ffn=2048, m=256),
}
VOCAB, CHUNK = 29, 128


def flops_per_token(c):
    """Training FLOPs (forward + backward) per token of one rank's block."""
    d, f, m, H = c["width"], c["ffn"], c["m"], c["heads"]
    D = d // H
    proj = 2 * 4 * d * d                         # q, k, v, o projections
    ffn = 2 * 2 * d * f                          # two FFN matrices
    feats = 2 * 2 * d * m                        # q and k random features (H heads of D x m)
    attn = H * (2 * CHUNK * (m + D + 1) + 2 * 2 * m * (D + 1))  # chunk blocks + prefix and state GEMMs
    fwd = proj + ffn + feats + attn
    # backward = 2x forward, plus the features recomputed in the backward
    return c["layers"] * (3 * fwd + feats) + 3 * 2 * d * VOCAB


def attention_flops_fwd(c):
    d, m, H = c["width"], c["m"], c["heads"]
    D = d // H
    return H * (2 * CHUNK * (m + D + 1) + 2 * 2 * m * (D + 1)) + 2 * 2 * d * m


def params(c):
    d, f = c["width"], c["ffn"]
    return c["layers"] * (4 * d * d + 2 * d * f + 4 * d + f + d) + 2 * VOCAB * d


def scan_bytes(c, batch=1):
    """Bytes per rank of one scan: B*H heads of 1 + m (D + 1) floats (runtime state + log-scale)."""
    D = c["width"] // c["heads"]
    return 4 * batch * c["heads"] * (1 + c["m"] * (D + 1))


# --- Hardware (docs/performance-model.md: sources and what is assumed) ------
# Links: latency a (s) per message, inverse bandwidth b (s/byte) per direction for one rank pair.
LINKS = {
    "nvlink2": dict(a=5e-6, b=1 / 40e9),    # V100 SXM2 (DGX-1): 1-2 NVLink2 links of 25 GB/s per pair
    "nvlink3": dict(a=5e-6, b=1 / 230e9),   # A100 SXM4 NVSwitch: 300 GB/s per direction nominal
    "nvlink4": dict(a=5e-6, b=1 / 350e9),   # H100 SXM5 NVSwitch: 450 GB/s per direction nominal
    "ib_hdr": dict(a=10e-6, b=1 / 23e9),    # one HDR 200 Gb/s (25 GB/s) port per GPU
    "ib_ndr": dict(a=10e-6, b=1 / 46e9),    # one NDR 400 Gb/s (50 GB/s) port per GPU
}
GPUS = {  # peak TFLOP/s (dense), HBM GB/s, assumed achieved fraction, links
    "V100 FP32": dict(peak=15.7e12, frac=0.40, hbm=900e9, intra="nvlink2", inter="ib_hdr"),
    "A100 FP32": dict(peak=19.5e12, frac=0.40, hbm=1555e9, intra="nvlink3", inter="ib_hdr"),
    "A100 TF32": dict(peak=156e12, frac=0.30, hbm=1555e9, intra="nvlink3", inter="ib_hdr"),
    "H100 TF32": dict(peak=495e12, frac=0.30, hbm=3350e9, intra="nvlink4", inter="ib_ndr"),
}


def gpu_net(name):
    g = GPUS[name]
    return dict(intra=LINKS[g["intra"]], inter=LINKS[g["inter"]], g=3 / g["hbm"], per_node=GPUS_PER_NODE)


# --- Cost model ---------------------------------------------------------------
def hop_links(P, net):
    """Link of hop v-1 -> v for v = 1..P-1 (consecutive ranks, per_node per node)."""
    k = net["per_node"]
    return [net["inter"] if v % k == 0 else net["intra"] for v in range(1, P)]


def slowest(P, net):
    return net["inter"] if P > net["per_node"] else net["intra"]


def scan_time(alg, P, n, net, segment=SEGMENT):
    if P <= 1:
        return 0.0
    g = net["g"]
    if alg == "chain":
        k = 1 if P == 2 else max(1, math.ceil(n / segment))
        s = n / k
        # every hop moves s bytes; every middle rank combines before forwarding
        hops = [L["a"] + s * L["b"] + (s * g if v > 0 else 0.0) for v, L in enumerate(hop_links(P, net))]
        return sum(hops) + (k - 1) * max(hops)
    L = slowest(P, net)
    if alg == "allgather":
        return (P - 1) * (L["a"] + n * L["b"]) + max(0, P - 2) * n * g
    if alg == "recursive_doubling":
        return math.ceil(math.log2(P)) * (L["a"] + n * L["b"] + 2 * n * g)
    raise ValueError(alg)


def choose(P, n, segment=SEGMENT):
    """runtime/scan.cc choose_scan_algorithm."""
    if P <= 8:
        return "chain"
    r = math.ceil(math.log2(P))
    return "recursive_doubling" if n * (r - 1) < (P - 2) * segment else "chain"


def allreduce_time(P, nbytes, net):
    if P <= 1:
        return 0.0
    L = slowest(P, net)
    return 2 * (P - 1) / P * nbytes * L["b"] + 2 * math.ceil(math.log2(P)) * L["a"]


def scaled_net(net, lat=1.0, bw=1.0):
    """net with every latency multiplied by lat and every bandwidth by bw."""
    f = lambda L: dict(a=L["a"] * lat, b=L["b"] / bw)  # noqa: E731
    return dict(net, intra=f(net["intra"]), inter=f(net["inter"]))


def step_time(c, P, n, alg, gpu, batch=1, net=None):
    g = GPUS[gpu]
    net = net or gpu_net(gpu)
    compute = flops_per_token(c) * batch * n / (g["frac"] * g["peak"])
    overlap = attention_flops_fwd(c) * batch * n / (g["frac"] * g["peak"])  # one layer's forward attention
    s = scan_time(alg, P, scan_bytes(c, batch), net)
    scan_total = c["layers"] * 2 * s
    exposed = c["layers"] * (max(0.0, s - overlap) + s)
    ar = allreduce_time(P, 4 * params(c), net)
    return dict(compute=compute, scan=scan_total, scan_exposed=exposed, allreduce=ar,
                step=compute + exposed + ar)


# --- Projection -----------------------------------------------------------------
def project(d):
    c = PRESETS["paper"]
    rows = []
    for gpu in GPUS:
        for P in [2**k for k in range(3, 11)]:
            for n in (4096, 16384, 65536):
                for alg in ALGS + ("auto",):
                    a = choose(P, scan_bytes(c)) if alg == "auto" else alg
                    t = step_time(c, P, n, a, gpu)
                    rows.append(dict(gpu=gpu, mode="weak", P=P, local=n, global_length=P * n, alg=alg, runs=a,
                                     efficiency=t["compute"] / t["step"], scan_share=t["scan"] / t["step"], **t))
            for L in (262144, 1048576, 4194304):
                n = L // P
                for alg in ALGS + ("auto",):
                    a = choose(P, scan_bytes(c)) if alg == "auto" else alg
                    t = step_time(c, P, n, a, gpu)
                    rows.append(dict(gpu=gpu, mode="strong", P=P, local=n, global_length=L, alg=alg, runs=a,
                                     efficiency=t["compute"] / t["step"], scan_share=t["scan"] / t["step"], **t))
    with open(os.path.join(d, "projection.csv"), "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0].keys()))
        w.writeheader()
        w.writerows(rows)
    return rows


def projection_plots(rows, d):
    c = PRESETS["paper"]
    fig, axes = plt.subplots(1, 2, figsize=(13, 5))
    for ax, key, yl in ((axes[0], "scan_share", "scan (both directions) / step"),
                        (axes[1], "efficiency", "parallel efficiency (compute / step)")):
        for i, gpu in enumerate(("V100 FP32", "A100 TF32")):
            for alg, ls in zip(ALGS, ("-", "--", ":")):
                sel = [r for r in rows if r["gpu"] == gpu and r["mode"] == "weak" and r["local"] == 65536
                       and r["alg"] == alg]
                ax.plot([r["P"] for r in sel], [r[key] for r in sel], ls, color=f"C{i}", marker="o", markersize=3,
                        label=f"{gpu}, {alg}")
        if key == "scan_share":
            ax.axhline(0.05, color="k", lw=0.8)
            ax.text(8, 0.055, "5% target", fontsize=8)
            ax.set_yscale("log")
        ax.set_xscale("log", base=2)
        ax.set_xlabel("GPUs P (one sequence over all of them, 8 per node)")
        ax.set_ylabel(yl)
        ax.set_title("paper config, 65,536 tokens per GPU (weak scaling)")
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(os.path.join(d, "projection_scan_share.png"), dpi=110)
    plt.close(fig)

    fig, axes = plt.subplots(1, 2, figsize=(13, 5))
    for ax, gpu in zip(axes, ("V100 FP32", "A100 TF32")):
        for j, L in enumerate((262144, 1048576, 4194304)):
            for alg, ls in zip(("chain", "recursive_doubling", "auto"), ("--", ":", "-")):
                sel = [r for r in rows if r["gpu"] == gpu and r["mode"] == "strong" and r["global_length"] == L
                       and r["alg"] == alg]
                ax.plot([r["P"] for r in sel], [r["efficiency"] for r in sel], ls, color=f"C{j}", marker="o",
                        markersize=3, label=f"L = {L // 1024}k, {alg}")
        ax.set_xscale("log", base=2)
        ax.set_ylim(0, 1.02)
        ax.set_xlabel("GPUs P")
        ax.set_ylabel("parallel efficiency (compute / step)")
        ax.set_title(f"strong scaling of one sequence, paper config, {gpu}")
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(os.path.join(d, "projection_efficiency.png"), dpi=110)
    plt.close(fig)

    # Winner map over (P, bytes per rank), A100 network, with the automatic choice.
    net = gpu_net("A100 TF32")
    Ps = [2**k for k in range(1, 11)]
    sizes = [2**k for k in range(12, 29)]
    colors = {"chain": 0, "allgather": 1, "recursive_doubling": 2}
    grid = [[colors[min(ALGS, key=lambda a: scan_time(a, P, n, net))] for P in Ps] for n in sizes]
    fig, ax = plt.subplots(figsize=(8, 6))
    ax.imshow(grid, origin="lower", aspect="auto", cmap=matplotlib.colors.ListedColormap(["C0", "C1", "C2"]),
              vmin=-0.5, vmax=2.5)
    for yi, n in enumerate(sizes):
        for xi, P in enumerate(Ps):
            ax.text(xi, yi, {"chain": "C", "allgather": "A", "recursive_doubling": "R"}[choose(P, n)], ha="center",
                    va="center", fontsize=7, color="w")
    ax.set_xticks(range(len(Ps)))
    ax.set_xticklabels(Ps)
    ax.set_yticks(range(len(sizes)))
    ax.set_yticklabels([f"{n // KIB} KiB" if n < MIB else f"{n // MIB} MiB" for n in sizes])
    yb = math.log2(scan_bytes(c)) - 12
    ax.axhline(yb, color="k", lw=1)
    ax.text(0, yb + 0.2, "paper config, B = 1", fontsize=8)
    ax.set_xlabel("ranks P (8 per node)")
    ax.set_ylabel("bytes per rank per scan")
    ax.set_title("fastest modelled scan (colour: blue chain, orange allgather, green rec. doubling)\n"
                 "letter: automatic choice (C, R); A100 + NVLink3 + IB HDR", fontsize=9)
    fig.tight_layout()
    fig.savefig(os.path.join(d, "projection_winner.png"), dpi=110)
    plt.close(fig)


# --- Check against the CPU measurements -----------------------------------------
def read(path):
    if not os.path.exists(path):
        return []
    with open(path) as f:
        return list(csv.DictReader(f))


def fastest(rows):
    best = {}
    for r in rows:
        k = (r["study"], r["scan"], r["attention"], r["ranks"], r["local_length"])
        if k not in best or float(r["seconds"]) < float(best[k]["seconds"]):
            best[k] = r
    return list(best.values())


def fit_line(xs, ys):
    n = len(xs)
    mx, my = sum(xs) / n, sum(ys) / n
    sxx = sum((x - mx) ** 2 for x in xs)
    a = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sxx if sxx > 0 else 0.0
    return my - a * mx, a


# Shared-memory MPI on the 2-core machine, fitted to a sweep (2 ranks, chain, 4 KiB .. 1 MiB) whose data
# was not kept (docs/comm.md): an assumption of the model, not a committed measurement.
CPU_LINK = dict(a=3.5e-6, b=1.45e-10)
# g: recursive doubling at 2 ranks costs the chain plus 2 n g; the measured difference is within the
# noise, so g is small; 0.05 ns/byte (an f32 sum at ~60 GB/s of cache traffic) is assumed.
CPU_NET = dict(intra=CPU_LINK, inter=CPU_LINK, g=5e-11, per_node=10**9)
CORES = 2


def check(d, preset):
    """Model against this machine: one-scan times against performer-bench comm at
    the training payload and against the scans inside training steps; step times
    with the compute of N ranks spread over `cores` cores (nominal 2, and the
    effective number fitted to the runs)."""
    c = PRESETS[preset]
    layers = c["layers"]
    res = dict(scan=[], step=[], fit=None)
    comm = [r for r in read(os.path.join(d, "comm.csv")) if r["op"] == "scan" and r["algorithm"] != "auto"]
    runs = fastest(read(os.path.join(d, "strong.csv")) + read(os.path.join(d, "weak.csv")) +
                   read(os.path.join(d, "scan_algorithms.csv")) + read(os.path.join(d, "attention.csv")))
    nb = scan_bytes(c)
    for P in sorted({int(r["ranks"]) for r in comm}):
        for alg in ALGS:
            meas = [float(r["median_us"]) * 1e-6 for r in comm if int(r["ranks"]) == P and r["algorithm"] == alg]
            step = [float(r["scan_s"]) / (2 * layers) for r in runs
                    if int(r["ranks"]) == P and (r["scan"] == alg or (r["scan"] == "auto" and choose(P, nb) == alg))]
            if not meas:
                continue
            pred = scan_time(alg, P, nb, CPU_NET)
            m = sum(meas) / len(meas)
            res["scan"].append(dict(P=P, alg=alg, pred_us=pred * 1e6, alone_us=m * 1e6, err=pred / m - 1,
                                    in_step_us=[x * 1e6 for x in step]))
    one = [r for r in runs if r["ranks"] == "1" and r["attention"] == "favor"]
    if len(one) < 2:
        return res
    comp = lambda r: float(r["attention_s"]) + float(r["other_s"]) + float(r["optimizer_s"])  # noqa: E731
    beta, alpha = fit_line([float(r["local_length"]) for r in one], [comp(r) for r in one])
    multi = [r for r in runs if int(r["ranks"]) >= 2]

    def predict(r, cores):
        P, n = int(r["ranks"]), int(r["local_length"])
        alg = r["scan"] if r["scan"] != "auto" else choose(P, nb)
        s = scan_time(alg, P, nb, CPU_NET)
        return ((beta + alpha * n) * max(1.0, P / cores) + layers * s +
                allreduce_time(P, 4 * params(c), CPU_NET) + float(r["data_s"]))

    # effective cores: least squares over the multi-rank runs of log(pred / meas)
    best = min((sum(math.log(predict(r, k / 100) / float(r["seconds"])) ** 2 for r in multi), k / 100)
               for k in range(50, 201))[1] if multi else CORES
    res["fit"] = dict(beta=beta, alpha=alpha, n=len(one), cores=best,
                      gflops=flops_per_token(c) / alpha / 1e9 if alpha > 0 else float("nan"))
    for r in multi:
        m = float(r["seconds"])
        p2, pe = predict(r, CORES), predict(r, best)
        res["step"].append(dict(study=r["study"], alg=r["scan"], P=int(r["ranks"]), local=int(r["local_length"]),
                                load1=r["load1"], meas_s=m, pred_nominal_s=p2, err_nominal=p2 / m - 1,
                                pred_eff_s=pe, err_eff=pe / m - 1))
    with open(os.path.join(d, "model_check.csv"), "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(res["step"][0].keys()))
        w.writeheader()
        w.writerows(res["step"])
    return res


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    d = sys.argv[1]
    preset = os.environ.get("PRESET", "small")
    rows = project(d)
    projection_plots(rows, d)
    c = PRESETS["paper"]
    md = ["### Paper configuration", "",
          f"training FLOPs per token {flops_per_token(c) / 1e6:.1f} M; parameters {params(c) / 1e6:.2f} M; "
          f"scan payload {scan_bytes(c)} bytes per rank per layer and direction (B = 1)", "",
          "| GPU (achieved fraction of peak) | compute per token | compute at 65,536 tokens |", "|---|---:|---:|"]
    for gpu, g in GPUS.items():
        t = flops_per_token(c) / (g["frac"] * g["peak"])
        md.append(f"| {gpu} ({g['frac']:.0%} of {g['peak'] / 1e12:.1f} TFLOP/s) | {t * 1e6:.2f} us | "
                  f"{t * 65536 * 1e3:.0f} ms |")
    md += ["", "### Design target: 512 GPUs, 65,536 tokens per GPU, paper configuration, B = 1", "",
           "| GPU | algorithm | one scan | scans per step (12) | exposed | allreduce | step | scan share | "
           "efficiency |", "|---|---|---:|---:|---:|---:|---:|---:|---:|"]
    for gpu in GPUS:
        for alg in ALGS + ("auto",):
            r = next(x for x in rows if x["gpu"] == gpu and x["mode"] == "weak" and x["P"] == 512
                     and x["local"] == 65536 and x["alg"] == alg)
            name = f"auto ({r['runs']})" if alg == "auto" else alg
            md.append(f"| {gpu} | {name} | {r['scan'] / 12 * 1e3:.3f} ms | {r['scan'] * 1e3:.2f} ms | "
                      f"{r['scan_exposed'] * 1e3:.2f} ms | {r['allreduce'] * 1e3:.2f} ms | {r['step'] * 1e3:.0f} ms | "
                      f"{r['scan_share']:.2%} | {r['efficiency']:.3f} |")
    md += ["", "### Sensitivity of the target (512 GPUs, 65,536 tokens per GPU, auto) to the network figures", "",
           "| GPU | latency x | bandwidth x | auto runs | scans per step | scan share | efficiency |",
           "|---|---:|---:|---|---:|---:|---:|"]
    for gpu in GPUS:
        for lat, bw in ((1, 1), (4, 1), (1, 0.5), (4, 0.5), (10, 0.25)):
            net = scaled_net(gpu_net(gpu), lat, bw)
            a = choose(512, scan_bytes(c))
            t = step_time(c, 512, 65536, a, gpu, net=net)
            md.append(f"| {gpu} | {lat} | {bw} | {a} | {t['scan'] * 1e3:.2f} ms | {t['scan'] / t['step']:.2%} | "
                      f"{t['compute'] / t['step']:.3f} |")
    md += ["", "### Strong scaling of one sequence (auto), parallel efficiency", "",
           "| GPU | global length | " + " | ".join(f"P={2**k}" for k in range(3, 11)) + " |",
           "|---|---:|" + "---:|" * 8]
    for gpu in GPUS:
        for L in (262144, 1048576, 4194304):
            sel = [r for r in rows if r["gpu"] == gpu and r["mode"] == "strong" and r["global_length"] == L
                   and r["alg"] == "auto"]
            md.append(f"| {gpu} | {L} | " + " | ".join(f"{r['efficiency']:.2f}" for r in sel) + " |")
    net = gpu_net("A100 TF32")
    md += ["", "### One scan, paper payload, A100 + NVLink3 + IB HDR (modelled)", "",
           "| P | chain | allgather | rec. doubling | fastest | auto |", "|---:|---:|---:|---:|---|---|"]
    n = scan_bytes(c)
    for P in [2**k for k in range(1, 11)]:
        t = {a: scan_time(a, P, n, net) for a in ALGS}
        md.append(f"| {P} | " + " | ".join(f"{t[a] * 1e6:.0f} us" for a in ALGS) +
                  f" | {min(t, key=t.get)} | {choose(P, n)} |")
    chk = check(d, preset)
    if chk["scan"]:
        md += ["", f"### Model against this machine: one scan ({preset} preset payload, {scan_bytes(PRESETS[preset])} "
               "bytes per rank)", "",
               f"Network of this machine: a = {CPU_LINK['a'] * 1e6:.1f} us, 1/b = {1 / CPU_LINK['b'] / 1e9:.1f} GB/s "
               f"(fitted to the 2-rank chain of docs/comm.md, 4 KiB to 1 MiB), g = {CPU_NET['g'] * 1e9:.2f} ns/byte "
               "(assumed). 'alone': performer-bench comm median (forward and reverse averaged); 'in step': the "
               "scan time inside the training steps divided by the scans per step (2 per layer).", "",
               "| N | algorithm | predicted | alone (measured) | error | in step (measured) |",
               "|---:|---|---:|---:|---:|---:|"]
        for r in chk["scan"]:
            ins = ", ".join(f"{x:.0f} us" for x in r["in_step_us"]) or "-"
            md.append(f"| {r['P']} | {r['alg']} | {r['pred_us']:.1f} us | {r['alone_us']:.1f} us | {r['err']:+.0%} | "
                      f"{ins} |")
    fit = chk["fit"]
    if fit:
        md += ["", f"### Model against this machine: step time ({preset} preset)", "",
               f"Compute fit from {fit['n']} one-rank FAVOR+ steps: C(n) = {fit['beta']:.4f} s + "
               f"{fit['alpha'] * 1e6:.2f} us x n (= {fit['gflops']:.1f} GFLOP/s by the FLOP count above); N ranks "
               f"on k cores multiply it by max(1, N / k): k = {CORES} (nominal) and k = {fit['cores']:.2f} "
               "(effective, fitted to these runs).", "",
               "| study | scan | N | local length | load | measured s | predicted, 2 cores | error | "
               f"predicted, {fit['cores']:.2f} cores | error |", "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
        for r in chk["step"]:
            md.append(f"| {r['study']} | {r['alg']} | {r['P']} | {r['local']} | {r['load1']} | {r['meas_s']:.3f} | "
                      f"{r['pred_nominal_s']:.3f} | {r['err_nominal']:+.0%} | {r['pred_eff_s']:.3f} | "
                      f"{r['err_eff']:+.0%} |")
    with open(os.path.join(d, "perf_model.md"), "w") as f:
        f.write("\n".join(md) + "\n")
    print("\n".join(md))


if __name__ == "__main__":
    main()
