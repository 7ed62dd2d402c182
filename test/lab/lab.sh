#!/usr/bin/env bash
# The egress network lab: network namespaces joined by veth links, documentation addresses only, no way out.
#
#   root namespace (gateway, tests)  ccp-lab-root 198.51.100.2/28, 2001:db8:cc::2/64
#     | routes for 198.51.100.0/24, 203.0.113.0/26 and 2001:db8:cc::/48 only, all via the router
#   ccp-lab-rtr    router, forwarding on, no default route: nothing leaves the lab
#     |-- ccp-lab-inet   "fake internet" 203.0.113.10/24: egress probe (HTTP 80, HTTPS+DoH 443,
#     |                  DNS 53 udp+tcp), nftables counters per source address; stand-ins for public services
#     |                  (public-internet.ts): a resolver 203.0.113.53, an IP echo .54, a web site .30
#     `-- ccp-lab-exitN  exit nodes 198.51.100.(16N+5)/28: v2ray server inbounds for the six protocols
#
# Usage: lab.sh up | down | status | counters [reset] | close-connections | env
# `up` is idempotent: a healthy lab is left alone, anything less is torn down and built again. It writes the
# description for tests to $RUN_DIR/lab.json. `down` removes every namespace, link, process and file it made.
# Runs as root. Processes are stopped by the PIDs recorded at start (checked against their start time).
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
# shellcheck source-path=SCRIPTDIR source=../../scripts/lib.sh
source "$REPO/scripts/lib.sh"

RUN_DIR=${CCP_LAB_RUN_DIR:-/run/ccp-lab}
EXIT_COUNT=${CCP_LAB_EXITS:-2}
PREFIX=ccp-lab-
PACKAGES=(v2ray nftables iproute2 openssl util-linux)

NS_RTR=ccp-lab-rtr
NS_INET=ccp-lab-inet
ROOT_IF=ccp-lab-root
ROOT_ADDR=198.51.100.2
ROOT_GW=198.51.100.1
ROOT_ADDR6=2001:db8:cc::2
ROOT_GW6=2001:db8:cc::1
# Only the first quarter of 203.0.113.0/24: this machine reaches its package mirrors at 203.0.113.80.
ROOT_ROUTES=(198.51.100.0/24 203.0.113.0/26)
ROOT_ROUTE6=2001:db8:cc::/48
INET_ADDR=203.0.113.10
INET_ADDR6=2001:db8:cc:ff::10
ZONE=probe.test
EXIT_DOMAIN=exits.ccp-lab.test
# Stand-ins for public services (public-internet.ts), on the fake internet's link beside the probe.
PUBLIC_ZONE=public.test
RESOLVER_ADDR=203.0.113.53
CHECKIP_ADDR=203.0.113.54
WEB_ADDR=203.0.113.30
WHOAMI_NAME=whoami.cloudflare

# name protocol port tls transport: one v2ray inbound per line, on every exit node.
VARIANTS='socks socks 1080 no tcp
socks-auth socks 1081 no tcp
http-auth http 3128 no tcp
http-auth-tls http 3129 yes tcp
ss-aes-128-gcm shadowsocks 8388 no tcp
ss-aes-256-gcm shadowsocks 8389 no tcp
ss-chacha20-ietf-poly1305 shadowsocks 8390 no tcp
vmess-tcp vmess 10086 no tcp
vmess-tls vmess 10087 yes tcp
vmess-ws vmess 10088 no ws
vmess-ws-tls vmess 10089 yes ws
vless-tcp vless 10090 no tcp
vless-tls vless 10091 yes tcp
vless-ws-tls vless 10092 yes ws
trojan-tls trojan 10093 yes tcp'

exit_ns() { printf 'ccp-lab-exit%s' "$1"; }
exit_addr() { printf '198.51.100.%s' "$((16 * $1 + 5))"; }
exit_gw() { printf '198.51.100.%s' "$((16 * $1 + 1))"; }
exit_addr6() { printf '2001:db8:cc:%s::5' "$1"; }
exit_gw6() { printf '2001:db8:cc:%s::1' "$1"; }
exit_name() { printf 'exit%s.%s' "$1" "$EXIT_DOMAIN"; }

