#!/usr/bin/env python3
"""Static instruction counts of compiled CUDA kernels, one CSV row per kernel.

Reads the output of `cuobjdump -sass OBJECT` (the CUDA toolkit's; also on
PyPI as nvidia-cuda-cuobjdump) and counts, per kernel, the machine
instructions that decide a tensor-core kernel's inner loops: mma
(HMMA), ldmatrix (LDSM), shared loads by width (LDS, LDS.64, LDS.128) and
stores (STS), global loads (LDG) and asynchronous copies (LDGSTS), fp32 to
TF32/bf16 conversions (F2FP, F2F), special-function operations (MUFU),
barriers (BAR) and local-memory spills (LDL, STL). These are counts in the
code, not executed counts: a loop body counts once however often it runs.

With --loops, one row per innermost loop that runs tensor-core products
instead (a backward branch's body that holds HMMA and no other such
loop): its first and last address and the same counts over its body, so
that the instructions a k-step of a product costs can be read off (a body
the compiler unrolled holds several k-steps: divide by its HMMA over the
products' count per k-step).

With --ptxas, it reads what `nvcc -Xptxas -v` printed while compiling
(stderr) instead: one row per kernel with its registers, stack frame and
spill bytes (stores, loads).

    cuobjdump -sass build/kernels/.../favor_attention_cuda_resident_bf16.cu.o |
        python3 launch/bench/sass_counts.py [--match causal_forward] [--loops] > counts.csv
    nvcc ... -Xptxas -v -c kernels/.../favor_attention_cuda_resident_bf16.cu 2>&1 |
        python3 launch/bench/sass_counts.py --ptxas > ptxas.csv
    python3 launch/bench/sass_counts.py --self-test
"""
import argparse
import collections
import re
import sys

COLUMNS = ["instructions", "HMMA", "LDSM", "LDS", "LDS.64", "LDS.128", "STS", "LDG", "LDGSTS", "F2FP", "MUFU",
           "BAR", "LDL", "STL"]
_FUNCTION = re.compile(r"Function : (\S+)")
# "/*0420*/   @!P0 LDS.64 R4, [R2+0x10] ;": an address, an optional predicate, the opcode.
_INSTRUCTION = re.compile(r"^\s+/\*[0-9a-f]{4,}\*/\s+(?:@!?U?P[T0-9]+\s+)?([A-Z][A-Z0-9_.]*)")
# The same with the address and the operands: "/*0420*/ @P0 BRA 0x3f0 ;".
_ADDRESSED = re.compile(r"^\s+/\*([0-9a-f]{4,})\*/\s+(?:@!?U?P[T0-9]+\s+)?([A-Z][A-Z0-9_.]*)(.*)")
_TARGET = re.compile(r"\b0x([0-9a-f]+)\b")


def column_of(opcode):
    """The column an opcode counts in, or None."""
    base, _, rest = opcode.partition(".")
    if base == "LDS":
        width = rest.split(".")
        return "LDS.128" if "128" in width else "LDS.64" if "64" in width else "LDS"
    if base == "F2F":
        return "F2FP"
    return base if base in COLUMNS else None


def short_name(mangled):
    """The kernel's name and template arguments without the namespaces' mangling."""
    m = re.search(r"(k_\w+|\w+_kernel)(I\w*E)?Ev", mangled)
    return (m.group(1) + (m.group(2) or "")) if m else mangled


def count(lines):
    """{mangled kernel name: Counter of COLUMNS} in the order the kernels appear."""
    opcodes = collections.OrderedDict()
    current = None
    for line in lines:
        m = _FUNCTION.search(line)
        if m:
            current = opcodes.setdefault(m.group(1), [])
            continue
        m = _INSTRUCTION.match(line)
        if m and current is not None:
            current.append(m.group(1))
    return collections.OrderedDict((name, tally(ops)) for name, ops in opcodes.items())


def tally(opcodes):
    """Counter of COLUMNS over a list of opcodes."""
    counts = collections.Counter()
    for opcode in opcodes:
        counts["instructions"] += 1
        column = column_of(opcode)
        if column:
            counts[column] += 1
    return counts


