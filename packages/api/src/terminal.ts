import Type from 'typebox';
import { Timestamp } from './common.js';
import { SESSION_NAME_PATTERN } from './tmux.js';

/** A tmux session name, as `ccp --session` takes it. */
export const TerminalSessionName = Type.String({
  pattern: SESSION_NAME_PATTERN,
  description: 'A tmux session name: letters, digits, `_` and `-`, at most 64',
});

export const TerminalMode = Type.Union(
  [Type.Literal('attach'), Type.Literal('new'), Type.Literal('take_over')],
  {
    description:
      'As ccp: `attach` joins the session (made when missing; other clients stay), `new` starts a session that ' +
      'must not exist yet (a fresh name is picked when none is given), `take_over` detaches the other clients first',
  },
);

export const TerminalTicketRequest = Type.Object(
  {
    session: Type.Optional(TerminalSessionName),
    mode: Type.Optional(TerminalMode),
    cols: Type.Optional(
      Type.Integer({ minimum: 10, maximum: 1000, description: 'Initial width in columns' }),
    ),
    rows: Type.Optional(Type.Integer({ minimum: 4, maximum: 500, description: 'Initial height in rows' })),
  },
  { additionalProperties: false },
);

export const TerminalTicket = Type.Object({
  url: Type.String({
    description:
      "The terminal's WebSocket address with a one-time ticket (`?ticket=`), for a browser to open within 60 " +
      'seconds: good once, on this host and portal only, for the account that asked, and dead with a password ' +
      'change. Binary frames carry the terminal both ways; text frames from the browser are JSON controls ' +
      '(`{"type":"resize","cols":80,"rows":24}`, `{"type":"scroll","lines":-5}`)',
  }),
  session: TerminalSessionName,
  mode: TerminalMode,
  expires_at: Timestamp,
});

export const TerminalSession = Type.Object({
  name: TerminalSessionName,
  created_at: Timestamp,
  attached_clients: Type.Integer({ description: 'Terminals (ccp, SSH, browsers) attached now' }),
  windows: Type.Integer(),
});

export const TerminalSessionList = Type.Object({ items: Type.Array(TerminalSession) });

export type TerminalMode = Type.Static<typeof TerminalMode>;
export type TerminalTicketRequest = Type.Static<typeof TerminalTicketRequest>;
export type TerminalTicket = Type.Static<typeof TerminalTicket>;
export type TerminalSession = Type.Static<typeof TerminalSession>;
export type TerminalSessionList = Type.Static<typeof TerminalSessionList>;