in_ns() { ip netns exec "$@"; }

# ---------------------------------------------------------------- processes

# proc_start_time PID: the 22nd field of /proc/PID/stat (read past the command name, which may hold spaces),
# or failure when there is no such process or only its zombie, which PID 1 here may take a while to reap.
proc_start_time() {
  local stat fields
  stat=$(cat "/proc/$1/stat" 2>/dev/null) || return 1
  read -ra fields <<<"${stat##*) }"
  [ "${fields[0]}" != Z ] || return 1
  printf '%s' "${fields[19]}"
}

# start_daemon NAME NAMESPACE COMMAND...: runs COMMAND in NAMESPACE in its own session (so a test runner's
# process group signals do not reach it). setsid, env and `ip netns exec` all exec, so $! is COMMAND's PID.
# fd 9 is the lab lock: a daemon must not inherit it, or it would hold the lock for as long as it runs.
start_daemon() {
  local name=$1 ns=$2
  shift 2
  setsid ip netns exec "$ns" "$@" </dev/null >"$RUN_DIR/log/$name.log" 2>&1 9<&- &
  local pid=$!
  printf '%s %s\n' "$pid" "$(proc_start_time "$pid")" >"$RUN_DIR/pids/$name"
}

daemon_alive() {
  local file="$RUN_DIR/pids/$1" pid start
  [ -f "$file" ] || return 1
  read -r pid start <"$file"
  [ -n "$start" ] && [ "$(proc_start_time "$pid" || true)" = "$start" ]
}

stop_daemon() {
  local file="$RUN_DIR/pids/$1" pid i
  if daemon_alive "$1"; then
    read -r pid _ <"$file"
    kill -TERM "$pid" 2>/dev/null || true
    for ((i = 0; i < 50; i++)); do
      daemon_alive "$1" || break
      sleep 0.1
    done
    if daemon_alive "$1"; then kill -KILL "$pid" 2>/dev/null || true; fi
  fi
  rm -f "$file"
}

# wait_port NAME NAMESPACE ADDRESS PORT: until something accepts TCP there, failing early if the daemon died.
wait_port() {
  local name=$1 ns=$2 addr=$3 port=$4 i
  for ((i = 0; i < 100; i++)); do
    # shellcheck disable=SC2016 # expanded by the inner shell
    if in_ns "$ns" bash -c 'exec 3<>"/dev/tcp/$0/$1"' "$addr" "$port" 2>/dev/null; then return 0; fi
    daemon_alive "$name" || break
    sleep 0.1
  done
  cat "$RUN_DIR/log/$name.log" >&2 || true
  die "$name is not accepting connections on $addr:$port"
}

# ---------------------------------------------------------------- network

link_pair() { # NAMESPACE ROUTER_IF ADDR/LEN GATEWAY ROUTER_ADDR/LEN ADDR6 GATEWAY6
  local ns=$1 rif=$2 addr=$3 gw=$4 raddr=$5 addr6=$6 gw6=$7
  ip netns add "$ns"
  in_ns "$ns" ip link set lo up
  ip link add "$rif" netns "$NS_RTR" type veth peer name ccp-lab-up netns "$ns"
  ip -n "$NS_RTR" addr add "$raddr" dev "$rif"
  ip -n "$NS_RTR" addr add "$gw6/64" dev "$rif" nodad
  ip -n "$NS_RTR" link set "$rif" up
  ip -n "$ns" addr add "$addr" dev ccp-lab-up
  ip -n "$ns" addr add "$addr6/64" dev ccp-lab-up nodad
  ip -n "$ns" link set ccp-lab-up up
  ip -n "$ns" route add default via "$gw"
  ip -n "$ns" -6 route add default via "$gw6"
  # Daemons started by `ip netns exec` see this file as /etc/resolv.conf: names resolve inside the lab only, through
  # the stand-in public resolver (which asks the probe for the probe's zone).
  mkdir -p "/etc/netns/$ns"
  printf 'nameserver %s\n' "$RESOLVER_ADDR" >"/etc/netns/$ns/resolv.conf"
}

