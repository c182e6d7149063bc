# Session 17, eighth call: does building the engine into its own torch.cuda.MemPool make Qwen3-0.6B bs1's mode
# independent of what the process allocated before? layout_probe.py, one build per process, 3 runs each: a 256 KiB
# pad before the load (slow under the default allocator at layout17) without and with --own-pool; transformers
# first (--hf-first; slow under expandable segments at expand17d) with --own-pool; no pad with --own-pool.
# Usage (device, repo root): TACHYON_GIT_SHA=<sha> bash benchmarks/gpu/bench_scripts/pool17.sh (carry .whl)
. benchmarks/gpu/bench_scripts/env.sh
R=/tmp/pool17
mkdir -p $R
pack() { tar czf $OUT/pool17.tgz -C $R .; }
one() {  # tag pad_kib [probe flags]
  t=$1 pad=$2
  shift 2
  timeout 70 python3 benchmarks/gpu/layout_probe.py --kib --site load --pads $pad --runs 3 "$@" \
    --out $R/p_${t}_$pad.json 2>&1 | f | grep -E "pad |Error|error" | sed "s/^/$t /" | tee -a $R/pool.txt
  pack
}
one default 256
one pool 256 --own-pool
one pool 0 --own-pool
one pool_hf 0 --own-pool --hf-first
one default_hf 0 --hf-first
