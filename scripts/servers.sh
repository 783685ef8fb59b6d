#!/usr/bin/env bash
# Throwaway test servers on loopback for converge's integration tests.
#
#   scripts/servers.sh start   install what is missing, start every server, wait until healthy
#   scripts/servers.sh stop    stop every server and remove its data; prints nothing on stdout
#   scripts/servers.sh env     print `export NAME=value` lines for the running servers (eval them)
#   scripts/servers.sh envfile print the path of the env file (KEY=value lines, shell-quoted)
#
# `make test` runs start, traps stop, and evals env. Everything the script says
# goes to stderr, so stdout stays clean for env/envfile and for go test's
# ok/FAIL lines.
#
# State lives in $CONVERGE_SERVERS_DIR (default ${TMPDIR:-/tmp}/converge-servers-$UID):
#
#   env                        the env file (see below)
#   etcd/single/s0/            the single-node etcd
#   etcd/cluster/c0 c1 c2/     the 3-node etcd cluster
#   postgres/                  the PostgreSQL server (see the PostgreSQL section)
#
# Each etcd member directory holds
#
#   data/      its data dir (kept across kills and restarts of the member)
#   endpoint   host:port of its client URL
#   cmd        the exact etcd command line (shell-quoted) that starts it from data/
#   pid        the etcd process id (written by start)
#   log        etcd's stdout and stderr
#   start      executable: start the member from data/ unless it runs, wait until
#              healthy (tests run it to restart a member they killed with SIGKILL)
#
# Environment written to the env file:
#
#   CONVERGE_ETCD_ENDPOINTS            127.0.0.1:P of the single-node etcd
#   CONVERGE_ETCD_STATE_DIR            its etcd/single directory (member dirs inside)
#   CONVERGE_ETCD_CLUSTER_ENDPOINTS    127.0.0.1:A,127.0.0.1:B,127.0.0.1:C
#   CONVERGE_ETCD_CLUSTER_STATE_DIR    the etcd/cluster directory (member dirs inside)
#   CONVERGE_POSTGRES_DSN              postgres://postgres@127.0.0.1:P/converge?sslmode=disable
#   CONVERGE_POSTGRES_STATE_DIR        the postgres directory (port, dsn, cmd, pid, start, ...)
#   CONVERGE_CHROMIUM                  the headless Chromium binary (not a server: nothing to
#                                      start or stop, only installed; the debug pages' browser test)
#   CONVERGE_SQLITE3                   the sqlite3 command line (not a server either; the
#                                      sqlitestore tests of writes from outside the program)
#   CONVERGE_KUBECONFIG                a kubeconfig for the kube-apiserver (see the Kubernetes section)
#   CONVERGE_KUBE_ETCD_ENDPOINTS       127.0.0.1:P of the etcd that only the kube-apiserver uses
#   CONVERGE_KUBE_STATE_DIR            the kube directory (port, token, kubeconfig, logs, etcd/)
#
# CONVERGE_SERVERS_KINDS, if set, names the kinds start starts (space-separated,
# of: etcd postgres chromium sqlite3 kube); stop always stops every kind.
#
# Adding a server kind: write <kind>_install, <kind>_start
# (which appends to the env file), <kind>_healthy and <kind>_stop, and list the
# kind in ALL_KINDS.
#
# start is idempotent: if every server in the state dir is alive and healthy it
# does nothing; otherwise it stops whatever is left (a half-failed start) and
# starts afresh. stop is safe to run at any time.
set -euo pipefail

ALL_KINDS=(etcd postgres chromium sqlite3 kube)
read -r -a KINDS <<<"${CONVERGE_SERVERS_KINDS:-${ALL_KINDS[*]}}"

STATE_DIR=${CONVERGE_SERVERS_DIR:-${TMPDIR:-/tmp}/converge-servers-$(id -u)}
ENV_FILE=$STATE_DIR/env
SELF=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/$(basename "${BASH_SOURCE[0]}")

# Seconds to wait for a server to become healthy, and for one to exit after TERM
# before KILL (short: the data is thrown away, and a 3-node member that lost
# quorum takes ~6 s to honour TERM).
HEALTH_TIMEOUT=${CONVERGE_SERVERS_HEALTH_TIMEOUT:-30}
STOP_TIMEOUT=${CONVERGE_SERVERS_STOP_TIMEOUT:-3}

log() { printf 'servers.sh: %s\n' "$*" >&2; }
die() {
	log "error: $*"
	exit 1
}

# --- processes and ports -----------------------------------------------------