build_network() {
  ip netns add "$NS_RTR"
  in_ns "$NS_RTR" ip link set lo up
  in_ns "$NS_RTR" sysctl -qw net.ipv4.ip_forward=1 net.ipv6.conf.all.forwarding=1
  mkdir -p "/etc/netns/$NS_RTR"
  printf 'nameserver %s\n' "$RESOLVER_ADDR" >"/etc/netns/$NS_RTR/resolv.conf"

  ip link add "$ROOT_IF" type veth peer name ccp-lab-r0 netns "$NS_RTR"
  ip -n "$NS_RTR" addr add "$ROOT_GW/28" dev ccp-lab-r0
  ip -n "$NS_RTR" addr add "$ROOT_GW6/64" dev ccp-lab-r0 nodad
  ip -n "$NS_RTR" link set ccp-lab-r0 up
  ip addr add "$ROOT_ADDR/28" dev "$ROOT_IF"
  ip addr add "$ROOT_ADDR6/64" dev "$ROOT_IF" nodad
  ip link set "$ROOT_IF" up
  local route
  for route in "${ROOT_ROUTES[@]}"; do ip route add "$route" via "$ROOT_GW" dev "$ROOT_IF"; done
  ip -6 route add "$ROOT_ROUTE6" via "$ROOT_GW6" dev "$ROOT_IF"

  link_pair "$NS_INET" ccp-lab-rinet "$INET_ADDR/24" 203.0.113.1 203.0.113.1/24 \
    "$INET_ADDR6" 2001:db8:cc:ff::1
  local address
  for address in "$RESOLVER_ADDR" "$CHECKIP_ADDR" "$WEB_ADDR"; do
    ip -n "$NS_INET" addr add "$address/24" dev ccp-lab-up
  done
  local n
  for ((n = 1; n <= EXIT_COUNT; n++)); do
    link_pair "$(exit_ns "$n")" "ccp-lab-rexit$n" "$(exit_addr "$n")/28" "$(exit_gw "$n")" \
      "$(exit_gw "$n")/28" "$(exit_addr6 "$n")" "$(exit_gw6 "$n")"
  done

  # Every packet that reaches the fake internet is counted per source address, so leak tests can show that
  # nothing but the exit address got there. Link-local and unspecified IPv6 sources are neighbour discovery
  # and multicast listener reports, not traffic.
  in_ns "$NS_INET" nft -f - <<'EOF'
table inet ccp_lab {
  set sources4 { type ipv4_addr; flags dynamic; counter; size 65536; }
  set sources6 { type ipv6_addr; flags dynamic; counter; size 65536; }
  chain count {
    type filter hook prerouting priority -300; policy accept;
    iifname "lo" return
    update @sources4 { ip saddr }
    ip6 saddr != { ::, fe80::/10 } update @sources6 { ip6 saddr }
  }
}
EOF
}

# ---------------------------------------------------------------- certificates and credentials

make_certificates() {
  local dir="$RUN_DIR/pki" n
  mkdir -p "$dir"
  openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 30 -subj '/CN=ccp-lab CA' \
    -keyout "$dir/ca.key" -out "$dir/ca.pem" 2>/dev/null
  leaf "$dir" probe "DNS:$ZONE,DNS:*.$ZONE,IP:$INET_ADDR,IP:$INET_ADDR6"
  leaf "$dir" public "DNS:checkip.$PUBLIC_ZONE,DNS:www.$PUBLIC_ZONE,IP:$RESOLVER_ADDR,IP:$CHECKIP_ADDR,IP:$WEB_ADDR"
  for ((n = 1; n <= EXIT_COUNT; n++)); do
    leaf "$dir" "exit$n" "DNS:$(exit_name "$n"),IP:$(exit_addr "$n")"
  done
}

