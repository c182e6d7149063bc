# Next call after session 24: where Qwen2.5-7B's cold start-up goes, and what the mixed-step graphs cost it. Stop
# 31's first process on a fresh machine took 32.3 s (warm-up 17.5, KV cache + graphs 14.0), over the 30 s target;
# later cold-cache processes 24.1-29.3 s. Each process here has an empty Triton cache (its own TRITON_CACHE_DIR) and
# records the KV-cache + graphs phase's parts (`detail`: kv_alloc_s, decode / prefill / mixed _graphs_s, graph counts).
# The first process is the fresh machine's cold figure; then default and mixed_graph_max_tokens=0 alternate, twice.
# Usage (device, repo root, first call on a fresh machine): TACHYON_GIT_SHA=<sha> bash
#   benchmarks/gpu/bench_scripts/startup25.sh (carry .whl; ~4 min)
. benchmarks/gpu/bench_scripts/env.sh
R=$OUT/startup25
mkdir -p $R
one() {  # tag, extra startup.py args
  TRITON_CACHE_DIR=/tmp/tc25_$1 timeout 90 python3 benchmarks/gpu/startup.py --shape qwen2.5-7b --out $R --tag $1 $2 \
    2>&1 | grep "^{" | python3 -c "import json,sys; d=json.loads(sys.stdin.read()); print('$1', \
{k: round(d[k], 2) for k in ('load_s', 'warmup_s', 'kv_and_graphs_s', 'total_s')}, d['detail'])" | tee -a $R/runs.txt
}
nvidia-smi --query-gpu=name,driver_version,uuid --format=csv,noheader | tee $R/gpu.txt
one first ""
for i in 1 2; do
  one mixed0_$i "--engine-arg mixed_graph_max_tokens=0"
  one default_$i ""
done
