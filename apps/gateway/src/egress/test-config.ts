import type { TestConfigParams } from './tunnel-engine.js';
import { assertPort, tunnelConfig, type V2rayConfig } from './v2ray-tunnel.js';

const LOOPBACK = '127.0.0.1';

/**
 * The v2ray config for one egress test run by the control plane: a loopback proxy for the probes and a loopback
 * DNS port, both leaving only through the upstream. No socket mark (the control plane has no kill switch and
 * may lack CAP_NET_ADMIN) and no sniffing (the probes dial IPv4 literals on purpose; a sniffed name could make
 * the exit leave over IPv6).
 */
export function v2rayTestConfig(params: TestConfigParams): V2rayConfig {
  const { probeInbound } = params;
  assertPort('probeInbound.port', probeInbound.port);
  assertPort('dnsPort', params.dnsPort);
  if (probeInbound.port === params.dnsPort) throw new TypeError('probeInbound.port and dnsPort must differ');
  return tunnelConfig({
    upstream: params.upstream,
    dns: params.dns,
    dnsListen: { address: LOOPBACK, port: params.dnsPort },
    inbounds: [
      {
        tag: 'probe-in',
        listen: LOOPBACK,
        port: probeInbound.port,
        protocol: probeInbound.protocol,
        settings: probeInbound.protocol === 'socks' ? { auth: 'noauth', udp: false } : {},
      },
    ],
    rules: [],
  });
}