def loops(lines):
    """{mangled kernel name: [(first address, last address, Counter)]}: the
    innermost loops (a branch back to an earlier address of the same
    kernel, the instructions from there to the branch) whose body holds
    HMMA, in address order."""
    bodies = collections.OrderedDict()
    current = None
    for line in lines:
        m = _FUNCTION.search(line)
        if m:
            current = bodies.setdefault(m.group(1), [])
            continue
        m = _ADDRESSED.match(line)
        if m and current is not None:
            current.append((int(m.group(1), 16), m.group(2), m.group(3)))
    found = collections.OrderedDict()
    for name, code in bodies.items():
        index = {address: i for i, (address, _, _) in enumerate(code)}
        spans = []
        for i, (address, opcode, operands) in enumerate(code):
            target = _TARGET.search(operands)
            if opcode.startswith("BRA") and target:
                start = int(target.group(1), 16)
                if start < address and start in index:
                    spans.append((index[start], i))
        with_mma = [(a, b) for a, b in spans if any(op.startswith("HMMA") for _, op, _ in code[a:b + 1])]
        innermost = [(a, b) for a, b in with_mma
                     if not any((c, d) != (a, b) and a <= c and d <= b for c, d in with_mma)]
        found[name] = [(code[a][0], code[b][0], tally(op for _, op, _ in code[a:b + 1])) for a, b in sorted(innermost)]
    return found


def write_table(columns, rows, match, out):
    """CSV: a kernel column (short_name) and `columns`, one line per (mangled
    name, values) of rows whose name contains match."""
    out.write(",".join(["kernel"] + columns) + "\n")
    for name, values in rows:
        if not match or match in name:
            out.write(",".join([short_name(name)] + [str(v) for v in values]) + "\n")


def write_loops_csv(found, match, out):
    rows = ((name, ["%#x" % first, "%#x" % last] + [counts[c] for c in COLUMNS])
            for name, spans in found.items() for first, last, counts in spans)
    write_table(["first", "last"] + COLUMNS, rows, match, out)


def write_csv(kernels, match, out):
    write_table(COLUMNS, ((name, [counts[c] for c in COLUMNS]) for name, counts in kernels.items()), match, out)


