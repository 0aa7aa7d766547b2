#!/usr/bin/env bash
# Undoes what a test kit node (hack/testkit/src/node) changed on the machine, from the state
# file it keeps under /run/ichor-node/: kills its processes (by the PIDs recorded there, and
# every process whose command line names the node's directory: containerd's shims), the
# processes left in `kubepods` cgroups, unmounts everything under the node's directory (deepest
# first, lazily when busy), removes the `kubepods` cgroup directories of every hierarchy
# (deepest first), deletes its network namespace and the CNI cache entries of its network and
# containers, writes back the kernel settings the kubelet changed, and removes the machine
# directories its components created (/var/lib/kubelet, /var/log/containers, /var/lib/cni,
# /run/containerd) when they did not exist before it, else its links in /var/log/containers.
# Idempotent; a no-op when there is nothing.
# A node holds /run/ichor-node/lock from before it changes anything until it has put everything
# back, so while the lock is free (or held by the caller) every state file is a leftover; the
# `kubepods` cgroups are shared by whichever node runs, so nothing is cleaned while another node
# holds the lock.
# Usage: hack/node/clean.sh          takes the lock (waiting up to $ICHOR_NODE_CLEAN_WAIT
#                                    seconds, default 600, for a running node to stop), then
#                                    cleans every state file (hack/test.sh's exit trap)
#        hack/node/clean.sh --locked every state file; the caller holds the lock (Node::start)
#        hack/node/clean.sh FILE     that state file; the caller holds the lock (Node's drop;
#                                    the node's directory is left to its owner)
set -euo pipefail
state_dir=/run/ichor-node

# start_time PID: field 22 of /proc/PID/stat (the process's start, in clock ticks since boot).
start_time() { sed 's/^.*) //' "/proc/$1/stat" 2>/dev/null | cut -d' ' -f20; }

# alive PID START: true when PID runs and started at START (not a reused PID).
alive() { [[ -n "$1" && "$(start_time "$1")" == "$2" ]]; }

kill_cgroup_tasks() {
  local procs pid
  for procs in /sys/fs/cgroup/*/kubepods/cgroup.procs /sys/fs/cgroup/*/kubepods/*/cgroup.procs \
    /sys/fs/cgroup/*/kubepods/*/*/cgroup.procs /sys/fs/cgroup/*/kubepods/*/*/*/cgroup.procs; do
    [[ -f "$procs" ]] || continue
    while read -r pid; do kill -KILL "$pid" 2>/dev/null || true; done <"$procs"
  done
}

clean_one() { # FILE REAP(1: remove the directory too)
  local file=$1 reap=$2 key a b namespace="" dir="" keep=0 pids=() sysctls=() created=() containers=()
  while read -r key a b; do
    case "$key" in
      namespace) namespace=$a ;;
      dir) dir=$a ;;
      keep) keep=1 ;;
      pid) pids+=("$a:$b") ;;
      sysctl) sysctls+=("$a=$b") ;;
      created) created+=("$a") ;;
      container) containers+=("$a") ;;
    esac
  done <"$file"
  local entry pid
  for entry in "${pids[@]}"; do
    pid=${entry%%:*}
    alive "$pid" "${entry#*:}" && kill -KILL "$pid" 2>/dev/null || true
  done
  if [[ -n "$dir" && "$dir" == /*/* ]]; then
    local cmdline
    for cmdline in /proc/[0-9]*/cmdline; do
      pid=${cmdline#/proc/}; pid=${pid%/cmdline}
      [[ "$pid" == "$$" ]] && continue
      if tr '\0' ' ' <"$cmdline" 2>/dev/null | grep -qF -- "$dir/"; then
        kill -KILL "$pid" 2>/dev/null || true
      fi
    done
  fi
  kill_cgroup_tasks
  sleep 0.2
  kill_cgroup_tasks
  if [[ -n "$dir" && "$dir" == /*/* ]]; then
    local target tries
    for tries in 1 2 3; do
      # Deepest first: the longest paths first.
      local targets
      targets=$(findmnt -rn -o TARGET | awk -v d="$dir" 'index($0, d "/") == 1 || $0 == d' |
        awk '{ print length, $0 }' | sort -rn | cut -d' ' -f2-)
      [[ -z "$targets" ]] && break
      while read -r target; do
        target=$(printf "%b" "$target")
        umount "$target" 2>/dev/null || umount -l "$target" 2>/dev/null || true
      done <<<"$targets"
    done
  fi
  local hierarchy
  for hierarchy in /sys/fs/cgroup/*/kubepods; do
    [[ -d "$hierarchy" ]] || continue
    find "$hierarchy" -depth -type d -exec rmdir {} + 2>/dev/null || true
    [[ -d "$hierarchy" ]] && echo "hack/node/clean.sh: $hierarchy could not be removed (tasks left: $(cat "$hierarchy/cgroup.procs" 2>/dev/null | wc -l))" >&2
  done
  if [[ -n "$namespace" ]]; then
    [[ -e "/run/netns/$namespace" ]] && ip netns delete "$namespace" 2>/dev/null || true
    rm -f /var/lib/cni/results/"$namespace"-* 2>/dev/null || true
  fi
  if [[ -n "$dir" && "$dir" == /*/* && -d /var/log/containers ]]; then
    find /var/log/containers -maxdepth 1 -type l -lname "$dir/*" -delete 2>/dev/null || true
  fi
  for entry in "${containers[@]}"; do
    rm -f /var/lib/cni/results/*-"$entry"-* 2>/dev/null || true
  done
  for entry in "${created[@]}"; do
    [[ "$entry" == /*/* ]] && rm -rf --one-file-system "$entry"
  done
  for entry in "${sysctls[@]}"; do
    key=${entry%%=*}
    printf '%s\n' "${entry#*=}" >"/proc/sys/${key//.//}" ||
      echo "hack/node/clean.sh: could not restore $key=${entry#*=}" >&2
  done
  if [[ $reap -eq 1 && $keep -eq 0 && -n "$dir" && "$dir" == /*/* && -d "$dir" ]]; then
    rm -rf --one-file-system "$dir" 2>/dev/null || echo "hack/node/clean.sh: left $dir (busy)" >&2
  fi
  rm -f "$file"
}

if [[ $# -ge 1 && "$1" != --locked ]]; then
  [[ -f "$1" ]] && clean_one "$1" 0
  exit 0
fi
[[ -d "$state_dir" ]] || exit 0
shopt -s nullglob
leftovers=("$state_dir"/*.state)
((${#leftovers[@]})) || exit 0
if [[ "${1:-}" != --locked ]]; then
  exec 9>>"$state_dir/lock"
  if ! flock -w "${ICHOR_NODE_CLEAN_WAIT:-600}" 9; then
    echo "hack/node/clean.sh: a node still runs (test process $(cat "$state_dir/holder" 2>/dev/null)); left ${leftovers[*]} for the next node's start" >&2
    exit 0
  fi
fi
for file in "$state_dir"/*.state; do
  echo "hack/node/clean.sh: cleaning up after a node whose test did not ($file)" >&2
  clean_one "$file" 1
done
