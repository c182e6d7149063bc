# Session 19: what the prefill GEMMs' DRAM re-reads cost at the power cap. data_power.py holds each 8,192-row
# Qwen2.5-7B prefill GEMM for 3 s in the engine's F.linear layout, in one piece and split along N into chunks whose
# weight fits in L2 (gate_up 1 / 8 / 16, down 1 / 4), alternating. Writes $OUT/chunks19.json and chunks19.txt.
# Usage (device, repo root): bash benchmarks/gpu/bench_scripts/chunks19.sh
. benchmarks/gpu/bench_scripts/env.sh
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $OUT/chunks19.txt
timeout 120 python3 benchmarks/gpu/data_power.py --shapes prefill_gate_up --data normal --chunks 1,8,16,1,8,16 \
  --out $OUT/chunks19_gate_up.json 2>&1 | f | tee -a $OUT/chunks19.txt
timeout 60 python3 benchmarks/gpu/data_power.py --shapes prefill_down --data normal --chunks 1,4,1,4 \
  --out $OUT/chunks19_down.json 2>&1 | f | tee -a $OUT/chunks19.txt