leaf() { # DIR NAME SUBJECT_ALT_NAMES
  local dir=$1 name=$2 san=$3
  openssl req -new -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj "/CN=$name.ccp-lab" \
    -keyout "$dir/$name.key" -out "$dir/$name.csr" 2>/dev/null
  printf 'subjectAltName=%s\nextendedKeyUsage=serverAuth\nbasicConstraints=CA:FALSE\n' "$san" \
    >"$dir/$name.ext"
  openssl x509 -req -in "$dir/$name.csr" -CA "$dir/ca.pem" -CAkey "$dir/ca.key" \
    -set_serial "0x$(openssl rand -hex 8)" -days 30 -extfile "$dir/$name.ext" -out "$dir/$name.pem" \
    2>/dev/null
  rm -f "$dir/$name.csr" "$dir/$name.ext"
}

make_credentials() {
  local uuid_vmess uuid_vless
  uuid_vmess=$(cat /proc/sys/kernel/random/uuid)
  uuid_vless=$(cat /proc/sys/kernel/random/uuid)
  cat >"$RUN_DIR/credentials.sh" <<EOF
SOCKS_USER=lab-socks
SOCKS_PASS=$(openssl rand -hex 12)
HTTP_USER=lab-http
HTTP_PASS=$(openssl rand -hex 12)
SS_PASS=$(openssl rand -hex 16)
VMESS_UUID=$uuid_vmess
VLESS_UUID=$uuid_vless
TROJAN_PASS=$(openssl rand -hex 16)
LOG_TOKEN=$(openssl rand -hex 16)
PUBLIC_LOG_TOKEN=$(openssl rand -hex 16)
EOF
  chmod 600 "$RUN_DIR/credentials.sh"
}

# ---------------------------------------------------------------- v2ray server and proxy descriptions

ss_method() { # the v2ray 4.34 name of a variant's AEAD method, and the sing-box one
  case $1 in
    ss-aes-128-gcm) printf 'aes-128-gcm aes-128-gcm' ;;
    ss-aes-256-gcm) printf 'aes-256-gcm aes-256-gcm' ;;
    ss-chacha20-ietf-poly1305) printf 'chacha20-poly1305 chacha20-ietf-poly1305' ;;
  esac
}

# v2ray_inbound N NAME PROTOCOL PORT TLS TRANSPORT
v2ray_inbound() {
  local n=$1 name=$2 protocol=$3 port=$4 tls=$5 transport=$6 settings stream methods
  case $name in
    socks) settings='{"auth":"noauth","udp":true,"ip":"'"$(exit_addr "$n")"'"}' ;;
    socks-auth)
      settings='{"auth":"password","accounts":[{"user":"'"$SOCKS_USER"'","pass":"'"$SOCKS_PASS"'"}],'
      settings+='"udp":true,"ip":"'"$(exit_addr "$n")"'"}'
      ;;
    http-*) settings='{"accounts":[{"user":"'"$HTTP_USER"'","pass":"'"$HTTP_PASS"'"}]}' ;;
    ss-*)
      read -r methods _ <<<"$(ss_method "$name")"
      settings='{"method":"'"$methods"'","password":"'"$SS_PASS"'","network":"tcp,udp"}'
      ;;
    vmess-*) settings='{"clients":[{"id":"'"$VMESS_UUID"'","alterId":0}]}' ;;
    vless-*) settings='{"clients":[{"id":"'"$VLESS_UUID"'"}],"decryption":"none"}' ;;
    trojan-*) settings='{"clients":[{"password":"'"$TROJAN_PASS"'"}]}' ;;
  esac
  stream='"network":"'"$transport"'"'
  [ "$transport" = ws ] && stream+=',"wsSettings":{"path":"/'"$protocol"'"}'
  if [ "$tls" = yes ]; then
    stream+=',"security":"tls","tlsSettings":{'
    # v2ray offers h2 first by default, and its HTTP client then tunnels with HTTP/2 CONNECT, which its own
    # HTTP inbound does not speak; HTTPS proxies in the wild mostly speak HTTP/1.1 only, as here.
    [ "$protocol" = http ] && stream+='"alpn":["http/1.1"],'
    stream+='"certificates":[{"certificateFile":"'"$RUN_DIR/pki/exit$n.pem"'",'
    stream+='"keyFile":"'"$RUN_DIR/pki/exit$n.key"'"}]}'
  fi
  printf '{"tag":"%s","listen":"%s","port":%s,"protocol":"%s","settings":%s,"streamSettings":{%s}}' \
    "$name" "$(exit_addr "$n")" "$port" "$protocol" "$settings" "$stream"
}