PTXAS_COLUMNS = ["registers", "stack_bytes", "spill_store_bytes", "spill_load_bytes"]
_ENTRY = re.compile(r"Compiling entry function '(\S+)'")
_PROPERTIES = re.compile(r"Function properties for (\S+)")
_FRAME = re.compile(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads")
_REGISTERS = re.compile(r"Used (\d+) registers")


def ptxas_figures(lines):
    """{mangled kernel name: {PTXAS_COLUMNS}} from `nvcc -Xptxas -v` output,
    the kernels (entry functions) only, in the order ptxas compiled them."""
    kernels = collections.OrderedDict()
    entry = properties = None
    for line in lines:
        m = _ENTRY.search(line)
        if m:
            entry = m.group(1)
            kernels[entry] = {}
            continue
        m = _PROPERTIES.search(line)
        if m:
            properties = m.group(1)
            continue
        m = _FRAME.search(line)
        if m and properties in kernels:
            kernels[properties].update(zip(PTXAS_COLUMNS[1:], (int(v) for v in m.groups())))
            continue
        m = _REGISTERS.search(line)
        if m and entry is not None:
            kernels[entry]["registers"] = int(m.group(1))
            entry = None
    return kernels


def write_ptxas_csv(kernels, match, out):
    for name, figures in kernels.items():
        missing = [c for c in PTXAS_COLUMNS if c not in figures]
        if missing:
            raise ValueError("ptxas output lacks %s for %s" % (", ".join(missing), name))
    rows = ((name, [figures[c] for c in PTXAS_COLUMNS]) for name, figures in kernels.items())
    write_table(PTXAS_COLUMNS, rows, match, out)


def self_test():
    sass = """
        Function : _ZN2pf10favor_cuda12_GLOBAL__N_125k_causal_forward_residentILNS_8TileMathE2ELi32EEEvNS0_4ArgsE
        /*0000*/                   LDC R1, c[0x0][0x28] ;
        /*0010*/              @!P0 LDS.64 R4, [R2+0x10] ;
        /*0020*/                   LDS R6, [R3] ;
        /*0030*/                   LDS.U.128 R8, [R3] ;
        /*0040*/                   HMMA.16816.F32.BF16 R12, R4, R6, R12 ;
        /*0050*/                   LDSM.16.MT88.4 R4, [R2] ;
        /*0060*/               @P1 F2FP.BF16.F32.PACK_AB R5, R6, R7 ;
        /*0070*/                   BAR.SYNC.DEFER_BLOCKING 0x0 ;
        /*0080*/                   STL [R1], R4 ;
        Function : other_kernel
        /*0000*/                   MUFU.EX2 R0, R1 ;
        /*0010*/                   F2F.F32.F64 R0, R2 ;
    """
    k = count(sass.splitlines())
    first, second = list(k.values())
    assert first["instructions"] == 9 and first["HMMA"] == 1 and first["LDSM"] == 1
    assert (first["LDS"], first["LDS.64"], first["LDS.128"]) == (1, 1, 1)
    assert first["F2FP"] == 1 and first["BAR"] == 1 and first["STL"] == 1 and first["LDL"] == 0
    assert second["MUFU"] == 1 and second["F2FP"] == 1 and second["instructions"] == 2
    assert short_name(list(k)[0]) == "k_causal_forward_residentILNS_8TileMathE2ELi32EE"
    import io
    out = io.StringIO()
    write_csv(k, "causal", out)
    assert out.getvalue().splitlines()[1].startswith("k_causal_forward_residentILNS_8TileMathE2ELi32EE,9,1,1,1,1,1,")
    assert len(out.getvalue().splitlines()) == 2
    # Two loops with products, one inside the other, and one without:
    # only the inner one (0x30-0x60) is reported.
    looped = """
        Function : k_loopsEv
        /*0000*/                   MOV R0, RZ ;
        /*0010*/                   HMMA.1688.F32.TF32 R4, R8, R10, R4 ;
        /*0020*/                   IADD3 R0, R0, 0x1, RZ ;
        /*0030*/                   LDSM.16.M88.4 R8, [R2] ;
        /*0040*/                   HMMA.16816.F32.BF16 R4, R8, R10, R4 ;
        /*0050*/                   HMMA.16816.F32.BF16 R12, R8, R10, R12 ;
        /*0060*/              @P0 BRA 0x30 ;
        /*0070*/              @P1 BRA 0x10 ;
        /*0080*/                   LDS R1, [R2] ;
        /*0090*/              @P2 BRA 0x80 ;
        /*00a0*/                   EXIT ;
    """
    spans = loops(looped.splitlines())["k_loopsEv"]
    assert [(a, b) for a, b, _ in spans] == [(0x30, 0x60)], spans
    assert spans[0][2]["instructions"] == 4 and spans[0][2]["HMMA"] == 2 and spans[0][2]["LDSM"] == 1
    out = io.StringIO()
    write_loops_csv(loops(looped.splitlines()), "", out)
    assert out.getvalue().splitlines()[1].startswith("k_loops,0x30,0x60,4,2,1,"), out.getvalue()
    # ptxas -v: a device function's properties between two kernels' do
    # not count; each kernel gets its own frame and registers.
    verbose = """
ptxas info    : 0 bytes gmem
ptxas info    : Compiling entry function '_ZN2pf10favor_cuda12_GLOBAL__N_125k_causal_forward_residentILNS_8TileMathE2ELi32EEEvNS0_4ArgsE' for 'sm_90'
ptxas info    : Function properties for _ZN2pf10favor_cuda12_GLOBAL__N_125k_causal_forward_residentILNS_8TileMathE2ELi32EEEvNS0_4ArgsE
    8 bytes stack frame, 4 bytes spill stores, 4 bytes spill loads
ptxas info    : Used 255 registers, used 1 barriers, 384 bytes cmem[0]
ptxas info    : Function properties for _Z6helperv
    16 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Compiling entry function '_Z8k_plainv' for 'sm_90'
ptxas info    : Function properties for _Z8k_plainv
    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 40 registers, used 0 barriers, 360 bytes cmem[0]
"""
    figures = ptxas_figures(verbose.splitlines())
    assert list(figures.values()) == [
        {"registers": 255, "stack_bytes": 8, "spill_store_bytes": 4, "spill_load_bytes": 4},
        {"registers": 40, "stack_bytes": 0, "spill_store_bytes": 0, "spill_load_bytes": 0}], figures
    out = io.StringIO()
    write_ptxas_csv(figures, "", out)
    assert out.getvalue().splitlines() == [
        "kernel,registers,stack_bytes,spill_store_bytes,spill_load_bytes",
        "k_causal_forward_residentILNS_8TileMathE2ELi32EE,255,8,4,4", "_Z8k_plainv,40,0,0,0"], out.getvalue()
    print("sass_counts self-test passed")


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--match", default="", help="only kernels whose mangled name contains this")
    parser.add_argument("--loops", action="store_true", help="one row per innermost loop with tensor-core products")
    parser.add_argument("--ptxas", action="store_true",
                        help="read nvcc -Xptxas -v output: registers, stack frame and spills per kernel")
    parser.add_argument("--self-test", action="store_true", help="check the parser on a fixed listing and exit")
    args = parser.parse_args()
    if args.self_test:
        self_test()
        return 0
    lines = sys.stdin.readlines()
    if args.ptxas:
        figures = ptxas_figures(lines)
        if not figures:
            sys.stderr.write("sass_counts.py: no 'Compiling entry function' in the input; give it what "
                             "nvcc -Xptxas -v printed\n")
            return 1
        write_ptxas_csv(figures, args.match, sys.stdout)
        return 0
    kernels = count(lines)
    if not kernels:
        sys.stderr.write("sass_counts.py: no 'Function :' in the input; give it the output of cuobjdump -sass\n")
        return 1
    if args.loops:
        write_loops_csv(loops(lines), args.match, sys.stdout)
    else:
        write_csv(kernels, args.match, sys.stdout)
    return 0


if __name__ == "__main__":
    sys.exit(main())
