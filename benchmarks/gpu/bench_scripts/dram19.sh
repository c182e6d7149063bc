# Session 19: DRAM bytes of the 7B projections' cuBLAS GEMMs at 96 / 256 / 8,192 rows against their weight bytes
# (gemm_dram_probe.py under Nsight Compute, clocks left alone). Writes $OUT/dram19/{ncu.csv,ncu.err,probe.txt}.
# Usage (device, repo root): bash benchmarks/gpu/bench_scripts/dram19.sh
mkdir -p $OUT/dram19
NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
echo "ncu: $NCU" | tee $OUT/dram19/probe.txt
timeout 200 $NCU --clock-control none --metrics dram__bytes_read.sum,dram__bytes_write.sum,gpu__time_duration.sum \
  --csv python3 benchmarks/gpu/gemm_dram_probe.py --rows 96,256,8192 > $OUT/dram19/ncu.csv 2> $OUT/dram19/ncu.err
echo "rc $?" | tee -a $OUT/dram19/probe.txt
grep -c dram__bytes_read $OUT/dram19/ncu.csv | tee -a $OUT/dram19/probe.txt
tail -5 $OUT/dram19/ncu.err
