# Stop 56, third call: the layer kernel's tests with bf16 outputs held to the fp32 layer (close_layer), and for
# each bf16 case the norm-wise error against that fp32 layer of the kernel's five launches and of the unfused bf16
# reference, side by side. ~2 minutes on a warm machine. Usage (device, repo root; carry .whl):
#   TACHYON_GIT_SHA=<sha> bash benchmarks/gpu/bench_scripts/s56c.sh
. benchmarks/gpu/bench_scripts/env.sh
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
timeout 150 python3 -m pytest -q -rf --tb=short tests/test_kernels_layer_bs1.py > $OUT/pytest_layer_bs1.txt 2>&1
grep "passed\|failed\|FAILED\|Error" $OUT/pytest_layer_bs1.txt | tail -12
timeout 120 python3 - <<'PY' 2>&1 | tee $OUT/layer_bs1_bf16_error.txt
import torch
from tests.test_kernels_layer_bs1 import fp32_case, make_case, run
from tachyon.kernels.layer_bs1 import decoder_layer_bs1_ref, decoder_layer_bs1_triton
print("shape seq residual seed | y: kernel ref | h2: kernel ref  (norm-wise error against the fp32 layer)")
for shape in ("qwen3", "qwen2"):
    for seq, mx, res in ((1, 16, False), (7, 16, True), (200, 512, True)):
        for seed in range(3):
            case = make_case(shape, torch.bfloat16, seq, mx, res, seed=seed)
            t = run(decoder_layer_bs1_triton, case, num_programs=8, phases=True)
            r = run(decoder_layer_bs1_ref, case)
            f = run(decoder_layer_bs1_ref, fp32_case(case))
            e = lambda a, b: float((a.float() - b).norm() / b.norm())
            print(shape, seq, res, seed, "| %.4f %.4f | %.4f %.4f" % (e(t[0], f[0]), e(r[0], f[0]), e(t[1], f[1]),
                                                                   e(r[1], f[1])))
PY