# proxy_config N NAME PROTOCOL PORT TLS TRANSPORT: the sing-box outbound a client (and the API) would use.
proxy_config() {
  local n=$1 name=$2 protocol=$3 port=$4 tls=$5 transport=$6 json methods
  json='"type":"'"$protocol"'","server":"'"$(exit_addr "$n")"'","server_port":'"$port"
  case $name in
    socks) json+=',"version":"5"' ;;
    socks-auth) json+=',"version":"5","username":"'"$SOCKS_USER"'","password":"'"$SOCKS_PASS"'"' ;;
    http-*) json+=',"username":"'"$HTTP_USER"'","password":"'"$HTTP_PASS"'"' ;;
    ss-*)
      read -r _ methods <<<"$(ss_method "$name")"
      json+=',"method":"'"$methods"'","password":"'"$SS_PASS"'"'
      ;;
    vmess-*) json+=',"uuid":"'"$VMESS_UUID"'","security":"auto","alter_id":0' ;;
    vless-*) json+=',"uuid":"'"$VLESS_UUID"'"' ;;
    trojan-*) json+=',"password":"'"$TROJAN_PASS"'"' ;;
  esac
  [ "$tls" = yes ] && json+=',"tls":{"enabled":true,"server_name":"'"$(exit_name "$n")"'"}'
  [ "$transport" = ws ] && json+=',"transport":{"type":"ws","path":"/'"$protocol"'"}'
  printf '{%s}' "$json"
}

write_exit_config() { # N
  local n=$1 inbounds='' name protocol port tls transport verdict
  while read -r name protocol port tls transport; do
    inbounds+="${inbounds:+,}$(v2ray_inbound "$n" "$name" "$protocol" "$port" "$tls" "$transport")"
  done <<<"$VARIANTS"
  printf '{"log":{"loglevel":"warning"},"inbounds":[%s],"outbounds":[{"protocol":"freedom"}]}\n' \
    "$inbounds" >"$RUN_DIR/exit$n.json"
  verdict=$(v2ray -test -config "$RUN_DIR/exit$n.json" 2>&1) ||
    die "v2ray rejected $RUN_DIR/exit$n.json: $verdict"
}

exit_description() { # N
  local n=$1 variants='' name protocol port tls transport extra
  while read -r name protocol port tls transport; do
    extra=''
    [ "$transport" = ws ] && extra=',"wsPath":"/'"$protocol"'"'
    extra+=',"proxyConfig":'"$(proxy_config "$n" "$name" "$protocol" "$port" "$tls" "$transport")"
    [ "$tls" = yes ] && tls=true || tls=false
    variants+="${variants:+,}"$'\n      '
    variants+="$(printf '"%s":{"protocol":"%s","port":%s,"tls":%s,"transport":"%s"%s}' \
      "$name" "$protocol" "$port" "$tls" "$transport" "$extra")"
  done <<<"$VARIANTS"
  printf '{"name":"exit%s","namespace":"%s","address":"%s","address6":"%s",' \
    "$n" "$(exit_ns "$n")" "$(exit_addr "$n")" "$(exit_addr6 "$n")"
  printf '"tlsServerName":"%s","variants":{%s}}' "$(exit_name "$n")" "$variants"
}

