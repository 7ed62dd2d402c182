# Escape attempts run inside a workspace by leak-suite.test.ts, as `perl -e <this> <json>`: the test image has
# perl (core modules only) but no python, ping, nft, iptables or netcat. The argument is a JSON array of
# attempts; each runs in its own child, in parallel, and prints one JSON line
# {"id", "ok", "error"?, "reply"?, "detail"?}. "ok" means the attempt got what it tried for (a connection, an
# answer, a socket, a rule); whether that is allowed is for the test to judge. Every wait is bounded by
# "timeoutMs" so a silently dropped packet reads as a timeout.
use strict;
use warnings;
use JSON::PP;
use Socket qw(:all);
use IO::Select;
use Time::HiRes qw(time);

use constant { SO_MARK => 36, AF_NETLINK_ => 16, AF_PACKET_ => 17, NETLINK_NETFILTER => 12 };

my $attempts = decode_json($ARGV[0]);
$| = 1;

# Errno names (ECONNREFUSED…) rather than localised messages, so the test can match them.
sub fail {
  my ($what) = @_;
  my ($name) = grep { $!{$_} } keys %!;
  return { ok => JSON::PP::false, error => ($name // 'errno ' . ($! + 0)) . " ($what)" };
}

sub address {
  my ($host, $port) = @_;
  if ($host =~ /:/) {
    return (AF_INET6, pack_sockaddr_in6($port, inet_pton(AF_INET6, $host)));
  }
  return (AF_INET, pack_sockaddr_in($port, inet_aton($host)));
}

sub wait_readable {
  my ($socket, $ms) = @_;
  return scalar IO::Select->new($socket)->can_read($ms / 1000);
}

# Non-blocking connect with a deadline, so a dropped SYN is a timeout and a RST is ECONNREFUSED.
sub connect_tcp {
  my ($host, $port, $ms) = @_;
  my ($family, $peer) = address($host, $port);
  socket(my $s, $family, SOCK_STREAM, IPPROTO_TCP) or return (undef, fail('socket'));
  return connect_socket($s, $peer, $ms);
}

sub connect_socket {
  my ($s, $peer, $ms) = @_;
  require Fcntl;
  my $flags = fcntl($s, Fcntl::F_GETFL(), 0);
  fcntl($s, Fcntl::F_SETFL(), $flags | Fcntl::O_NONBLOCK());
  unless (connect($s, $peer)) {
    return (undef, fail('connect')) unless $!{EINPROGRESS};
    my $ready = IO::Select->new($s)->can_write($ms / 1000);
    return (undef, { ok => JSON::PP::false, error => 'ETIMEDOUT (connect)' }) unless $ready;
    my $error = unpack('i', getsockopt($s, SOL_SOCKET, SO_ERROR));
    if ($error) {
      $! = $error;
      return (undef, fail('connect'));
    }
  }
  fcntl($s, Fcntl::F_SETFL(), $flags);
  return ($s, undef);
}

sub read_all {
  my ($s, $ms, $limit) = @_;
  my ($data, $deadline) = ('', time + $ms / 1000);
  while (length($data) < $limit) {
    my $left = $deadline - time;
    last if $left <= 0 || !wait_readable($s, $left * 1000);
    my $n = sysread($s, my $chunk, 65536);
    last unless $n;
    $data .= $chunk;
  }
  return $data;
}

# HTTP GET of the IP echo; "reply" is the body, the address the server saw.
sub http_get {
  my ($a) = @_;
  my ($s, $error) = connect_tcp($a->{host}, $a->{port}, $a->{timeoutMs});
  return $error if $error;
  syswrite($s, "GET $a->{path} HTTP/1.1\r\nHost: $a->{host}\r\nConnection: close\r\n\r\n");
  my $response = read_all($s, $a->{timeoutMs}, 65536);
  return { ok => JSON::PP::false, error => 'no HTTP response' } unless $response =~ m{^HTTP/1\.[01] (\d+)};
  my $status = $1;
  my (undef, $body) = split(/\r\n\r\n/, $response, 2);
  return { ok => $status == 200 ? JSON::PP::true : JSON::PP::false, reply => $body // '', detail => "HTTP $status" };
}

# A DNS query given as hex, over UDP or TCP (length-prefixed); "reply" is the answer as hex. Like a stub
# resolver it asks again every "retryMs" until "timeoutMs": the tunnel's resolver loses a query now and then
# (v2ray's DNS-over-HTTPS client reuses a dead connection), and a lost query must not read as a block.
sub dns {
  my ($a) = @_;
  my $query = pack('H*', $a->{query});
  my $deadline = time + $a->{timeoutMs} / 1000;
  my ($tries, $result) = (0);
  while (1) {
    $tries++;
    my $left = ($deadline - time) * 1000;
    my $ms = $left < $a->{retryMs} ? $left : $a->{retryMs};
    $result = $a->{transport} eq 'tcp' ? dns_tcp($a, $query, $ms) : dns_udp($a, $query, $ms);
    # Only silence is worth another try; a refusal or an unreachable network is the answer.
    last if $result->{ok} || $result->{error} !~ /^(ETIMEDOUT|no answer)/ || time >= $deadline;
  }
  $result->{detail} = "try $tries";
  return $result;
}

sub dns_tcp {
  my ($a, $query, $ms) = @_;
  my $until = time + $ms / 1000;
  my ($s, $error) = connect_tcp($a->{host}, $a->{port}, $ms);
  return $error if $error;
  syswrite($s, pack('n', length $query) . $query) or return fail('send');
  my $data = read_all($s, ($until - time) * 1000, 2);
  return { ok => JSON::PP::false, error => 'no answer (tcp)' } if length($data) < 2;
  my $want = 2 + unpack('n', $data);
  $data .= read_all($s, ($until - time) * 1000, $want - length $data) if length($data) < $want;
  return { ok => JSON::PP::false, error => 'short answer (tcp)' } if length($data) < $want;
  return { ok => JSON::PP::true, reply => unpack('H*', substr($data, 2, $want - 2)) };
}

sub dns_udp {
  my ($a, $query, $ms) = @_;
  my ($family, $peer) = address($a->{host}, $a->{port});
  socket(my $s, $family, SOCK_DGRAM, IPPROTO_UDP) or return fail('socket');
  connect($s, $peer) or return fail('connect');
  send($s, $query, 0) or return fail('send');
  return { ok => JSON::PP::false, error => 'ETIMEDOUT (no answer)' } unless wait_readable($s, $ms);
  defined(recv($s, my $answer, 65536, 0)) or return fail('recv');
  return { ok => JSON::PP::true, reply => unpack('H*', $answer) };
}

# Datagrams with nothing to answer them: only the lab's packet counters can tell where they went.
sub datagrams {
  my ($a) = @_;
  my $protocol = $a->{protocol} // IPPROTO_UDP;
  my ($family, $peer) = address($a->{host}, $a->{port});
  socket(my $s, $family, SOCK_DGRAM, $protocol) or return fail('socket');
  my $payload = 'x' x $a->{size};
  for (1 .. $a->{count}) {
    defined(send($s, $payload, 0, $peer)) or return fail('send');
    select(undef, undef, undef, 0.02);
  }
  return { ok => JSON::PP::true, detail => "sent $a->{count}" };
}

sub checksum {
  my $sum = unpack('%32n*', $_[0] . (length($_[0]) % 2 ? "\0" : ''));
  $sum = ($sum >> 16) + ($sum & 0xffff) while $sum >> 16;
  return ~$sum & 0xffff;
}

# ICMP echo through an unprivileged ping socket (net.ipv4.ping_group_range admits every group in Docker).
sub ping {
  my ($a) = @_;
  socket(my $s, AF_INET, SOCK_DGRAM, IPPROTO_ICMP) or return fail('socket');
  my $echo = pack('CCnnn', 8, 0, 0, 0, 1) . 'ccp-leak-suite';
  substr($echo, 2, 2) = pack('n', checksum($echo));
  defined(send($s, $echo, 0, scalar pack_sockaddr_in(0, inet_aton($a->{host})))) or return fail('send');
  return { ok => JSON::PP::false, error => 'ETIMEDOUT (no echo reply)' } unless wait_readable($s, $a->{timeoutMs});
  defined(recv($s, my $reply, 65536, 0)) or return fail('recv');
  return { ok => JSON::PP::true, detail => 'echo reply' };
}

# Raw IP and packet sockets need CAP_NET_RAW; "ok" if any of them opens.
sub raw {
  my @errors;
  for my $kind ([AF_INET, SOCK_RAW, IPPROTO_ICMP, 'inet/icmp'], [AF_INET, SOCK_RAW, IPPROTO_RAW, 'inet/raw'],
    [AF_PACKET_, SOCK_RAW, 0x0300, 'packet'])
  {
    if (socket(my $s, $kind->[0], $kind->[1], $kind->[2])) {
      return { ok => JSON::PP::true, detail => "opened a $kind->[3] raw socket" };
    }
    push @errors, fail("raw $kind->[3]")->{error};
  }
  return { ok => JSON::PP::false, error => join('; ', @errors) };
}

# The egress gateway's upstream mark on our own socket (needs CAP_NET_ADMIN); if it sticks, try to use it.
sub so_mark {
  my ($a) = @_;
  socket(my $s, AF_INET, SOCK_STREAM, IPPROTO_TCP) or return fail('socket');
  setsockopt($s, SOL_SOCKET, SO_MARK, pack('I', $a->{mark})) or return fail('setsockopt SO_MARK');
  my ($connected, $error) = connect_socket($s, scalar pack_sockaddr_in($a->{port}, inet_aton($a->{host})),
    $a->{timeoutMs});
  return { ok => JSON::PP::true, detail => $error ? "mark set; $error->{error}" : 'mark set; connected' };
}

# An nftables table, sent as one nfnetlink batch the way nft does it: the kernel answers with an ack whose
# error is 0 when the table was made.
sub nft_table {
  my ($a) = @_;
  socket(my $s, AF_NETLINK_, SOCK_RAW, NETLINK_NETFILTER) or return fail('socket netlink');
  my $message = sub {
    my ($type, $flags, $seq, $family, $resid, $payload) = @_;
    my $body = pack('CCn', $family, 0, $resid) . $payload;
    return pack('LSSLL', 16 + length $body, $type, $flags, $seq, 0) . $body;
  };
  my $name = "ccp_leak\0";
  $name .= "\0" x ((4 - length($name) % 4) % 4);
  my $attribute = pack('SS', 4 + length("ccp_leak\0"), 1) . $name;
  # NFNL_MSG_BATCH_BEGIN/END carry the nftables subsystem id; NEWTABLE asks to create with an ack.
  my $batch = $message->(0x10, 0x1, 1, 0, 10, '')
    . $message->((10 << 8) | 0, 0x1 | 0x4 | 0x400, 2, 1, 0, $attribute)
    . $message->(0x11, 0x1, 3, 0, 10, '');
  send($s, $batch, 0, pack('SSLL', AF_NETLINK_, 0, 0, 0)) or return fail('send netlink');
  return { ok => JSON::PP::false, error => 'ETIMEDOUT (no netlink ack)' } unless wait_readable($s, $a->{timeoutMs});
  defined(recv($s, my $reply, 65536, 0)) or return fail('recv netlink');
  my $type = (unpack('LS', $reply))[1];
  return { ok => JSON::PP::false, error => "netlink message type $type" } unless $type == 2;
  my $code = unpack('l', substr($reply, 16, 4));
  return { ok => JSON::PP::true, detail => 'table created' } if $code == 0;
  $! = -$code;
  return fail('nfnetlink NEWTABLE');
}

# A program from the image (ip, sysctl); "ok" when it exits 0, else its last line of error output.
sub command {
  my ($a) = @_;
  my $pid = open(my $out, '-|') // return fail('fork');
  if ($pid == 0) {
    open(STDERR, '>&', \*STDOUT);
    exec { $a->{argv}[0] } @{ $a->{argv} } or do { print "exec: $!\n"; exit 127 };
  }
  my $text = join '', <$out>;
  close $out;
  my @lines = grep { length } split /\n/, $text;
  return { ok => JSON::PP::true, detail => $lines[-1] // 'exit 0' } if $? == 0;
  return { ok => JSON::PP::false, error => ($lines[-1] // 'no output') . ' (exit ' . ($? >> 8) . ')' };
}

# A TCP connection and nothing more; from "source" when given, an address that is not this machine's (IP_TRANSPARENT, root's):
# what a spoofer on the link would send.
sub connect_only {
  my ($a) = @_;
  my ($family, $peer) = address($a->{host}, $a->{port});
  socket(my $s, $family, SOCK_STREAM, IPPROTO_TCP) or return fail('socket');
  if ($a->{source}) {
    setsockopt($s, IPPROTO_IP, 19, 1) or return fail('IP_TRANSPARENT');
    bind($s, pack_sockaddr_in(0, inet_aton($a->{source}))) or return fail('bind');
  }
  my (undef, $error) = connect_socket($s, $peer, $a->{timeoutMs});
  return $error // { ok => JSON::PP::true, detail => 'connected' };
}

sub capabilities {
  open(my $status, '<', '/proc/self/status') or return fail('open /proc/self/status');
  my %caps = map { /^(Cap\w+):\s+(\w+)/ ? ($1 => $2) : () } <$status>;
  return { ok => JSON::PP::true, reply => encode_json(\%caps) };
}

my %kinds = (http => \&http_get, dns => \&dns, datagrams => \&datagrams, ping => \&ping, raw => \&raw,
  so_mark => \&so_mark, nft => \&nft_table, command => \&command, capabilities => \&capabilities,
  connect => \&connect_only);

my @children;
for my $attempt (@$attempts) {
  my $pid = fork() // die "fork: $!";
  if ($pid == 0) {
    my $result = eval { $kinds{$attempt->{kind}}->($attempt) }
      // { ok => JSON::PP::false, error => "probe error: " . ($@ || 'unknown kind') };
    $result->{id} = $attempt->{id};
    # One write per line: children share the pipe, and lines this short are written atomically.
    syswrite(STDOUT, encode_json($result) . "\n");
    exit 0;
  }
  push @children, $pid;
}
waitpid($_, 0) for @children;
