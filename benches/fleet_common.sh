# Shared by the fleet benchmarks (benches/fleet_cost.sh, benches/fleet_first_agent.sh);
# sourced, not run. Expects `$spice` (an absolute path to the release binary) and
# `$work` (the benchmark's temporary directory) to be set by the caller.

die() { echo "$*" >&2; exit 2; }

# A scratch repository at DIR on branch main with LANES lanes (l1…lN) of PROFILE, lease
# LEASE, taking phase "todo" of any project, committed.
# usage: fleet_repo DIR LANES PROFILE LEASE
fleet_repo() {
  local dir=$1 lanes=$2 profile=$3 lease=$4
  git init -q -b main "$dir"
  git -C "$dir" config user.email bench@spice.invalid
  git -C "$dir" config user.name "spice bench"
  mkdir -p "$dir/lanes" "$dir/profiles"
  for i in $(seq "$lanes"); do
    printf 'profile = "%s"\nphases = ["todo"]\nlease = "%s"\n' "$profile" "$lease" > "$dir/lanes/l$i.toml"
  done
}

# profiles/NAME.toml in DIR: the built-in demo profile with `--command-seconds SECS`
# added to both argv templates, so each work command of the demo agent runs that long.
# usage: slow_demo_profile DIR NAME SECS
slow_demo_profile() {
  local dir=$1 name=$2 secs=$3 out=$1/profiles/$2.toml
  sed -e "s/\"--interactive\",\$/\"--interactive\", \"--command-seconds\", \"$secs\",/" \
      -e "s/\"--interactive\"\]/\"--interactive\", \"--command-seconds\", \"$secs\"]/" \
      src/config/builtin/demo.toml > "$out"
  [ "$(grep -c -- --command-seconds "$out")" = 2 ] ||
    die "src/config/builtin/demo.toml changed shape; fix slow_demo_profile in $0"
}

# Commits lanes/ and profiles/ in DIR.
commit_config() {
  git -C "$1" add lanes $(cd "$1" && ls -d profiles/*.toml 2>/dev/null)
  git -C "$1" commit -q -m "bench lanes"
}

# Processes whose working directory is under $work (agents, their shells, sleeps) or
# whose command line names it (`pgrep -f`: a demo agent's --brief-file, a supervisor):
# what must not outlive the benchmark. Prints "pid cmdline" lines.
leftovers() {
  local p cwd pid named
  named=" $(pgrep -f -- "$work" | tr '\n' ' ') "
  for p in /proc/[0-9]*; do
    pid=${p#/proc/}
    { [ "$pid" = $$ ] || [ "$pid" = "$BASHPID" ]; } && continue
    cwd=$(readlink "$p/cwd" 2>/dev/null) || cwd=
    case $cwd in
      "$work" | "$work"/*) ;;
      *) case $named in *" $pid "*) ;; *) continue ;; esac ;;
    esac
    echo "$pid $(tr '\0' ' ' < "$p/cmdline" 2>/dev/null)"
  done
}

# Ends every leftover process (by pid; all of them are ours by their cwd), reporting
# them; returns 1 if there were any.
reap_leftovers() {
  local left
  left=$(leftovers)
  [ -z "$left" ] && return 0
  echo "leftover processes (killed):" >&2
  echo "$left" >&2
  echo "$left" | while read -r pid _; do kill -KILL "$pid" 2>/dev/null || true; done
  return 1
}

# Waits up to SECS for pid PID to be gone.
# Stops the supervisor $sup of the repository $repo, if it still runs: `fleet down`,
# else SIGTERM; waits up to 20 s for it to be gone.
stop_supervisor() {
  if [ -n "$sup" ] && kill -0 "$sup" 2>/dev/null; then
    (cd "$repo" && "$spice" fleet down) >/dev/null 2>&1 || kill -TERM "$sup"
    wait_gone "$sup" 20
  fi
}

wait_gone() {
  local pid=$1 secs=$2 i
  for i in $(seq $((secs * 20))); do
    kill -0 "$pid" 2>/dev/null || return 0
    sleep 0.05
  done
  return 1
}

# CPU time of a process, all its threads (live and ended): utime + stime, in seconds.
cpu_seconds() {
  local stat rest
  stat=$(< "/proc/$1/stat")
  rest=${stat##*) }
  # shellcheck disable=SC2086
  set -- $rest # field 3 (state) is $1, so utime (14) is ${12}, stime (15) ${13}
  echo "scale=3; (${12} + ${13}) / $(getconf CLK_TCK)" | bc
}

# Nanoseconds on CPU of each live thread of PID, as "tid comm ns" lines
# (/proc/PID/task/TID/schedstat: finer than clock ticks).
thread_ns() {
  local t
  for t in /proc/"$1"/task/*; do
    echo "${t##*/} $(< "$t/comm") $(cut -d' ' -f1 "$t/schedstat")"
  done 2>/dev/null
}

# A field of /proc/PID/status in kB (VmRSS, VmHWM), 0 if the process is gone.
status_kb() {
  awk -v f="$2:" '$1 == f { print $2; found = 1 } END { if (!found) print 0 }' "/proc/$1/status" 2>/dev/null || echo 0
}