write_description() {
  local exits='' n
  for ((n = 1; n <= EXIT_COUNT; n++)); do exits+="${exits:+,}$(exit_description "$n")"; done
  cat >"$RUN_DIR/lab.json.tmp" <<EOF
{
  "version": 1,
  "runDir": "$RUN_DIR",
  "caCert": "$RUN_DIR/pki/ca.pem",
  "root": {
    "link": "$ROOT_IF", "address": "$ROOT_ADDR", "address6": "$ROOT_ADDR6",
    "gateway": "$ROOT_GW", "gateway6": "$ROOT_GW6",
    "routes": ["${ROOT_ROUTES[0]}", "${ROOT_ROUTES[1]}", "$ROOT_ROUTE6"]
  },
  "router": { "namespace": "$NS_RTR" },
  "internet": {
    "namespace": "$NS_INET", "address": "$INET_ADDR", "address6": "$INET_ADDR6",
    "httpUrl": "http://$INET_ADDR", "httpsUrl": "https://$INET_ADDR",
    "dohUrl": "https://$INET_ADDR/dns-query",
    "dns": { "address": "$INET_ADDR", "port": 53 },
    "zone": "$ZONE", "answerAddress": "$INET_ADDR", "dnsLogToken": "$LOG_TOKEN", "tlsServerName": "$ZONE"
  },
  "public": {
    "zone": "$PUBLIC_ZONE",
    "resolver": {
      "address": "$RESOLVER_ADDR", "dns": { "address": "$RESOLVER_ADDR", "port": 53 },
      "dohUrl": "https://$RESOLVER_ADDR/dns-query", "traceUrl": "https://$RESOLVER_ADDR/cdn-cgi/trace",
      "whoamiName": "$WHOAMI_NAME", "logUrl": "http://$RESOLVER_ADDR/query-log", "logToken": "$PUBLIC_LOG_TOKEN"
    },
    "checkip": { "address": "$CHECKIP_ADDR", "name": "checkip.$PUBLIC_ZONE", "url": "https://checkip.$PUBLIC_ZONE/" },
    "web": {
      "name": "www.$PUBLIC_ZONE", "address": "$WEB_ADDR",
      "httpUrl": "http://www.$PUBLIC_ZONE", "httpsUrl": "https://www.$PUBLIC_ZONE"
    }
  },
  "exitAddress": "$(exit_addr 1)",
  "credentials": {
    "socks": { "username": "$SOCKS_USER", "password": "$SOCKS_PASS" },
    "http": { "username": "$HTTP_USER", "password": "$HTTP_PASS" },
    "shadowsocks": { "password": "$SS_PASS" },
    "vmess": { "uuid": "$VMESS_UUID" },
    "vless": { "uuid": "$VLESS_UUID" },
    "trojan": { "password": "$TROJAN_PASS" }
  },
  "exits": [$exits]
}
EOF
  mv "$RUN_DIR/lab.json.tmp" "$RUN_DIR/lab.json"
}

# ---------------------------------------------------------------- commands

daemons() {
  local n
  printf 'probe\nprobe6\npublic\n'
  for ((n = 1; n <= EXIT_COUNT; n++)); do printf 'exit%s\n' "$n"; done
}

healthy() {
  local ns name n
  [ -f "$RUN_DIR/lab.json" ] || return 1
  ip link show "$ROOT_IF" >/dev/null 2>&1 || return 1
  for ns in "$NS_RTR" "$NS_INET" $(for ((n = 1; n <= EXIT_COUNT; n++)); do exit_ns "$n"; echo; done); do
    [ -e "/run/netns/$ns" ] || return 1
  done
  for name in $(daemons); do daemon_alive "$name" || return 1; done
}

lab_namespaces() { ip netns list | awk -v p="$PREFIX" 'index($1, p) == 1 { print $1 }'; }
lab_links() {
  ip -o link show | awk -F': ' -v p="$PREFIX" '{ sub(/@.*/, "", $2) } index($2, p) == 1 { print $2 }'
}

