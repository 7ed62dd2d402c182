import type { EgressTrafficHours } from '@ccp/api';
import { useQuery } from '@tanstack/react-query';
import { api } from '../api';
import { bytes } from '../format';
import { Loading, Section } from './ui';

const HOURS = 24;
const HOUR_MS = 3_600_000;
/** The chart's drawing units (the SVG scales to the card's width). */
const WIDTH = 720;
const HEIGHT = 120;
const SLOT = WIDTH / HOURS;
const BAR = SLOT * 0.4;
/** Each hour's bars, left to right (their colours in styles.css). */
const BARS = ['traffic-sent', 'traffic-received'];

interface Hour {
  start: number;
  sent: number;
  received: number;
}

/** The last HOURS hours, oldest first, each with its bytes summed over the egress IPs that carried them. */
function hoursOf(rows: EgressTrafficHours['hours'], first: number): Hour[] {
  const hours = Array.from({ length: HOURS }, (_, i) => ({
    start: first + i * HOUR_MS,
    sent: 0,
    received: 0,
  }));
  for (const row of rows) {
    const hour = hours[Math.round((Date.parse(row.hour) - first) / HOUR_MS)];
    if (!hour) continue;
    hour.sent += row.sent_bytes;
    hour.received += row.received_bytes;
  }
  return hours;
}

const clock = (ms: number) =>
  new Date(ms).toLocaleTimeString(undefined, { hour: '2-digit', minute: '2-digit' });

/**
 * What the host sent and received through its upstream in the last 24 hours, hour by hour, as its egress
 * gateway counted it (sampled every minute): totals above, a pair of bars an hour, each hour's figures on hover.
 */
export function HostTrafficChart({ hostId, scope }: { hostId: string; scope: 'admin' | 'user' }) {
  const first = Math.floor(Date.now() / HOUR_MS) * HOUR_MS - (HOURS - 1) * HOUR_MS;
  const traffic = useQuery({
    queryKey: ['egress-traffic', 'hours', scope, hostId],
    queryFn: () => {
      const query = { host_id: hostId, from: new Date(first).toISOString() };
      return scope === 'admin' ? api.admin.egressTraffic.hours(query) : api.user.egressTrafficHours(query);
    },
    refetchInterval: 60_000,
  });
  const title = 'Traffic through the upstream';
  if (!traffic.data)
    return (
      <Section title={title}>
        <Loading error={traffic.error} />
      </Section>
    );
  const hours = hoursOf(traffic.data.hours, first);
  const sent = hours.reduce((sum, h) => sum + h.sent, 0);
  const received = hours.reduce((sum, h) => sum + h.received, 0);
  const top = Math.max(1, ...hours.map((h) => Math.max(h.sent, h.received)));
  const height = (count: number) => (count === 0 ? 0 : Math.max(1, (count / top) * HEIGHT));
  return (
    <Section title={title}>
      <p data-testid="host-traffic-total">
        Last 24 hours: sent <strong>{bytes(sent)}</strong>, received <strong>{bytes(received)}</strong>
        <span className="hint"> · highest hour {bytes(top)}</span>
      </p>
      <svg
        className="traffic-chart"
        viewBox={`0 0 ${WIDTH} ${HEIGHT + 16}`}
        role="img"
        aria-label={`Bytes per hour, last 24 hours: sent ${bytes(sent)}, received ${bytes(received)}`}
        data-testid="host-traffic-chart"
      >
        <line className="traffic-axis" x1={0} x2={WIDTH} y1={HEIGHT + 0.5} y2={HEIGHT + 0.5} />
        {hours.map((h, i) => (
          <g key={h.start} data-testid={h.sent + h.received > 0 ? 'traffic-hour' : undefined}>
            <title>
              {clock(h.start)}–{clock(h.start + HOUR_MS)}: sent {bytes(h.sent)}, received {bytes(h.received)}
            </title>
            {/* The whole slot answers the hover, not only the bars. */}
            <rect className="traffic-slot" x={i * SLOT} y={0} width={SLOT} height={HEIGHT} />
            {[h.sent, h.received].map((count, bar) => (
              <rect
                key={BARS[bar]}
                className={BARS[bar]}
                x={i * SLOT + SLOT * (0.1 + 0.4 * bar)}
                y={HEIGHT - height(count)}
                width={BAR}
                height={height(count)}
              />
            ))}
          </g>
        ))}
        {/* Hour boundaries: the chart's start, middle and end (the end of this hour), inside its edges. */}
        <text className="traffic-label" x={0} y={HEIGHT + 13} textAnchor="start">
          {clock(first)}
        </text>
        <text className="traffic-label" x={WIDTH / 2} y={HEIGHT + 13} textAnchor="middle">
          {clock(first + (HOURS / 2) * HOUR_MS)}
        </text>
        <text className="traffic-label" x={WIDTH} y={HEIGHT + 13} textAnchor="end">
          {clock(first + HOURS * HOUR_MS)}
        </text>
      </svg>
      <p className="hint traffic-legend">
        <span className="traffic-key traffic-sent" /> sent <span className="traffic-key traffic-received" />{' '}
        received
      </p>
    </Section>
  );
}
