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

    cuobjdump -sass build/kernels/.../favor_attention_cuda_resident_bf16.cu.o |
        python3 launch/bench/sass_counts.py [--match causal_forward] > counts.csv
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
    kernels = collections.OrderedDict()
    current = None
    for line in lines:
        m = _FUNCTION.search(line)
        if m:
            current = kernels.setdefault(m.group(1), collections.Counter())
            continue
        m = _INSTRUCTION.match(line)
        if m and current is not None:
            current["instructions"] += 1
            column = column_of(m.group(1))
            if column:
                current[column] += 1
    return kernels


def write_csv(kernels, match, out):
    out.write("kernel," + ",".join(COLUMNS) + "\n")
    for name, counts in kernels.items():
        if match and match not in name:
            continue
        out.write(short_name(name) + "," + ",".join(str(counts[c]) for c in COLUMNS) + "\n")


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
    print("sass_counts self-test passed")


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--match", default="", help="only kernels whose mangled name contains this")
    parser.add_argument("--self-test", action="store_true", help="check the parser on a fixed listing and exit")
    args = parser.parse_args()
    if args.self_test:
        self_test()
        return 0
    kernels = count(sys.stdin)
    if not kernels:
        sys.stderr.write("sass_counts.py: no 'Function :' in the input; give it the output of cuobjdump -sass\n")
        return 1
    write_csv(kernels, args.match, sys.stdout)
    return 0


if __name__ == "__main__":
    sys.exit(main())
