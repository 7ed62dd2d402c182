export * from './auth.js';
export * from './common.js';
export * from './egress.js';
export * from './events.js';
export * from './health.js';
export * from './hosts.js';
export * from './ssh-keys.js';
export * from './users.js';