# alive PID: true if PID runs (a zombie, whose parent has not reaped it, is dead).
alive() {
	local pid=$1 state
	[[ $pid =~ ^[0-9]+$ ]] || return 1
	state=$(awk '{print $3}' "/proc/$pid/stat" 2>/dev/null) || return 1
	[[ -n $state && $state != Z && $state != X ]]
}

# stop_pids SECONDS PID...: TERM every PID, wait up to SECONDS, then KILL the rest.
stop_pids() {
	local timeout=$1 pid deadline
	shift
	local pids=()
	for pid in "$@"; do alive "$pid" && pids+=("$pid"); done
	((${#pids[@]})) || return 0
	kill -TERM "${pids[@]}" 2>/dev/null || true
	deadline=$((SECONDS + timeout))
	while ((SECONDS < deadline)); do
		local left=()
		for pid in "${pids[@]}"; do alive "$pid" && left+=("$pid"); done
		((${#left[@]})) || return 0
		sleep 0.1
	done
	# Quietly: a 3-node member whose peers left first routinely needs this.
	for pid in "${pids[@]}"; do
		alive "$pid" && kill -KILL "$pid" 2>/dev/null
	done
	for _ in $(seq 50); do
		local any=
		for pid in "${pids[@]}"; do alive "$pid" && any=1; done
		[[ -z $any ]] && return 0
		sleep 0.1
	done
}

# listening PORT: true if something listens on TCP PORT (any address).
listening() {
	local hex
	hex=$(printf ':%04X ' "$1")
	# Column 2 is local_address, column 4 the state (0A = LISTEN).
	awk -v p="$hex" '$4 == "0A" && index($2 " ", p) { found = 1 } END { exit !found }' \
		/proc/net/tcp /proc/net/tcp6 2>/dev/null
}

# Ports handed out by free_port in this run, so two calls never pick the same.
TAKEN_PORTS=" "

# free_port: print a TCP port nothing listens on, below the kernel's ephemeral
# range (so outgoing connections cannot take it between now and the bind).
free_port() {
	local lo=20000 hi=32000 p
	for _ in $(seq 200); do
		p=$((lo + RANDOM % (hi - lo)))
		[[ $TAKEN_PORTS == *" $p "* ]] && continue
		listening "$p" && continue
		TAKEN_PORTS+="$p "
		echo "$p"
		return 0
	done
	die "no free TCP port found in $lo-$hi"
}

# http_ok URL: true if URL answers 200 with a body containing "true" within 2 s.
http_ok() {
	local url=$1 body
	if command -v curl >/dev/null; then
		body=$(curl -fsS --max-time 2 "$url" 2>/dev/null) || return 1
	else
		local hostport=${url#http://}
		hostport=${hostport%%/*}
		body=$(timeout 2 bash -c '
			exec 3<>"/dev/tcp/${1%:*}/${1##*:}" || exit 1
			printf "GET /%s HTTP/1.0\r\nHost: %s\r\n\r\n" "$2" "$1" >&3
			cat <&3' _ "$hostport" "${url#http://"$hostport"/}" 2>/dev/null) || return 1
		[[ $body == "HTTP/1."?" 200"* ]] || return 1
	fi
	[[ $body == *true* ]]
}

# apt_install PACKAGE...: install Debian packages without prompts or service starts.
apt_install() {
	local sudo=() aptlog
	if (($(id -u) != 0)); then
		command -v sudo >/dev/null || die "need root or sudo to install $*"
		sudo=(sudo -n)
	fi
	command -v apt-get >/dev/null || die "$* missing and no apt-get to install it; install it by hand"
	aptlog=$(mktemp "${TMPDIR:-/tmp}/converge-apt.XXXXXX")
	log "installing $* with apt-get (log: $aptlog)"
	# Keep the packages' init scripts from starting a default server on :2379.
	local policy=/usr/sbin/policy-rc.d made_policy=
	if [[ ! -e $policy ]]; then
		"${sudo[@]}" sh -c "printf '#!/bin/sh\nexit 101\n' >$policy && chmod +x $policy" && made_policy=1
	fi
	local rc=0
	{
		"${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get -q update &&
			"${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get -q -y \
				-o Dpkg::Options::=--force-confdef -o Dpkg::Options::=--force-confold \
				--no-install-recommends install "$@"
	} </dev/null >"$aptlog" 2>&1 || rc=$?
	[[ -n $made_policy ]] && "${sudo[@]}" rm -f "$policy"
	if ((rc != 0)); then
		tail -n 30 "$aptlog" >&2
		die "apt-get install $* failed (exit $rc)"
	fi
	rm -f "$aptlog"
}

# write_env NAME VALUE: append one shell-quoted assignment to the env file.
write_env() { printf "%s='%s'\n" "$1" "${2//\'/\'\\\'\'}" >>"$ENV_FILE"; }

# --- etcd --------------------------------------------------------------------

etcd_install() {
	if ! command -v etcd >/dev/null || ! command -v etcdctl >/dev/null; then
		apt_install etcd-server etcd-client
	fi
	command -v etcd >/dev/null || die "etcd is still not on PATH after installing etcd-server"
}

# etcd_members: print every etcd member directory.
etcd_members() {
	local d
	for d in "$STATE_DIR"/etcd/*/*/; do
		[[ -f ${d}cmd ]] && echo "${d%/}"
	done
	return 0
}

# etcd_prepare DIR NAME CLIENT_PORT PEER_PORT INITIAL_CLUSTER TOKEN: write a member's files.
etcd_prepare() {
	local dir=$1 name=$2 cport=$3 pport=$4 cluster=$5 token=$6
	mkdir -p "$dir/data"
	chmod 700 "$dir/data"
	echo "127.0.0.1:$cport" >"$dir/endpoint"
	local cmd=(
		"$(command -v etcd)" --name "$name" --data-dir "$dir/data"
		--listen-client-urls "http://127.0.0.1:$cport" --advertise-client-urls "http://127.0.0.1:$cport"
		--listen-peer-urls "http://127.0.0.1:$pport" --initial-advertise-peer-urls "http://127.0.0.1:$pport"
		--initial-cluster "$cluster" --initial-cluster-state new --initial-cluster-token "$token"
		# Bookmarks (progress notifications) every second, so tests see them.
		--experimental-watch-progress-notify-interval 1s
	)
	printf '%q ' "${cmd[@]}" >"$dir/cmd"
	echo >>"$dir/cmd"
	printf '#!/usr/bin/env bash\n# Start this etcd member from its data dir (no-op if it runs) and wait until healthy.\nexec %q etcd-member-start %q\n' \
		"$SELF" "$dir" >"$dir/start"
	chmod +x "$dir/start"
}

# etcd_spawn DIR: start the member in DIR unless it runs; do not wait.
etcd_spawn() {
	local dir=$1 pid args
	pid=$(cat "$dir/pid" 2>/dev/null || true)
	alive "$pid" && return 0
	eval "args=($(<"$dir/cmd"))"
	# Background the etcd command itself (not eval or a subshell), so that $!
	# is etcd's pid.
	"${args[@]}" >>"$dir/log" 2>&1 </dev/null &
	echo $! >"$dir/pid"
}

# etcd_wait DIR...: wait until every member answers GET /health, or fail.
etcd_wait() {
	local deadline=$((SECONDS + HEALTH_TIMEOUT)) dir pending
	while :; do
		pending=()
		for dir in "$@"; do
			if ! alive "$(cat "$dir/pid" 2>/dev/null)"; then
				tail -n 20 "$dir/log" >&2 || true
				die "etcd member $dir exited during start (its log above)"
			fi
			http_ok "http://$(<"$dir/endpoint")/health" || pending+=("$dir")
		done
		((${#pending[@]})) || return 0
		if ((SECONDS >= deadline)); then
			tail -n 20 "${pending[0]}/log" >&2 || true
			die "etcd not healthy after ${HEALTH_TIMEOUT}s: ${pending[*]}"
		fi
		sleep 0.05
	done
}

etcd_healthy() {
	local dir any=
	for dir in $(etcd_members); do
		any=1
		alive "$(cat "$dir/pid" 2>/dev/null)" || return 1
		http_ok "http://$(<"$dir/endpoint")/health" || return 1
	done
	[[ -n $any ]]
}

etcd_start() {
	etcd_install
	local token="converge-$$-$RANDOM"
	local single=$STATE_DIR/etcd/single cluster=$STATE_DIR/etcd/cluster

	local sc sp
	sc=$(free_port)
	sp=$(free_port)
	etcd_prepare "$single/s0" s0 "$sc" "$sp" "s0=http://127.0.0.1:$sp" "$token-single"

	local i cports=() pports=() initial=()
	for i in 0 1 2; do
		cports+=("$(free_port)")
		pports+=("$(free_port)")
		initial+=("c$i=http://127.0.0.1:${pports[i]}")
	done
	local joined endpoints=()
	joined=$(
		IFS=,
		echo "${initial[*]}"
	)
	for i in 0 1 2; do
		etcd_prepare "$cluster/c$i" "c$i" "${cports[i]}" "${pports[i]}" "$joined" "$token-cluster"
		endpoints+=("127.0.0.1:${cports[i]}")
	done

	local members=("$single/s0" "$cluster/c0" "$cluster/c1" "$cluster/c2") dir
	for dir in "${members[@]}"; do etcd_spawn "$dir"; done
	etcd_wait "${members[@]}"

	write_env CONVERGE_ETCD_ENDPOINTS "127.0.0.1:$sc"
	write_env CONVERGE_ETCD_STATE_DIR "$single"
	write_env CONVERGE_ETCD_CLUSTER_ENDPOINTS "$(
		IFS=,
		echo "${endpoints[*]}"
	)"
	write_env CONVERGE_ETCD_CLUSTER_STATE_DIR "$cluster"
}

etcd_stop() {
	local dir pids=()
	for dir in $(etcd_members); do
		pids+=("$(cat "$dir/pid" 2>/dev/null || true)")
	done
	((${#pids[@]})) && stop_pids "$STOP_TIMEOUT" "${pids[@]}"
	rm -rf "$STATE_DIR/etcd"
}

# --- PostgreSQL --------------------------------------------------------------
#
# One throwaway cluster. initdb, pg_ctl and postgres refuse to run as root, so
# as root they run as the postgres user (runuser), on a data dir in a temp
# directory that user owns (the state dir is mode 700, root's). The state dir's
# postgres/ directory holds
#
#   root       the temp directory (owned by the server's user): data/, sock/, log
#   port       the TCP port on 127.0.0.1
#   dsn        the connection string (user postgres, trust auth, database converge)
#   cmd        the exact pg_ctl command line (shell-quoted) that starts it from data/
#   pid        the postmaster's process id (written by start)
#   log        symlink to root/log (the server's log)
#   start      executable: start the server from data/ unless it runs, wait until
#              it accepts connections (tests run it after killing the server)

PG_BIN=

# postgres_bindir: set PG_BIN to the directory of the newest installed
# PostgreSQL's server binaries (Debian: /usr/lib/postgresql/MAJOR/bin), or fail.
postgres_bindir() {
	local d best=
	for d in /usr/lib/postgresql/*/bin; do
		[[ -x $d/initdb && -x $d/pg_ctl && -x $d/postgres ]] || continue
		if [[ -z $best ]] || [[ $(printf '%s\n%s\n' "$best" "$d" | sort -V | tail -n 1) == "$d" ]]; then best=$d; fi
	done
	if [[ -z $best ]] && command -v initdb >/dev/null && command -v pg_ctl >/dev/null; then
		best=$(dirname "$(command -v initdb)")
	fi
	[[ -n $best ]] || return 1
	PG_BIN=$best
}

# postgres_as CMD...: run CMD as the user the server runs as.
postgres_as() {
	if (($(id -u) == 0)); then
		runuser -u postgres -- "$@"
	else
		"$@"
	fi
}

postgres_install() {
	if ! postgres_bindir || ! command -v psql >/dev/null || ! command -v pg_isready >/dev/null; then
		apt_install postgresql postgresql-client
		# The package creates a default cluster (15/main on :5432); policy-rc.d
		# kept it from starting, but stop any that runs all the same.
		if command -v pg_lsclusters >/dev/null; then
			local ver name _port status
			while read -r ver name _port status _; do
				[[ $status == online* ]] || continue
				log "stopping the distro's PostgreSQL cluster $ver/$name"
				pg_ctlcluster "$ver" "$name" stop >&2 || true
			done < <(pg_lsclusters -h 2>/dev/null || true)
		fi
		postgres_bindir || die "no initdb under /usr/lib/postgresql/*/bin after installing postgresql"
	fi
	if (($(id -u) == 0)); then
		id postgres >/dev/null 2>&1 || die "no postgres user to run PostgreSQL as (initdb refuses root)"
	fi
}

# postgres_spawn DIR: start the server in DIR unless it runs; wait until it
# accepts connections (pg_ctl -w), record its pid.
postgres_spawn() {
	local dir=$1 pid args root deadline rc out
	pid=$(cat "$dir/pid" 2>/dev/null || true)
	alive "$pid" && return 0
	root=$(<"$dir/root")
	eval "args=($(<"$dir/cmd"))"
	deadline=$((SECONDS + HEALTH_TIMEOUT))
	# A killed postmaster leaves postmaster.pid behind, and a killed process
	# whose parent does not reap it stays a zombie that the postmaster's lock
	# check takes for a running server. Once no live process (a backend of the
	# dead postmaster) works in the data dir, the file is stale: remove it.
	local lock=$root/data/postmaster.pid
	if [[ -f $lock ]] && ! alive "$(head -n 1 "$lock")"; then
		while postgres_in_datadir "$root/data"; do
			((SECONDS < deadline)) || die "processes of a killed PostgreSQL still run in $root/data"
			sleep 0.05
		done
		rm -f "$lock" "$root"/sock/.s.PGSQL.*.lock
	fi
	while :; do
		rc=0
		out=$("${args[@]}" </dev/null 2>&1) || rc=$?
		((rc == 0)) && break
		if ((SECONDS >= deadline)); then
			printf '%s\n' "$out" >&2
			tail -n 20 "$root/log" >&2 || true
			die "PostgreSQL in $dir did not start (exit $rc; its log above)"
		fi
		sleep 0.1
	done
	head -n 1 "$lock" >"$dir/pid"
}

# postgres_in_datadir DIR: true if a live process has DIR as its working
# directory (every PostgreSQL server process does).
postgres_in_datadir() {
	local f
	for f in /proc/[0-9]*/cwd; do
		[[ $(readlink "$f" 2>/dev/null) == "$1" ]] && alive "$(basename "$(dirname "$f")")" && return 0
	done
	return 1
}

postgres_healthy() {
	local dir=$STATE_DIR/postgres
	[[ -f $dir/port ]] || return 1
	alive "$(cat "$dir/pid" 2>/dev/null)" || return 1
	pg_isready -q -t 2 -h 127.0.0.1 -p "$(<"$dir/port")" -d converge -U postgres >/dev/null 2>&1
}

postgres_start() {
	postgres_install
	local dir=$STATE_DIR/postgres port root base=${TMPDIR:-/tmp}
	# The postgres user must reach the temp dir: as root use /tmp, not a TMPDIR
	# that may sit in root's home.
	(($(id -u) == 0)) && base=/tmp
	mkdir -p "$dir"
	root=$(mktemp -d "$base/converge-pg.XXXXXX")
	echo "$root" >"$dir/root"
	mkdir -p "$root/sock"
	(($(id -u) == 0)) && chown -R postgres: "$root"
	chmod 700 "$root"
	ln -sfn "$root/log" "$dir/log"
	port=$(free_port)
	echo "$port" >"$dir/port"

	# Trust auth: a throwaway cluster listening on 127.0.0.1 only.
	postgres_as "$PG_BIN/initdb" -D "$root/data" -U postgres -A trust -E UTF8 --locale=C \
		--no-sync --no-instructions >"$dir/initdb.log" 2>&1 || {
		cat "$dir/initdb.log" >&2
		die "initdb failed"
	}
	local opts="-p $port -k $root/sock -c listen_addresses=127.0.0.1 -c fsync=off"
	opts+=" -c synchronous_commit=off -c full_page_writes=off -c max_connections=200"
	# A killed client's session (and its advisory locks) ends within 0.5 s.
	opts+=" -c client_connection_check_interval=500ms"
	local cmd=("$PG_BIN/pg_ctl" -D "$root/data" -l "$root/log" -s -w -t "$HEALTH_TIMEOUT" -o "$opts" start)
	(($(id -u) == 0)) && cmd=(runuser -u postgres -- "${cmd[@]}")
	printf '%q ' "${cmd[@]}" >"$dir/cmd"
	echo >>"$dir/cmd"
	printf '#!/usr/bin/env bash\n# Start this PostgreSQL server from its data dir (no-op if it runs) and wait until it accepts connections.\nexec %q postgres-start %q\n' \
		"$SELF" "$dir" >"$dir/start"
	chmod +x "$dir/start"

	postgres_spawn "$dir"
	psql -X -q -v ON_ERROR_STOP=1 -h 127.0.0.1 -p "$port" -U postgres -d postgres \
		-c 'CREATE DATABASE converge' >&2 || die "CREATE DATABASE converge failed"
	local dsn="postgres://postgres@127.0.0.1:$port/converge?sslmode=disable"
	echo "$dsn" >"$dir/dsn"
	write_env CONVERGE_POSTGRES_DSN "$dsn"
	write_env CONVERGE_POSTGRES_STATE_DIR "$dir"
}

# postgres_children PID: print the pids of PID's child processes.
postgres_children() {
	awk -v p="$1" 'FNR == 1 { sub(/.*\) /, ""); if ($2 == p) { split(FILENAME, a, "/"); print a[3] } }' \
		/proc/[0-9]*/stat 2>/dev/null || true
}

postgres_stop() {
	local dir=$STATE_DIR/postgres root pid
	[[ -d $dir ]] || return 0
	root=$(cat "$dir/root" 2>/dev/null || true)
	pid=$(cat "$dir/pid" 2>/dev/null || true)
	if [[ -n $root && -f $root/data/postmaster.pid ]]; then
		pid=$(head -n 1 "$root/data/postmaster.pid")
	fi
	if alive "$pid"; then
		local kids
		kids=$(postgres_children "$pid")
		if [[ -n $root ]] && postgres_bindir; then
			postgres_as "$PG_BIN/pg_ctl" -D "$root/data" -m fast -w -t "$STOP_TIMEOUT" stop >/dev/null 2>&1 || true
		fi
		# shellcheck disable=SC2086 # word-split the pid list
		stop_pids "$STOP_TIMEOUT" "$pid" $kids
	fi
	[[ -n $root && $root == */converge-pg.* ]] && rm -rf "$root"
	rm -rf "$dir"
}

# --- Chromium ----------------------------------------------------------------
#
# Not a server: the debug pages' browser test (internal/browsertest) runs Debian's
# chromium itself, headless, one process per page. This kind only installs it
# and names the binary in the env file.

# chromium_path: print the Chromium binary on PATH, or fail.
chromium_path() {
	local name
	for name in chromium chromium-browser; do
		command -v "$name" && return 0
	done
	return 1
}

chromium_start() {
	# --no-install-recommends leaves out the fonts the package only recommends;
	# the pages need one font to render text in the screenshots.
	chromium_path >/dev/null || apt_install chromium fonts-dejavu-core
	local bin
	bin=$(chromium_path) || die "chromium is still not on PATH after installing it"
	write_env CONVERGE_CHROMIUM "$bin"
}

chromium_healthy() { chromium_path >/dev/null; }

chromium_stop() { :; }

# --- sqlite3 -----------------------------------------------------------------
#
# Not a server: informer/sqlitestore's tests write a store's file with Debian's
# sqlite3 command line, as a person would. This kind only installs it and names
# the binary in the env file.

sqlite3_start() {
	command -v sqlite3 >/dev/null || apt_install sqlite3
	local bin
	bin=$(command -v sqlite3) || die "sqlite3 is still not on PATH after installing it"
	write_env CONVERGE_SQLITE3 "$bin"
}

sqlite3_healthy() { command -v sqlite3 >/dev/null; }

sqlite3_stop() { :; }

# --- Kubernetes --------------------------------------------------------------
#
# A real kube-apiserver (the kube module's integration tests) on loopback, on
# an etcd of its own: the tests of the other kinds kill, restart and compact
# the shared etcd, which must not take the API server down with it. The
# binary is built from the Go module in scripts/kube-apiserver (it requires
# k8s.io/kubernetes at KUBE_VERSION) once, into .bin/ with the version in its
# name, so that bumping the pin builds it again: about 15 minutes on two cores
# with a cold Go build cache, under half a minute with a warm one. The state
# dir's kube/ directory holds
#
#   etcd/        the etcd member (files as for the etcd kind)
#   port         the API server's HTTPS port on 127.0.0.1
#   token        the bearer token of user admin (group system:masters)
#   kubeconfig   a kubeconfig for it (the server's self-signed certificate as CA)
#   pid, log     the API server's process id and output
#
# Authorization is the default AlwaysAllow. Secrets are not watch-cached
# (--watch-cache-sizes=secrets#0): a watch of them is served by etcd, so a
# test can expire revisions by compacting etcd and see the 410 a real
# cluster gives once its cache's window has passed; every other resource is
# cached as on a real cluster.

# KUBE_VERSION must be the k8s.io/kubernetes version scripts/kube-apiserver/go.mod requires.
KUBE_VERSION=v1.37.2
REPO_DIR=$(cd "$(dirname "$SELF")/.." && pwd)
KUBE_APISERVER=${CONVERGE_KUBE_APISERVER:-$REPO_DIR/.bin/kube-apiserver-$KUBE_VERSION}
# The API server takes 3-4 s to become ready on an idle machine, much longer
# on a loaded one.
KUBE_HEALTH_TIMEOUT=${CONVERGE_SERVERS_KUBE_TIMEOUT:-180}

kube_install() {
	[[ -x $KUBE_APISERVER ]] && return 0
	command -v go >/dev/null || die "go is not on PATH: it builds $KUBE_APISERVER"
	local mod=$REPO_DIR/scripts/kube-apiserver
	grep -q "^require k8s.io/kubernetes $KUBE_VERSION\$" "$mod/go.mod" ||
		die "$mod/go.mod does not require k8s.io/kubernetes $KUBE_VERSION (KUBE_VERSION in $SELF)"
	local minor=${KUBE_VERSION#v1.}
	minor=${minor%%.*}
	local pkg x=() flags
	# The release's version stamps (hack/lib/version.sh), so that /version
	# and kubectl version name the real version.
	for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
		x+=("-X '$pkg.gitVersion=$KUBE_VERSION'" "-X '$pkg.gitMajor=1'" "-X '$pkg.gitMinor=$minor'" "-X '$pkg.gitTreeState=clean'")
	done
	flags=${x[*]}
	local t0=$SECONDS tmp=$KUBE_APISERVER.tmp.$$ blog
	blog=$(mktemp "${TMPDIR:-/tmp}/converge-kube-build.XXXXXX")
	log "building kube-apiserver $KUBE_VERSION into $KUBE_APISERVER (once; log: $blog)"
	mkdir -p "$(dirname "$KUBE_APISERVER")"
	if ! go -C "$mod" build -o "$tmp" -ldflags "$flags" k8s.io/kubernetes/cmd/kube-apiserver >"$blog" 2>&1; then
		rm -f "$tmp"
		tail -n 30 "$blog" >&2
		die "building kube-apiserver failed (log above)"
	fi
	mv "$tmp" "$KUBE_APISERVER"
	rm -f "$blog"
	log "built kube-apiserver $KUBE_VERSION in $((SECONDS - t0))s"
}

# kube_token: print a random bearer token.
kube_token() { od -An -N24 -tx1 /dev/urandom | tr -d ' \n'; }

# kube_get DIR PATH: print the API server's answer to GET PATH, failing on an HTTP error.
kube_get() {
	curl -fsS --max-time 2 --cacert "$1/certs/apiserver.crt" \
		-H "Authorization: Bearer $(<"$1/token")" "https://127.0.0.1:$(<"$1/port")$2" 2>/dev/null
}

kube_healthy() {
	local dir=$STATE_DIR/kube
	[[ -f $dir/port ]] || return 1
	alive "$(cat "$dir/pid" 2>/dev/null)" || return 1
	alive "$(cat "$dir/etcd/pid" 2>/dev/null)" || return 1
	[[ $(kube_get "$dir" /readyz) == ok ]]
}

kube_start() {
	kube_install
	command -v openssl >/dev/null || apt_install openssl
	command -v curl >/dev/null || apt_install curl
	etcd_install
	local dir=$STATE_DIR/kube ec ep port token
	mkdir -p "$dir"
	ec=$(free_port)
	ep=$(free_port)
	port=$(free_port)
	etcd_prepare "$dir/etcd" kube "$ec" "$ep" "kube=http://127.0.0.1:$ep" "converge-kube-$$-$RANDOM"
	etcd_spawn "$dir/etcd"
	etcd_wait "$dir/etcd"

	openssl genrsa -out "$dir/sa.key" 2048 2>/dev/null || die "openssl genrsa failed"
	token=$(kube_token)
	echo "$token" >"$dir/token"
	echo "$token,admin,admin-uid,system:masters" >"$dir/tokens.csv"
	chmod 600 "$dir/token" "$dir/tokens.csv" "$dir/sa.key"
	echo "$port" >"$dir/port"
	# --advertise-address=127.0.0.1 alone is refused (the endpoint
	# reconciler will not advertise a loopback address); with no reconciler
	# it is accepted, and the machine needs no other interface.
	# ServiceAccount admission is off because no controller creates the
	# default service account (as envtest does).
	local t0 cmd=(
		"$KUBE_APISERVER" --etcd-servers "http://127.0.0.1:$ec"
		--bind-address 127.0.0.1 --secure-port "$port" --cert-dir "$dir/certs"
		--advertise-address 127.0.0.1 --endpoint-reconciler-type none
		--token-auth-file "$dir/tokens.csv"
		--service-account-issuer "https://127.0.0.1:$port"
		--service-account-signing-key-file "$dir/sa.key" --service-account-key-file "$dir/sa.key"
		--disable-admission-plugins ServiceAccount
		--watch-cache-sizes 'secrets#0'
	)
	t0=$(date +%s%N)
	"${cmd[@]}" >>"$dir/log" 2>&1 </dev/null &
	echo $! >"$dir/pid"
	local deadline=$((SECONDS + KUBE_HEALTH_TIMEOUT))
	until [[ -f $dir/certs/apiserver.crt && $(kube_get "$dir" /readyz) == ok ]]; do
		if ! alive "$(<"$dir/pid")"; then
			tail -n 20 "$dir/log" >&2 || true
			die "kube-apiserver exited during start (its log above)"
		fi
		if ((SECONDS >= deadline)); then
			tail -n 20 "$dir/log" >&2 || true
			die "kube-apiserver not ready after ${KUBE_HEALTH_TIMEOUT}s (its log above)"
		fi
		sleep 0.1
	done
	log "kube-apiserver ready in $((($(date +%s%N) - t0) / 1000000)) ms on https://127.0.0.1:$port"

	cat >"$dir/kubeconfig" <<KUBECONFIG
apiVersion: v1
kind: Config
clusters:
- name: converge-test
  cluster:
    server: https://127.0.0.1:$port
    certificate-authority: $dir/certs/apiserver.crt
users:
- name: admin
  user:
    token: $token
contexts:
- name: converge-test
  context:
    cluster: converge-test
    user: admin
current-context: converge-test
KUBECONFIG
	chmod 600 "$dir/kubeconfig"
	write_env CONVERGE_KUBECONFIG "$dir/kubeconfig"
	write_env CONVERGE_KUBE_ETCD_ENDPOINTS "127.0.0.1:$ec"
	write_env CONVERGE_KUBE_STATE_DIR "$dir"
}

kube_stop() {
	local dir=$STATE_DIR/kube
	[[ -d $dir ]] || return 0
	stop_pids "$STOP_TIMEOUT" "$(cat "$dir/pid" 2>/dev/null || true)"
	stop_pids "$STOP_TIMEOUT" "$(cat "$dir/etcd/pid" 2>/dev/null || true)"
	rm -rf "$dir"
}

# --- commands ----------------------------------------------------------------

all_healthy() {
	[[ -s $ENV_FILE ]] || return 1
	local kind
	for kind in "${KINDS[@]}"; do "${kind}_healthy" || return 1; done
}

cmd_start() {
	local t0=$SECONDS
	if all_healthy; then
		log "servers already running (state: $STATE_DIR)"
		return 0
	fi
	cmd_stop
	mkdir -p "$STATE_DIR"
	chmod 700 "$STATE_DIR"
	: >"$ENV_FILE.tmp"
	ENV_FILE=$ENV_FILE.tmp
	local kind
	for kind in "${KINDS[@]}"; do
		[[ " ${ALL_KINDS[*]} " == *" $kind "* ]] || die "unknown server kind $kind in CONVERGE_SERVERS_KINDS"
		"${kind}_start"
	done
	mv "$ENV_FILE" "${ENV_FILE%.tmp}"
	ENV_FILE=${ENV_FILE%.tmp}
	log "servers up in $((SECONDS - t0))s (env: $ENV_FILE)"
}

cmd_stop() {
	local kind
	for kind in "${ALL_KINDS[@]}"; do "${kind}_stop"; done
	rm -f "$ENV_FILE" "$ENV_FILE.tmp"
	rmdir "$STATE_DIR" 2>/dev/null || true
}

cmd_env() {
	[[ -s $ENV_FILE ]] || die "no servers running (no $ENV_FILE); run: $0 start"
	sed 's/^/export /' "$ENV_FILE"
}

case ${1:-} in
start) cmd_start ;;
stop) cmd_stop >/dev/null ;;
env) cmd_env ;;
envfile)
	[[ -s $ENV_FILE ]] || die "no servers running (no $ENV_FILE); run: $0 start"
	echo "$ENV_FILE"
	;;
etcd-member-start)
	# Internal: the per-member start script (restart a member from its data dir).
	[[ -f ${2:-}/cmd ]] || die "etcd-member-start: ${2:-} is not an etcd member directory"
	etcd_spawn "$2"
	etcd_wait "$2"
	;;
postgres-start)
	# Internal: the start script in the postgres state dir (restart the server).
	[[ -f ${2:-}/cmd && -f ${2:-}/root ]] || die "postgres-start: ${2:-} is not a postgres state directory"
	postgres_bindir || true
	postgres_spawn "$2"
	;;
*)
	echo "usage: $0 start|stop|env|envfile" >&2
	exit 2
	;;
esac
