# One H200 call: is the batch-1 step with qkv_post in the qkv GEMV's epilogue faster than the old tree, and is
# this tree with both changes off (qkvpost=0 + dtile=128:4:2: the old kernels) equal to it? Qwen2.5-7B
# decode-step replays at 512 tokens, this tree's variants alternating with the old tree's (under $OLD);
# the qkv GEMV tests first.
# Usage (device, repo root): OLD=old TACHYON_GIT_SHA=<sha> bash benchmarks/gpu/bench_scripts/qkv_post_check.sh  (carry .whl)
. benchmarks/gpu/bench_scripts/env.sh
export GIT_SHA=$TACHYON_GIT_SHA
timeout 100 python3 -m pytest -q -rf tests/test_kernels_gemv_qkv.py 2>&1 | tail -6 | tee $OUT/gpu_tests.txt
for r in 0 1; do
  timeout 150 python3 benchmarks/gpu/step_ab.py --shapes qwen2.5-7b --rounds 1 --out $OUT/new_7b_$r \
    --variants "${T7:-auto,qkvpost=0,dtile=128:4:2,qkvpost=0+dtile=128:4:2}" 2>&1 | grep -v -i warn | tail -4
  (cd $OLD && PYTHONPATH=/tmp/site:$PWD timeout 60 python3 benchmarks/gpu/step_ab.py --shapes qwen2.5-7b --rounds 1 \
    --variants auto --out $OUT/old_7b_$r 2>&1 | grep -v -i warn | tail -1 | sed 's/^/old /')
done
