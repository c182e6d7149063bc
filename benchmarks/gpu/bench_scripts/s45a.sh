# Where the tail's time goes, and the split of a flat step's joules (~7 minutes on a cold machine). nano256's last
# ~105 steps are decode-only steps of 1-112 rows over 1,000-2,000-token contexts, running above the power cap's
# clock (1,935-1,980 MHz): their time is wall time, not joules. step_trace.py traces those decode graphs kernel by
# kernel at such contexts; step_timeline.py times a flat nano256 run step by step with two profiled windows (mixed
# steps 500-503, tail steps 960-964); step_energy.py splits a flat-shaped step's joules (gemms / lm_head /
# attention, then the ablations), each in its own process with the whole log kept.
# Usage (device, repo root; carry .whl): TACHYON_GIT_SHA=<sha> bash benchmarks/gpu/bench_scripts/s45a.sh
. benchmarks/gpu/bench_scripts/env.sh
R=/tmp/s45a
mkdir -p $R
nvidia-smi --query-gpu=name,driver_version,power.limit,uuid --format=csv,noheader | tee $R/gpu.txt
timeout 150 python3 benchmarks/gpu/step_trace.py --out $R --shape qwen2.5-7b --context 1500 --context-spread 500 \
  --batches 16,32,48,64,80,96,112 --replays 5 > $R/trace.log 2>&1; f < $R/trace.log | grep "us/step\|Error\|error" | cut -c1-300
tar czf $OUT/s45a.tgz -C $R .
timeout 120 python3 benchmarks/gpu/step_timeline.py --shape qwen2.5-7b --workload nano256 --out $R \
  --scheduling-policy flat --profile-steps 500:503,960:964 > $R/timeline.log 2>&1; grep -v '^ ' $R/timeline.log | f | tail -3
python3 - <<'PY'
import json
d = json.load(open("/tmp/s45a/step_timeline_qwen2.5-7b_nano256_flat.json"))
print("total", round(d["total_s"], 3), "steps", d["steps"], {k: (v["steps"], round(v["ms"], 1)) for k, v in d["by_kind"].items()})
for b, v in d["by_bucket"].items():
    print("bucket", b, v["steps"], round(v["mean_ms"], 2), "host", round(v["mean_host_ms"], 2))
for p in d["profiles"]:
    print("window", p["first"], p["last"], "wall", round(p["wall_ms"], 2), "busy", round(p["gpu_busy_ms"], 2),
          "span", round(p["gpu_span_ms"], 2), {k[:40]: round(v, 3) for k, v in p["kernels_ms_per_step"].items()})
PY
tar czf $OUT/s45a.tgz -C $R .
timeout 130 python3 benchmarks/gpu/step_energy.py --out $R --tag _pieces --pieces gemms,lm_head,attention --rounds 1 \
  --seconds 0.7 --steps 226:62,128:128 > $R/energy_pieces.log 2>&1; grep -v '^{' $R/energy_pieces.log | f | cut -c1-400 | tail -12
tar czf $OUT/s45a.tgz -C $R .
timeout 130 python3 benchmarks/gpu/step_energy.py --out $R --tag _ablate --pieces no_attention,no_lm_head,no_sampler \
  --rounds 1 --seconds 0.7 --steps 226:62,128:128 > $R/energy_ablate.log 2>&1; grep -v '^{' $R/energy_ablate.log | f | cut -c1-400 | tail -12
tar czf $OUT/s45a.tgz -C $R .
