#!/usr/bin/env bash
# Starts or stops flotilla-manager in the background against the dev bed's primary.
# Usage: manager.sh start|stop DIR     (logs in DIR/logs/manager.log, PID in DIR/manager.pid)
# MANAGER_ARGS adds flags, e.g. MANAGER_ARGS=--metrics-secure=false to read its metrics with curl;
# MANAGER_KUBECONFIG is the identity it runs as (default: DIR/kubeconfig, the bed's admin).
set -euo pipefail
action=$1 dir=$2
pidfile="$dir/manager.pid"

running() { [[ -f "$pidfile" ]] && kill -0 "$(cat "$pidfile")" 2>/dev/null; }

case "$action" in
start)
  if running; then
    echo "manager: restarting (pid $(cat "$pidfile"))"
    "$0" stop "$dir"
  fi
  mkdir -p "$dir/logs"
  # setsid: the manager outlives `make demo`; dev-down stops it by its PID.
  setsid bin/flotilla-manager --kubeconfig "${MANAGER_KUBECONFIG:-$dir/kubeconfig}" --context primary \
    --health-probe-bind-address 127.0.0.1:18081 --metrics-bind-address 127.0.0.1:18443 \
    --webhook-port 19443 --webhook-bind-host 127.0.0.1 --webhook-url https://127.0.0.1:19443 \
    --webhook-cert-dir "$dir/webhook-certs" ${MANAGER_ARGS:-} \
    >>"$dir/logs/manager.log" 2>&1 </dev/null &
  echo $! >"$pidfile"
  for _ in $(seq 1 120); do
    if curl -fsS http://127.0.0.1:18081/readyz >/dev/null 2>&1; then
      echo "manager: ready (pid $(cat "$pidfile"), logs $dir/logs/manager.log)"
      exit 0
    fi
    running || { echo "manager: exited; last lines of $dir/logs/manager.log:" >&2; tail -20 "$dir/logs/manager.log" >&2; exit 1; }
    sleep 0.5
  done
  echo "manager: not ready after 60s; see $dir/logs/manager.log" >&2
  exit 1
  ;;
stop)
  if running; then
    pid=$(cat "$pidfile")
    kill "$pid"
    for _ in $(seq 1 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.2; done
    kill -9 "$pid" 2>/dev/null || true
    echo "manager: stopped (pid $pid)"
  fi
  rm -f "$pidfile"
  ;;
*)
  echo "usage: $0 start|stop DIR" >&2
  exit 2
  ;;
esac
