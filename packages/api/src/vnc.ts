import Type from 'typebox';
import { Timestamp } from './common.js';

export const VncState = Type.Union(
  [
    Type.Literal('running'),
    Type.Literal('starting'),
    Type.Literal('stopped'),
    Type.Literal('host_stopped'),
    Type.Literal('unavailable'),
  ],
  {
    description:
      '`host_stopped`: the host is not running; `unavailable`: the host runs but its desktop cannot be ' +
      'controlled (an image without one, or its supervisor is gone)',
  },
);

export const VncStatus = Type.Object({
  status: VncState,
  running: Type.Boolean({ description: 'The display answers and the web client is served' }),
  can_start: Type.Boolean(),
  can_restart: Type.Boolean(),
  auto_restart_limited: Type.Boolean({
    description:
      'The watchdog restarted the desktop 3 times within 60 seconds and left it stopped; cleared by a start ' +
      'or restart',
  }),
  display: Type.Union([Type.String(), Type.Null()], { description: 'X display inside the workspace, `:1`' }),
  websocket_port: Type.Union([Type.Integer(), Type.Null()], {
    description: "websockify's port inside the workspace (reached only through the gateway's proxy)",
  }),
});

export const VncTicket = Type.Object({
  url: Type.String({
    description:
      'The desktop page with a one-time ticket (`&ticket=`), for a browser to open within 60 seconds: the first ' +
      "request redirects to the same page below a path holding a pass for this host's desktop (no cookie). The " +
      'ticket opens the desktop once, on this host and portal only, and dies with a password change.',
  }),
  expires_at: Timestamp,
});

export type VncState = Type.Static<typeof VncState>;
export type VncStatus = Type.Static<typeof VncStatus>;
export type VncTicket = Type.Static<typeof VncTicket>;
