#!/usr/bin/env bash
# The main job, from a fresh Debian/Ubuntu machine: installs what it needs,
# builds, prepares real UniProt proteins into HDF5 with their families
# (MMseqs2 clusters at 30 % identity; the split is by family, so no test
# protein keeps a training relative at >= 30 % identity), trains the small
# causal Performer on family contexts (the members of a family back to back,
# one attention state across them) with `mpirun -np 2` (each sample split
# over both ranks) on the CPU, stops half way with a checkpoint, resumes from
# it, evaluates the result on the held-out families (perplexity with the
# relatives before each member and alone) and by protein length, scores the
# mmseqs2 QUERY proteins and generates a few proteins with it.
#   OUT        work folder (default: out/quickstart): a new folder, an empty
#              one or an earlier output of this script, which a rerun replaces
#              (launch/scripts/output_dir.sh)
#   BUILD_DIR  build folder (default: build)
#   STEPS      training steps, at least 2 (default: from launch/configs/small.toml;
#              its warm-up is cut to STEPS when longer)
set -euo pipefail
cd "$(dirname "$0")/.."
source launch/scripts/output_dir.sh
BUILD_DIR=${BUILD_DIR:-build}
steps=${STEPS:-$(sed -n 's/^steps *= *\([0-9]*\).*/\1/p' launch/configs/small.toml | head -1)}
case $steps in '' | *[!0-9]* | 0 | 1) echo "STEPS must be a whole number >= 2 (it stops half way and resumes), got '$steps'" >&2; exit 2 ;; esac
OUT=${OUT:-out/quickstart}
pf_claim_output OUT "$OUT"
pf_run launch/scripts/install_deps.sh
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
pf_run cmake -S . -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES="${CUDA_ARCH:-90}" > /dev/null
pf_run cmake --build "$BUILD_DIR" -j "$(nproc)" --target performer-data performer-train performer-eval performer-score \
  performer-generate
bin=$BUILD_DIR/launch

echo "== 1/5 prepare: UniProt sequences (FASTA.gz) -> HDF5, families and split by MMseqs2 cluster at 30 % identity"
pf_run "$bin/performer-data" prepare --output "$OUT/uniprot.h5" --cluster-identity 0.3 \
  /usr/share/doc/mmseqs2/example-data/DB.fasta.gz

half=$((steps / 2))
# The warm-up of small.toml, at most the run's steps (a short STEPS run).
warmup=$(sed -n 's/^warmup_steps *= *\([0-9]*\).*/\1/p' launch/configs/small.toml | head -1)
[ "$warmup" -le "$steps" ] || warmup=$steps
run=(pf_run mpirun --oversubscribe -np 2 -x OMP_NUM_THREADS=1 "$bin/performer-train" --config launch/configs/small.toml
     --set "data.files=[\"$OUT/uniprot.h5\"]" --set "checkpoint.dir=\"$OUT/checkpoints\""
     --set "train.metrics=\"$OUT/metrics.jsonl\"" --set "train.steps=$steps" --set "optimizer.warmup_steps=$warmup"
     --set 'data.mode="family"' --set data.sample_length=2048 --set data.batch_size=2)
pf_remove_own "$OUT" checkpoints metrics.jsonl

echo "== 2/5 train on family contexts of 2,048 tokens on 2 ranks (dp 1 x sp 2), stopping at step $half with a checkpoint"
"${run[@]}" --set "train.stop_at=$half"

echo "== 3/5 resume from the newest checkpoint and finish $steps steps"
"${run[@]}" --resume auto

echo "== 4/5 evaluate the final checkpoint on the held-out families: with the relatives before each member and alone"
last=$(ls "$OUT/checkpoints"/ckpt-*.h5 | tail -1)
pf_run mpirun --oversubscribe -np 2 -x OMP_NUM_THREADS=1 "$bin/performer-eval" --checkpoint "$last" --split test \
  --set "data.files=[\"$OUT/uniprot.h5\"]"
echo "   and every test protein on its own, by protein length (packed samples of 2,048 tokens)"
pf_run mpirun --oversubscribe -np 2 -x OMP_NUM_THREADS=1 "$bin/performer-eval" --checkpoint "$last" --split test \
  --set "data.files=[\"$OUT/uniprot.h5\"]" --set 'data.mode="packed"'
echo "(the unigram baseline of amino acids is a perplexity of about 18 on this data; this small model reads"
echo " little or nothing from the relatives: docs/results/family-context.md says what does)"

echo "== 5/5 score the QUERY proteins (per-protein log-likelihood) and generate 5 proteins"
pf_run mpirun --oversubscribe -np 2 -x OMP_NUM_THREADS=1 "$bin/performer-score" --checkpoint "$last" \
  --first-residue context --pack 4096 --output "$OUT/query_scores.tsv" /usr/share/doc/mmseqs2/example-data/QUERY.fasta.gz
OMP_NUM_THREADS=1 pf_run "$bin/performer-generate" --checkpoint "$last" --num 5 --max-length 400 --top-p 0.95 --seed 1 \
  --output "$OUT/generated.fasta"
