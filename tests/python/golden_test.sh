#!/usr/bin/env bash
# Golden tests of the Python package against the C++ trainer (CMakeLists.txt
# of this folder says what is covered).
#   golden_test.sh <python> <folder of the performer-* tools> <pf_golden_dump>
# Exit 77 (skipped) when <python> lacks torch, h5py, numpy or safetensors.
set -euo pipefail
py=$1; bin=$2; dump=$3
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
source "$here/package_env.sh"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=1
work=$(mktemp -d "${TMPDIR:-/tmp}/pf-golden.XXXXXX")
[ -n "${PF_GOLDEN_KEEP:-}" ] && echo "golden_test: keeping $work" || trap 'rm -rf "$work"' EXIT
cd "$work"
examples=/usr/share/doc/mmseqs2/example-data
"$bin/performer-data" prepare --output data.h5 --val-fraction 0.1 "$examples/QUERY.fasta.gz" > prepare.log
# Families (synthetic, 90 % identity; MMseqs2 clusters them) for data.mode = "family".
"$py" "$repo/launch/studies/synthetic_families.py" families.fasta --families 40 --members 4 --min 20 --max 50
"$bin/performer-data" prepare --output families.h5 --cluster-identity 0.5 --val-fraction 0.1 families.fasta \
    > prepare_families.log

# name attention objective dtype data.mode [key=value ...: more --set]
runs=(
  "favor_clm_f32_small favor clm f32 packed model.width=128 model.heads=4 model.ffn=512 model.features=64 \
   model.chunk=64 data.sample_length=512 data.batch_size=2"
  "favor_clm_f32_packed favor clm f32 packed model.redraw_interval=2"
  "favor_mlm_bf16_single favor mlm bf16 single"
  "relu_clm_f32_concat relu clm f32 concat"
  "relu_mlm_f32_packed relu mlm f32 packed"
  "softmax_clm_bf16_packed softmax clm bf16 packed"
  "softmax_mlm_f32_single softmax mlm f32 single"
  "elu_clm_f32_packed elu clm f32 packed model.features=16"
  "elu_mlm_f32_single elu mlm f32 single model.features=16"
  "exp_clm_f32_packed exp clm f32 packed"
  "exp_mlm_bf16_concat exp mlm bf16 concat model.exp_key_norm=true"
  "favor_clm_f32_family favor clm f32 family data.files=[\"families.h5\"] data.sample_length=256"
  "softmax_mlm_f32_family softmax mlm f32 family data.files=[\"families.h5\"] data.sample_length=256"
  "exp_clm_f32_family exp clm f32 family data.files=[\"families.h5\"] data.sample_length=256"
  "favor_clm_f32_window_family favor clm f32 family data.files=[\"families.h5\"] data.sample_length=256 model.window=24"
  "softmax_mlm_f32_window softmax mlm f32 packed model.window=10"
)
for spec in "${runs[@]}"; do
  read -r name att obj dtype mode extra <<< "$spec"
  # Each key once (performer-train refuses a repeated --set): the extras replace the defaults.
  declare -A kv=([data.files]='["data.h5"]' [model.layers]=2 [model.width]=32 [model.heads]=2 [model.ffn]=64
                 [model.features]=24 [model.chunk]=16 [model.attention]="\"$att\"" [model.objective]="\"$obj\""
                 [model.dtype]="\"$dtype\"" [data.mode]="\"$mode\"" [data.sample_length]=96 [data.batch_size]=3
                 [train.steps]=3 [train.eval_interval]=0 [train.log_interval]=1 [optimizer.lr]=3e-3
                 [optimizer.warmup_steps]=1 [checkpoint.dir]="\"$name\"" [checkpoint.interval]=3
                 [train.metrics]="\"$name.jsonl\"")
  for item in ${extra:-}; do kv[${item%%=*}]=${item#*=}; done
  sets=()
  for key in "${!kv[@]}"; do sets+=(--set "$key=${kv[$key]}"); done
  unset kv
  "$bin/performer-train" "${sets[@]}" > "$name.train.log" 2>&1 || { cat "$name.train.log"; exit 1; }
  ck="$name/ckpt-000000003.h5"
  "$dump" --checkpoint "$ck" --output "$name.golden.h5" --set 'model.dtype="f32"' > /dev/null
  if [ "$dtype" != f32 ]; then "$dump" --checkpoint "$ck" --output "$name.golden_$dtype.h5" > /dev/null; fi
done

# Proteins to score and embed: the first 6 of QUERY.fasta.gz and one of titin's
# length (35,000 residues, real sequences of DB.fasta.gz back to back).
"$py" - "$examples" <<'PY'
import gzip, sys
ex = sys.argv[1]
def records(path):
    name, seq = None, []
    for line in gzip.open(path, "rt"):
        line = line.strip()
        if line.startswith(">"):
            if name: yield name, "".join(seq)
            name, seq = line[1:].split()[0], []
        elif line: seq.append(line)
    if name: yield name, "".join(seq)
with open("proteins.fasta", "w") as f:
    for i, (name, seq) in enumerate(records(f"{ex}/QUERY.fasta.gz")):
        if i == 6: break
        f.write(f">{name}\n{seq}\n")
titin = ""
for name, seq in records(f"{ex}/DB.fasta.gz"):
    titin += seq
    if len(titin) >= 35000: break
with open("titin.fasta", "w") as f:
    f.write(">titin_length_35000\n" + titin[:35000].replace("*", "") + "\n")
PY
for name in favor_clm_f32_packed relu_clm_f32_concat softmax_clm_bf16_packed relu_mlm_f32_packed; do
  ck="$name/ckpt-000000003.h5"
  "$bin/performer-score" --checkpoint "$ck" --format jsonl --set 'model.dtype="f32"' -o "$name.score.jsonl" \
      --per-residue "$name.score.h5" proteins.fasta
  "$bin/performer-embed" --checkpoint "$ck" --set 'model.dtype="f32"' -o "$name.embed.h5" --per-residue proteins.fasta
done
"$bin/performer-score" --checkpoint favor_clm_f32_packed/ckpt-000000003.h5 --format jsonl \
    -o titin.score.jsonl --per-residue titin.score.h5 titin.fasta
"$bin/performer-embed" --checkpoint favor_mlm_bf16_single/ckpt-000000003.h5 --set 'model.dtype="f32"' \
    -o titin.embed.h5 titin.fasta
# Scoring given a context: three members of a family before the fourth and two
# unrelated proteins; cached state (linear kernels, and the window's last keys
# and values beside FAVOR+) and one pass (softmax).
head -6 families.fasta > context.fasta
{ sed -n 7,8p families.fasta; head -4 proteins.fasta; } > context_queries.fasta
for name in favor_clm_f32_family exp_clm_f32_family relu_clm_f32_concat softmax_clm_bf16_packed favor_clm_f32_window_family; do
  "$bin/performer-score" --checkpoint "$name/ckpt-000000003.h5" --format jsonl --set 'model.dtype="f32"' \
      --context context.fasta -o "$name.context.jsonl" --per-residue "$name.context.h5" context_queries.fasta \
      2> "$name.context.log"
done

"$py" "$here/golden_checks.py" "$work" "$repo"
