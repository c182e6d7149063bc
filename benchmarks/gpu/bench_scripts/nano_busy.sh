# Is the GPU busy during Qwen2.5-7B nano256's steps, and at what clocks? One plain step timeline with nvidia-smi
# sampling SM clock, power and temperature every 100 ms beside it, then a timeline with profiled step windows
# (GPU busy time vs wall, kernels per step). Results in $OUT/nano_busy.tgz.
# Usage (device, repo root): TACHYON_GIT_SHA=<sha> bash benchmarks/gpu/bench_scripts/nano_busy.sh  (carry .whl)
. benchmarks/gpu/bench_scripts/env.sh
export GIT_SHA=$TACHYON_GIT_SHA
R=/tmp/nano_busy
mkdir -p $R/plain $R/prof
nvidia-smi --query-gpu=timestamp,clocks.sm,clocks.mem,power.draw,temperature.gpu,clocks_throttle_reasons.active \
  --format=csv -lms 100 > $R/smi.csv 2>&1 &
SMI=$!
timeout 200 python3 benchmarks/gpu/step_timeline.py --shape qwen2.5-7b --workload nano256 --out $R/plain > $R/plain.txt 2>&1
kill $SMI
timeout 200 python3 benchmarks/gpu/step_timeline.py --shape qwen2.5-7b --workload nano256 --out $R/prof \
  --profile-steps "${WIN:-3:6,20:29,100:109,300:309,600:609,900:909}" > $R/prof.txt 2>&1
python3 - $R <<'PY'
import csv, json, sys
R = sys.argv[1]
rows = [r for r in csv.reader(open(f"{R}/smi.csv")) if r and r[0][:2] == "20"]
sm = [int(r[1].split()[0]) for r in rows]
pw = [float(r[3].split()[0]) for r in rows]
print(f"smi samples {len(rows)}: SM MHz min {min(sm)} median {sorted(sm)[len(sm)//2]} max {max(sm)}; "
      f"power W median {sorted(pw)[len(pw)//2]:.0f} max {max(pw):.0f}; throttle reasons {sorted(set(r[5] for r in rows))}")
d = json.load(open(f"{R}/plain/step_timeline_qwen2.5-7b_nano256.json"))
print("plain total_s", round(d["total_s"], 3))
d = json.load(open(f"{R}/prof/step_timeline_qwen2.5-7b_nano256.json"))
for p in d["profiles"]:
    raw = d["raw"][p["first"]: p["last"] + 1]
    kinds = sorted(set((r.get("kind"), r.get("bucket")) for r in raw), key=str)
    print(f"steps {p['first']}-{p['last']} {kinds}: wall {p['wall_ms']:.1f} ms, GPU busy {p['gpu_busy_ms']:.1f}, "
          f"span {p['gpu_span_ms']:.1f}")
    print("   ", ", ".join(f"{k[:26]} {v:.2f}" for k, v in list(p["kernels_ms_per_step"].items())[:9]))
PY
tar czf $OUT/nano_busy.tgz -C $R .
