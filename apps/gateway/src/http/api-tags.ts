/**
 * The groups of the API document, in the order the reference lists them; every route's `tags` names one of
 * these (the OpenAPI tests and the lint fail on another).
 */
export const API_TAGS = [
  { name: 'public', description: 'Health of the gateway, for load balancers and monitoring; no token.' },
  { name: 'auth', description: 'Log in with a username and password for a bearer token (JWT).' },
  {
    name: 'access',
    description:
      "How users reach a workspace without a token: the entry script and its owner's-password check, the " +
      'bootstrap script and its tasks, and the ccp CLI download.',
  },
  { name: 'admin: users', description: 'Accounts, their passwords, expiry, SSH credentials and SSH keys.' },
  {
    name: 'admin: egress IPs',
    description: 'Upstream proxies the workspaces leave through: register, edit, test, delete.',
  },
  {
    name: 'admin: hosts',
    description: "Workspaces: create, start, stop, rebuild, delete, their desktop, and the gateway's images.",
  },
  {
    name: 'admin: bindings',
    description: 'Which egress IPs a host uses: the oldest binding carries the traffic, the others stand by.',
  },
  {
    name: 'admin: tasks',
    description: 'Long-running work (starts, stops, rebuilds, image builds) and its steps.',
  },
  { name: 'admin: events', description: 'The event log, the live event stream and the dashboard counts.' },
  { name: 'admin: nodes', description: 'The gateways sharing one database, and removing one gone for good.' },
  {
    name: 'user portal',
    description: "A user's own account, hosts, tasks, desktops and live events (a user token).",
  },
] as const;

export type ApiTag = (typeof API_TAGS)[number]['name'];