teardown() {
  local name ns link pid
  if [ -d "$RUN_DIR/pids" ]; then
    for name in "$RUN_DIR"/pids/*; do [ -e "$name" ] && stop_daemon "$(basename "$name")"; done
  fi
  for ns in $(lab_namespaces); do
    # A process left inside a lab namespace (a test's leftover, or a daemon whose record was lost) would keep
    # the namespace alive once unnamed, so stop what is in there; these PIDs come from the namespace itself.
    for pid in $(ip netns pids "$ns" 2>/dev/null); do
      warn "stopping process $pid left in $ns"
      kill -KILL "$pid" 2>/dev/null || true
    done
    ip netns del "$ns"
    rm -rf "/etc/netns/$ns"
  done
  for link in $(lab_links); do ip link del "$link" 2>/dev/null || true; done
  rm -rf "$RUN_DIR"
}

cmd_up() {
  apt_install "${PACKAGES[@]}"
  if healthy; then
    say "lab is up ($RUN_DIR/lab.json)"
    return 0
  fi
  teardown
  say "building the lab"
  mkdir -p "$RUN_DIR/pids" "$RUN_DIR/log"
  chmod 700 "$RUN_DIR"
  build_network
  make_credentials
  # shellcheck source=/dev/null
  source "$RUN_DIR/credentials.sh"
  make_certificates

  # The probe listens on its own addresses, not the wildcard, since the public stand-ins share its namespace:
  # one process for IPv4 and one for IPv6 (the probe takes one address per listener).
  local probe_addr probe_name
  for probe_addr in "$INET_ADDR" "[$INET_ADDR6]"; do
    probe_name=probe
    [ "$probe_addr" = "$INET_ADDR" ] || probe_name=probe6
    (
      cd "$REPO"
      start_daemon "$probe_name" "$NS_INET" env PROBE_LOG_TOKEN="$LOG_TOKEN" node --enable-source-maps --import tsx \
        apps/egress-probe/src/main.ts --http "$probe_addr:80" --https "$probe_addr:443" --dns "$probe_addr:53" \
        --zone "$ZONE" --answer "$INET_ADDR" \
        --tls-cert "$RUN_DIR/pki/probe.pem" --tls-key "$RUN_DIR/pki/probe.key"
    )
  done
  (
    cd "$REPO"
    start_daemon public "$NS_INET" node --enable-source-maps --import tsx test/lab/public-internet.ts \
      "$(printf '{"resolver":"%s","checkip":"%s","web":"%s","zone":"%s","probeZone":"%s",' \
        "$RESOLVER_ADDR" "$CHECKIP_ADDR" "$WEB_ADDR" "$PUBLIC_ZONE" "$ZONE")$(printf \
        '"probeDns":{"address":"%s","port":53},"whoamiName":"%s","cert":"%s","key":"%s","logToken":"%s"}' \
        "$INET_ADDR" "$WHOAMI_NAME" "$RUN_DIR/pki/public.pem" "$RUN_DIR/pki/public.key" "$PUBLIC_LOG_TOKEN")"
  )
  local n name port
  for ((n = 1; n <= EXIT_COUNT; n++)); do
    write_exit_config "$n"
    start_daemon "exit$n" "$(exit_ns "$n")" v2ray -config "$RUN_DIR/exit$n.json"
  done
  wait_port probe "$NS_INET" "$INET_ADDR" 80
  wait_port probe "$NS_INET" "$INET_ADDR" 443
  wait_port probe "$NS_INET" "$INET_ADDR" 53
  wait_port probe6 "$NS_INET" "$INET_ADDR6" 80
  wait_port public "$NS_INET" "$RESOLVER_ADDR" 53
  wait_port public "$NS_INET" "$RESOLVER_ADDR" 443
  wait_port public "$NS_INET" "$CHECKIP_ADDR" 443
  wait_port public "$NS_INET" "$WEB_ADDR" 80
  for ((n = 1; n <= EXIT_COUNT; n++)); do
    while read -r name _ port _; do
      wait_port "exit$n" "$(exit_ns "$n")" "$(exit_addr "$n")" "$port"
    done <<<"$VARIANTS"
  done
  write_description
  say "lab is up ($RUN_DIR/lab.json)"
}

cmd_status() {
  local ns name state=0
  printf 'namespaces:'
  for ns in $(lab_namespaces); do printf ' %s' "$ns"; done
  printf '\nroot links:'
  for name in $(lab_links); do printf ' %s' "$name"; done
  printf '\n'
  if [ -d "$RUN_DIR/pids" ]; then
    for name in $(daemons); do
      if daemon_alive "$name"; then
        printf '%s: running (pid %s)\n' "$name" "$(cut -d' ' -f1 "$RUN_DIR/pids/$name")"
      else
        printf '%s: not running\n' "$name"
      fi
    done
  fi
  healthy || state=1
  if [ "$state" -eq 0 ]; then printf 'lab: up (%s)\n' "$RUN_DIR/lab.json"
  elif [ -z "$(lab_namespaces)$(lab_links)" ]; then printf 'lab: down\n'
  else printf 'lab: partial (run "lab.sh up" to rebuild or "lab.sh down" to remove)\n'; fi
  return "$state"
}

# env: the gateway settings that point its public verification defaults at the lab's stand-ins (KEY=VALUE lines,
# as .env takes them; deploy/setup.sh --demo writes them).
cmd_env() {
  [ -f "$RUN_DIR/lab.json" ] || die "the lab is down (lab.sh up)"
  # shellcheck disable=SC2016 # the single-quoted text is JavaScript, read by node
  node -e '
    const lab = JSON.parse(require("node:fs").readFileSync(process.argv[1], "utf8"));
    if (!lab.public) { console.error("this lab has no public stand-ins: run lab.sh up again"); process.exit(1); }
    const { resolver, checkip } = lab.public;
    const lines = {
      EGRESS_DOH_URL: resolver.dohUrl,
      EGRESS_DNS_SERVER: `${resolver.dns.address}:${resolver.dns.port}`,
      EGRESS_DNS_WHOAMI: resolver.whoamiName,
      EGRESS_EXIT_IP_URLS: `${resolver.traceUrl},${checkip.url}`,
      EGRESS_TLS_CA_FILE: lab.caCert,
    };
    for (const [name, value] of Object.entries(lines)) console.log(`${name}=${value}`);
  ' "$RUN_DIR/lab.json"
}

# counters: nft's JSON listing of the per-source packet counters in the fake internet; `counters reset` zeroes
# them.
cmd_counters() {
  [ -e "/run/netns/$NS_INET" ] || die "the lab is down"
  if [ "${1:-}" = reset ]; then
    in_ns "$NS_INET" nft flush set inet ccp_lab sources4
    in_ns "$NS_INET" nft flush set inet ccp_lab sources6
  else
    in_ns "$NS_INET" nft -j list table inet ccp_lab
  fi
}

# close-connections: resets every TCP connection the fake internet still holds. A workspace removed mid-connection
# leaves its exit's side open (no FIN ever comes from a namespace that is gone), and that side's keepalives would
# show in the next test's counters.
cmd_close_connections() {
  [ -e "/run/netns/$NS_INET" ] || die "the lab is down"
  in_ns "$NS_INET" ss -K -tn state established >/dev/null
}

main() {
  [ "$(id -u)" -eq 0 ] || die "lab.sh needs root (network namespaces)"
  # One lab per machine: parallel test processes serialise on a lock held on this script itself.
  exec 9<"${BASH_SOURCE[0]}"
  flock 9
  case ${1:-} in
    up) cmd_up ;;
    down)
      teardown
      say "lab is down"
      ;;
    status) cmd_status ;;
    counters) cmd_counters "${2:-}" ;;
    close-connections) cmd_close_connections ;;
    env) cmd_env ;;
    *) die "usage: lab.sh up | down | status | counters [reset] | close-connections | env" ;;
  esac
}

main "$@"
