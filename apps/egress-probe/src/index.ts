export { ConfigError, type ListenAddress, type ProbeConfig, parseProbeConfig, usage } from './config.js';
export { answerQuery, type DnsZone } from './dns.js';
export { DnsLog, type DnsLogEntry, type DnsTransport } from './dns-log.js';
export { type RunningProbe, startProbe } from './probe.js';
