#!/usr/bin/env bash
# The GPU machine's checks, in the order the GPU issue lists them, one stage per check. Device time is
# short and rare: every stage has its own time limit, writes its log (and tables, curves) under
# $OUT/<stage>/, and a failing stage does not stop the next. On the device machine, from the checkout:
#
#     source benchmarks/gpu_setup.sh && bash benchmarks/gpu_checks.sh cuda demos   # ~8 min
#     source benchmarks/gpu_setup.sh && bash benchmarks/gpu_checks.sh ppo envs     # the next call
#
# With the device tool's limits (15 minutes of device time a session, start-up and idle included; 8 flat
# files back): R=$OUT; S=$(date +%s); source ...; DEADLINE=$((S+560)) OUT=/tmp/gc PACK=$R bash ... (timeout 590).
# The tool sends the working tree, at most 64 MiB: results/ (~11 MB) fits.
#
# Stages (default: all, in this order; each line's minutes are its time limit):
#   cuda   pytest -m cuda: pinned memory, device frame stack, device replay                      (4)
#   pong   configs/pong_5min.toml for 5 minutes of wall clock from the stage's start, start-up
#          included, then 10 greedy games of the policy it saved (the bar: >= 18)                   (6)
#   ant    configs/ant_5min.toml the same way (the bar: >= 5,000)                                   (6)
#   demos  pong and ant at once, each pinned to its own cores (5/16 of them for Pong, the rest for Ant,
#          threads to match): both bars in one 5-minute window of a shared machine                 (6)
#   ppo    bench_ppo.py at 8 and 64 envs: rlfast vs CleanRL's data path on EnvPool ($PPO_ARGS)   (9)
#   envs   bench_envs.py on Pong-v5 and Ant-v5 at every core: rlfast vs EnvPool vs the raw limit
#          ($ENVS_ARGS: default --seconds 5 --rounds 2)                                            (5)
#   dqn    bench_dqn.py at the write-up's settings, $DQN_SETTINGS (default 512x2048 128x32 1x32; the
#          write-up's 500k steps each do not fit a call: $DQN_STEPS each, default 50,000, fps compared) (9)
#   appo   bench_appo.py on Pong-v5: appo.py vs its pool's pure simulation                       (6)
#   pyenvs bench_pyenvs.py (gymnasium envs in worker processes) at every core: the own-envs issue's
#          85% of the env's single-process rate per core (2 cores: only at N >= 64)                  (6)
# DRY=1 shrinks every stage to seconds (a check of this script's plumbing on any machine). DEADLINE (epoch
# seconds) cuts every stage's limit to end 15 s before it, and skips a stage with under 20 s left; PACK=dir
# packs $OUT at the end into dir/gpu_checks.tgz.* (15 MiB pieces: the device tool brings back few, flat files).
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
OUT=${OUT:-bench_out/gpu_checks}
DRY=${DRY:-0}
DQN_STEPS=${DQN_STEPS:-50000}
read -r -a DQN_SETTINGS <<< "${DQN_SETTINGS:-512x2048 128x32 1x32}"
ALL=(cuda pong ant ppo envs dqn appo pyenvs)  # demos: pong and ant at once, on request
STAGES=("$@")
[ ${#STAGES[@]} -eq 0 ] && STAGES=("${ALL[@]}")
PY=${PYTHON:-python3}

note() { echo "[gpu_checks $(date -u +%H:%M:%S)] $*"; }

# limit SECONDS, then the command: SIGINT at the limit (trainers save their checkpoint), SIGKILL 60 s later.
limit() {
  local s=$1; shift
  [ "$DRY" = 1 ] && s=$(( s < 120 ? s : 120 ))
  if [ -n "${DEADLINE:-}" ]; then
    local left=$(( DEADLINE - $(date +%s) - 15 ))
    s=$(( s < left ? s : left ))
    if [ "$s" -lt 20 ]; then note "skipped (DEADLINE): $*"; return 124; fi
  fi
  timeout -s INT -k 60 "$s" "$@"
}

# demo STAGE SCRIPT CONFIG ENV_ID THRESHOLD DRY_STEPS: the preset for 300 s of wall clock (start-up
# included), interrupted there if still running, then its curve and 10 greedy episodes of what it saved.
# With CORES=a-b the run and its evaluation are pinned there (bench_learning.py gives the trainer as many
# env and torch threads as it has cores).
demo() {
  local stage=$1 script=$2 config=$3 env_id=$4 threshold=$5 dry_steps=$6
  local out=$OUT/$stage extra=() pin=()
  [ "$DRY" = 1 ] && extra=(--total-timesteps "$dry_steps")
  if [ -n "${CORES:-}" ]; then
    pin=(taskset -c "$CORES")
  fi
  local t0; t0=$(date +%s)
  limit 300 "${pin[@]}" "$PY" benchmarks/bench_learning.py --out "$out" --env-id "$env_id" --seeds 1 --script "$script" \
    --config "$config" --threshold "$threshold" "${extra[@]}" -- --save-minutes 1
  note "$stage: the run ended $(( $(date +%s) - t0 )) s after the stage started (start-up included)"
  "$PY" benchmarks/bench_learning.py --out "$out" --env-id "$env_id" --seeds 1 --script "$script" \
    --config "$config" --threshold "$threshold" --report-only
  local run; run=$(ls -d "$out"/runs/*/ 2>/dev/null | head -1)
  if [ -n "$run" ]; then
    local episodes=10; [ "$DRY" = 1 ] && episodes=2
    limit 120 "${pin[@]}" "$PY" scripts/evaluate.py "$run" --episodes "$episodes" --cuda
  else
    note "$stage: no run dir under $out/runs"; return 1
  fi
}

stage_cuda() {
  limit 240 "$PY" -m pytest -m cuda -q -p no:cacheprovider tests
}

stage_pong() { demo pong ppo_atari.py configs/pong_5min.toml Pong-v5 18 4096; }

stage_ant() { demo ant ppo_continuous.py configs/ant_5min.toml Ant-v5 5000 8192; }

stage_demos() {
  local n; n=$(nproc)
  local p=$(( n * 5 / 16 )); [ "$p" -lt 1 ] && p=1
  mkdir -p "$OUT/pong" "$OUT/ant"
  CORES=0-$(( p - 1 )) stage_pong > "$OUT/pong/log.txt" 2>&1 &
  local a=$!
  CORES=$p-$(( n - 1 )) stage_ant > "$OUT/ant/log.txt" 2>&1 &
  local b=$!
  wait $a; local ra=$?
  wait $b; local rb=$?
  note "demos: pong (cores 0-$(( p - 1 ))) exit $ra, ant (cores $p-$(( n - 1 ))) exit $rb"
  tail -n 25 "$OUT/pong/log.txt" "$OUT/ant/log.txt"
  [ $ra -eq 0 ] && [ $rb -eq 0 ]
}

stage_ppo() {
  local a; read -r -a a <<< "${PPO_ARGS:---num-envs 8 64 --iterations 3 --rounds 2 --contenders rlfast rlfast+auto rlfast+compile cleanrl}"
  [ "$DRY" = 1 ] && a=(--num-envs 8 --iterations 1 --rounds 1 --contenders rlfast cleanrl)
  limit 540 "$PY" benchmarks/bench_ppo.py "${a[@]}" --json "$OUT/ppo/ppo.json"
}

stage_envs() {
  local cores; cores=$(nproc)
  local a; read -r -a a <<< "${ENVS_ARGS:---seconds 5 --rounds 2}"
  [ "$DRY" = 1 ] && a=(--seconds 0.5)
  limit 300 "$PY" benchmarks/bench_envs.py --tasks Pong-v5 Ant-v5 --num-threads "$cores" "${a[@]}" \
    --contenders raw-limit rlfast-sync rlfast-async envpool-sync envpool-async --json "$OUT/envs/envs.json"
}

stage_dqn() {
  local a=(--steps "$DQN_STEPS" --learning-starts $(( DQN_STEPS / 5 )) --settings "${DQN_SETTINGS[@]}")
  [ "$DRY" = 1 ] && a=(--steps 2048 --learning-starts 1024 --settings 1x32)
  limit 540 "$PY" benchmarks/bench_dqn.py "${a[@]}" --contenders rlfast cleanrl env-only
}

stage_pyenvs() {
  local a=(--num-envs 16 64 256 --seconds 3)
  [ "$DRY" = 1 ] && a=(--num-envs 8 --seconds 0.5 --warmup 0.2)
  limit 360 "$PY" benchmarks/bench_pyenvs.py --tasks CartPole-v1 HalfCheetah-v5 LunarLander-v3 "${a[@]}" \
    --contenders single loop-per-core rlfast rlfast-async gym-sync gym-async
}

stage_appo() {
  local a=(--steps 400000)
  [ "$DRY" = 1 ] && a=(--steps 4096 --num-envs 8)
  limit 360 "$PY" benchmarks/bench_appo.py "${a[@]}" --contenders env-only sampler-only appo
}

note "stages: ${STAGES[*]}; out: $OUT; $("$PY" -c 'import torch; print("torch", torch.__version__, "cuda", torch.cuda.is_available() and torch.cuda.get_device_name(0))' 2>&1); $(nproc) cores"
# Preflight: a pool of each family made, reset and stepped. If that fails every stage would too (on the first
# GPU machine every rlfast.make crashed, and 7 of its 15 minutes went on stages that could not work): print a
# native backtrace (cuda-gdb debugs host code too; gdb where there is one) and stop, unless FORCE=1.
SMOKE='import numpy as np, rlfast, torch
for task in ("CartPole-v1", "Pong-v5", "Ant-v5"):
    with rlfast.make(task, num_envs=2) as pool:
        pool.reset()
        pool.step(torch.as_tensor(np.stack([pool.single_action_space.sample() for _ in range(2)])))
print("preflight: CartPole-v1, Pong-v5 and Ant-v5 pools made, reset and stepped")'
if ! timeout 120 "$PY" -X faulthandler -c "$SMOKE"; then
  note "preflight failed; rlfast._C links: $(ldd rlfast/_C*.so 2>&1 | awk '{print $1}' | tr '\n' ' ')"
  dbg=$(command -v gdb || command -v cuda-gdb)
  exe=$("$PY" -c 'import sys; print(sys.executable)')
  [ -n "$dbg" ] && timeout 120 "$dbg" -batch -ex run -ex bt --args "$exe" -c "$SMOKE" 2>&1 \
    | grep -v "New Thread\|Thread debugging\|Detaching\|exited" | tail -40
  [ "${FORCE:-0}" = 1 ] || { note "stopping (FORCE=1 runs the stages anyway)"; STAGES=(); }
fi
failed=()
for s in "${STAGES[@]}"; do
  if ! declare -F "stage_$s" > /dev/null; then
    note "unknown stage '$s' (stages: ${ALL[*]})"; failed+=("$s"); continue
  fi
  mkdir -p "$OUT/$s"
  note "stage $s: start"
  t0=$(date +%s)
  "stage_$s" > >(tee "$OUT/$s/log.txt") 2>&1
  rc=$?
  note "stage $s: exit $rc after $(( $(date +%s) - t0 )) s (log: $OUT/$s/log.txt)"
  [ $rc -eq 0 ] || failed+=("$s")
done
note "done; stages that exited non-zero (a benchmark cut at its limit among them): ${failed[*]:-none}"
if [ -n "${PACK:-}" ]; then
  mkdir -p "$PACK"
  tar czf - -C "$OUT" . | split -b 15m - "$PACK/gpu_checks.tgz."
  note "packed $OUT into $(ls "$PACK"/gpu_checks.tgz.* | wc -l) piece(s) under $PACK"
fi
