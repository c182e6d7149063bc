# Prefix caching on against off (benchmarks/gpu/prefix_cache_ab.py): Qwen2.5-7B, 64 requests sharing a 1,024-token
# head with 64 tokens of their own, 64 outputs, 3 rounds, then a control with no shared head; then Qwen3-0.6B the
# same. ~3 minutes on a cold machine. Usage (device, repo root; carry .whl):
#   TACHYON_GIT_SHA=<sha> bash benchmarks/gpu/bench_scripts/prefix_cache.sh
. benchmarks/gpu/bench_scripts/env.sh
for shape in qwen2.5-7b qwen3-0.6b; do
  mkdir -p $OUT/prefix_$shape
  timeout 240 python3 benchmarks/gpu/prefix_cache_ab.py --shape $shape --out $OUT/prefix_$shape 2>&1 \
    | grep -v -i warn | tee $OUT/prefix_$shape/log.txt | tail -10
done
