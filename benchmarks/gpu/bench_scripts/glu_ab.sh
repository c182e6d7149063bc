# One H200 call (session 8): the gate|up GEMV with SiLU-and-mul in its epilogue (kernels/gemv_glu.py) in decode-
# step replays on both shapes, against the warm-up's other choices (glu.gate_up_proj=none: the GEMV, then the
# activation kernel or, 7B, the SiLU in down's prologue), plus its GPU kernel tests. The warm-up's fresh
# decisions come back in cache/kernel_tuning.json.
# Usage (device, repo root): TACHYON_GIT_SHA=<sha> bash benchmarks/gpu/bench_scripts/glu_ab.sh (carry .whl)
. benchmarks/gpu/bench_scripts/env.sh
export GIT_SHA=$TACHYON_GIT_SHA TACHYON_CACHE_DIR=$OUT/cache
f() { grep -v -i warn | grep -v "^\s*$"; }
timeout 120 python3 -m pytest -q tests/test_kernels_gemv.py -k "glu or tied or step_overrides" 2>&1 | tail -2
V06=auto,glu.gate_up_proj=none,glu.gate_up_proj=4:1024:4:1,glu.gate_up_proj=8:512:4:3,glu.gate_up_proj=2:1024:4:1
V06=$V06,glu.gate_up_proj=8:1024:8:1,glu.gate_up_proj=2:2048:4:1
timeout 200 python3 benchmarks/gpu/step_ab.py --shapes qwen3-0.6b --rounds 2 --variants $V06 --out $OUT/ab06 2>&1 \
  | f | tail -14
V7=auto,glu.gate_up_proj=none,glu.gate_up_proj=4:1024:4:1,glu.gate_up_proj=8:512:4:3,glu.gate_up_proj=2:2048:4:1
timeout 240 python3 benchmarks/gpu/step_ab.py --shapes qwen2.5-7b --rounds 2 --variants $V7 --out $OUT/ab7 2>&1 \
  | f | tail -10
